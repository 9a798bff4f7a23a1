#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: bpf_object
short_description: Build the edgeft data path once into BPF objects, cached by content
version_added: 0.1.0
description:
  - Compiles the edgeft data path (C(failover_tc.c) and its headers in O(src_dir)) with clang into
    one BPF object (ELF with BTF) per plane, where clang is - the Ansible controller, with
    C(delegate_to) and C(run_once) - so a fleet of any size compiles each plane's programs once.
  - Each object is named C(edgeft-p<plane>-<digest>.bpf.o) in O(cache_dir), where the digest covers
    the sources and headers, the generated layout asserts, the defines and the compiler's version;
    an object already in the cache is not built again.
  - The programs use only UAPI types and no CO-RE relocations, so one object serves every kernel
    the data path supports (5.12 and newer). M(edgeft.failover.ebpf_program) loads them on the
    targets with libbpf, which needs no compiler and no kernel headers there.
  - It also builds the TCP program (C(tcp_peers.c)), one object for every plane, named
    C(edgeft-tcp-<digest>.bpf.o), which the failover agent loads and attaches to a cgroup
    (the ebpf_failover role's C(ebpf_failover_agent_tcp)).
author:
  - edgeft maintainers (@edgeft)
options:
  src_dir:
    description:
      - The collection's C(bpf/) directory on the host the module runs on, for example
        C({{ role_path }}/../../bpf) in a role of the collection.
    type: path
    required: true
  planes:
    description:
      - The plane indexes to build, one object each (the plane is built into its programs).
      - Defaults to every plane below C(EDGEFT_MAX_PLANES), so that every host of a play finds its planes.
    type: list
    elements: int
  defines:
    description:
      - The data path's build-time tunables (C(EDGEFT_MAX_PEERS), C(EDGEFT_MAX_ADDRS),
        C(EDGEFT_MAX_PLANES), C(EDGEFT_SEEN_RES_NS), C(EDGEFT_LEARN_HOLD_NS), C(EDGEFT_WAKE_IDLE_NS)); part of the digest.
      - Other names are refused.
    type: dict
    default: {}
  cache_dir:
    description:
      - Directory for the objects, created if missing. Objects of other digests stay; remove the
        directory to reclaim the space.
    type: path
    required: true
  clang:
    description:
      - The clang to build with. libbpf's headers (C(bpf/bpf_helpers.h), Debian package
        C(libbpf-dev)) and the kernel's UAPI headers (C(linux-libc-dev)) must be installed beside it.
    type: str
    default: clang
requirements:
  - clang 14 or newer with the BPF target
  - libbpf's development headers (Debian/Ubuntu C(libbpf-dev), RHEL family C(libbpf-devel))
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes.info_module
attributes:
  check_mode:
    support: full
    details: Computes the digests and object names and reports which are cached; builds nothing.
notes:
  - Changes only O(cache_dir) on the host it runs on; C(changed) means an object was built.
seealso:
  - module: edgeft.failover.ebpf_program
'''

EXAMPLES = r'''
- name: Build the data path's objects once for the play, on the controller
  edgeft.failover.bpf_object:
    src_dir: "{{ role_path }}/../../bpf"
    planes: [0, 1]
    defines:
      EDGEFT_MAX_PEERS: 8192
    cache_dir: "{{ lookup('ansible.builtin.env', 'HOME') }}/.cache/edgeft/bpf-objects"
  delegate_to: localhost
  run_once: true
  register: edgeft_objects
'''

RETURN = r'''
objects:
  description: One entry per plane, in plane order.
  returned: always
  type: list
  elements: dict
  contains:
    plane:
      description: The plane index built into the object.
      type: int
    path: &object_path
      description: The object's path in O(cache_dir).
      type: str
    file:
      description: Its file name, C(edgeft-p<plane>-<digest>.bpf.o).
      type: str
    digest: &object_digest
      description: The digest of its sources and build settings.
      type: str
    cached: &object_cached
      description: Whether the object was already in the cache (nothing built).
      type: bool
  sample:
    - plane: 0
      path: /root/.cache/edgeft/bpf-objects/edgeft-p0-74191d293e49a304.bpf.o
      file: edgeft-p0-74191d293e49a304.bpf.o
      digest: 74191d293e49a304
      cached: true
tcp_object:
  description: The TCP program's object (C(bpf/tcp_peers.c)), which the failover agent loads.
  returned: always
  type: dict
  contains:
    path: *object_path
    file:
      description: Its file name, C(edgeft-tcp-<digest>.bpf.o).
      type: str
    digest: *object_digest
    cached: *object_cached
  sample:
    path: /root/.cache/edgeft/bpf-objects/edgeft-tcp-51639b1252c2e174.bpf.o
    file: edgeft-tcp-51639b1252c2e174.bpf.o
    digest: 51639b1252c2e174
    cached: true
compiler:
  description: The first line of the compiler's C(--version).
  returned: always
  type: str
  sample: Debian clang version 14.0.6
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils.module_result import run_module
from ansible_collections.edgeft.failover.plugins.module_utils.program.build_objects import ARGUMENT_SPEC, run


def main():
    run_module(AnsibleModule, ARGUMENT_SPEC, run, pyroute2=False)


if __name__ == '__main__':
    main()
