#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: datapath
short_description: Load a host's failover programs, set its peer table and record both for the restore at boot, in one run
version_added: 0.1.0
description:
  - Runs M(edgeft.failover.ebpf_program) with O(ebpf_program), then M(edgeft.failover.peer_table) with
    O(peer_table), in one module run - the same steps, in the same order, as C(edgeft-agent restore-datapath)
    at boot. Each step validates its own arguments before it changes anything, as the modules do.
  - With O(record), writes both steps' arguments to that file, the one the restore at boot reads, once both
    succeeded; the file is replaced whole (a crash leaves the old or the new record), as JSON with sorted keys.
  - With O(prune_objects), the data path objects (C(edgeft-p*.bpf.o)) in that directory that the new record does
    not load are removed after the record is written, so the objects the restore at boot needs stay on disk.
  - One run instead of three saves two module runs per host on every deployment (each starts Python on the host).
author:
  - edgeft maintainers (@edgeft)
options:
  ebpf_program:
    description:
      - The arguments of M(edgeft.failover.ebpf_program), with its defaults for what is left out.
      - An argument that module does not have is refused, named as C(ebpf_program.<name>).
    type: dict
    required: true
  peer_table:
    description:
      - The arguments of M(edgeft.failover.peer_table), with its defaults for what is left out.
    type: dict
    required: true
  record:
    description:
      - The record file of the restore at boot, an absolute path; its directory is created when missing.
      - Left out, nothing is recorded.
    type: path
  prune_objects:
    description:
      - The directory of the data path's objects. Files named C(edgeft-p*.bpf.o) in it that the record's
        C(ebpf_program) arguments (its C(object) and C(attach[].object)) do not name are removed. Other files are
        left alone. Needs O(record).
      - Leave it out for the bcc loader, which installs sources instead of objects.
    type: path
requirements:
  - those of M(edgeft.failover.ebpf_program) and M(edgeft.failover.peer_table)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes
attributes:
  check_mode:
    support: full
    details:
      - Each step in its own check mode; the record is not written and no object is removed.
notes:
  - A step that fails stops the run there, before the record is written; a peer table that fails after the
    programs changed reports the program step's result with the failure.
seealso:
  - module: edgeft.failover.ebpf_program
  - module: edgeft.failover.peer_table
'''

EXAMPLES = r'''
- name: Load the programs, set the peer table and record both for the restore at boot
  edgeft.failover.datapath:
    ebpf_program:
      pin_root: /sys/fs/bpf/edgeft
      attach:
        - {interface: fab0, direction: egress, plane: 0, object: /usr/local/lib/edgeft/bpf/edgeft-p0-54adc8eaa58ad8a3.bpf.o}
        - {interface: fab0, direction: ingress, plane: 0, object: /usr/local/lib/edgeft/bpf/edgeft-p0-54adc8eaa58ad8a3.bpf.o}
    peer_table:
      pin_root: /sys/fs/bpf/edgeft
      planes:
        - {name: a, interface: fab0}
      peers:
        - name: r1h2
          planes:
            - {name: a, ipv4: 198.18.1.12/16}
    record: /var/lib/edgeft/datapath.json
    prune_objects: /usr/local/lib/edgeft/bpf
'''

RETURN = r'''
ebpf_program:
  description: What M(edgeft.failover.ebpf_program) returns (C(programs), C(attached), C(replaced), ...).
  returned: always
  type: dict
  sample: {changed: true, replaced: [{interface: fab0, direction: egress}]}
peer_table:
  description: What M(edgeft.failover.peer_table) returns (C(peers), C(added), C(updated), C(removed), ...).
  returned: always
  type: dict
  sample: {changed: false, added: [], updated: [], removed: []}
record:
  description: The record written (C(path), C(changed), C(removed), the objects removed); null without O(record).
  returned: always
  type: dict
  sample: {changed: true, path: /var/lib/edgeft/datapath.json, removed: [/usr/local/lib/edgeft/bpf/edgeft-p0-aaaa.bpf.o]}
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils.module_result import run_module
from ansible_collections.edgeft.failover.plugins.module_utils.restore import ARGUMENT_SPEC, run


def main():
    run_module(AnsibleModule, ARGUMENT_SPEC, run, diff_headers=('data path before', 'data path after'))


if __name__ == '__main__':
    main()
