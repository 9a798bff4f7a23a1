#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: ebpf_program
short_description: Load eBPF tc programs (prebuilt objects or bcc) and attach them to interfaces
version_added: 0.1.0
description:
  - Loads prebuilt BPF objects with the system's libbpf (O(object),
    O(attach[].object)), or compiles a C source with bcc on the target
    (O(src)), and attaches their functions as direct-action C(bpf) filters on
    the C(clsact) qdisc of interfaces (tc ingress or egress), through netlink
    (pyroute2).
  - Objects need no compiler and no kernel headers on the target; build them
    once for a fleet with M(edgeft.failover.bpf_object) on the controller.
  - Maps declared pinned by the source are pinned under O(pin_root), so every
    program of the host, later reloads and the edgeft agent share one set of
    maps.
  - Idempotent without reloading. Each filter is named
    C(edgeft:<function>:<digest>). For an object the digest covers its bytes
    and the function; for bcc the source and the headers it includes from its
    own directory and O(include_dirs), the defines, the function, O(pin_root)
    and the bcc version. A run reads the names back from the kernel and loads
    only where they differ.
  - Objects are checked before anything changes. An unreadable, truncated or
    corrupt file, an object whose maps are not the edgeft layout version this
    collection knows, or whose map sizes differ from the maps already pinned,
    is refused by name, and the programs attached before stay.
  - A changed program replaces the old one in place (same parent, priority
    and handle, tc C(replace)), so no packet is lost, and the pinned maps
    keep their state. All programs are compiled and loaded before the first
    filter is touched; if a swap fails, the filters already swapped get their
    previous programs back and the module fails, leaving the host as it was.
  - Never replaces or deletes a qdisc or filter edgeft did not create. A
    foreign filter at an attach point's priority fails the task; a C(clsact)
    qdisc that existed before is used and never deleted. The C(clsact) qdiscs
    and pins edgeft creates are recorded under O(state_dir), with the network
    namespace and boot they belong to.
  - Everything is validated before anything changes.
author:
  - edgeft maintainers (@edgeft)
options:
  src:
    description:
      - Path on the target of the C source, for example the collection's
        C(bpf/failover_tc.c) copied by a role to C(/usr/local/lib/edgeft/bpf/).
      - Its directory is on the include path.
      - With O(state=present), either O(src) or objects (O(object) or
        O(attach[].object)) are required, not both.
      - When the source includes C(edgeft_maps.h) (the edgeft data path), the
        map layout asserts of the edgeft data path are appended to it and
        existing pins under O(pin_root) are checked against that layout first.
    type: path
  object:
    description:
      - Path on the target of a prebuilt BPF object (ELF with BTF), loaded with
        libbpf, for every attach point without an O(attach[].object).
      - Its maps are pinned under O(pin_root) by name; a compatible map
        already pinned there is reused with its contents.
    type: path
  include_dirs:
    description:
      - More directories for the include path (after the source's own).
    type: list
    elements: path
    default: []
  defines:
    description:
      - Compile-time macros for every attach point, as C(NAME) to value
        (rendered C(-DNAME=value); a null value renders C(-DNAME)).
      - For the edgeft data path, for example C(EDGEFT_MAX_PEERS) or
        C(EDGEFT_SEEN_RES_NS). C(EDGEFT_PIN_DIR) is set from O(pin_root).
    type: dict
    default: {}
  pin_root:
    description:
      - Directory on a bpf filesystem where the programs' maps are pinned;
        created if missing.
      - The file system must be a bpffs (statfs magic C(0xcafe4a11)), for
        example C(/sys/fs/bpf/edgeft). Hosts run under C(ip netns exec) (the
        C(edgeft.failover.netns) connection) do not see C(/sys/fs/bpf),
        because it remounts C(/sys); use a bpffs mounted outside C(/sys) there.
    type: path
    required: true
  attach:
    description:
      - The attach points. Each (interface, direction, priority) may appear once.
    type: list
    elements: dict
    required: true
    suboptions:
      interface:
        description: The interface to attach to; it must exist for O(state=present).
        type: str
        required: true
      direction:
        description: Which clsact hook, C(ffff:fff2) (ingress) or C(ffff:fff3) (egress).
        type: str
        required: true
        choices: [ingress, egress]
      function:
        description:
          - The C function to load as a C(sched_cls) program.
          - Defaults to C(edgeft_ingress) or C(edgeft_egress), after O(attach[].direction).
        type: str
      object:
        description:
          - The prebuilt object of this attach point (the edgeft data path has
            one per plane, with the plane built into it), over the top-level O(object).
          - Defines and O(attach[].plane) are built into an object and refused with it.
        type: path
      plane:
        description:
          - Plane index of this interface, passed as C(-DEDGEFT_PLANE=<plane>) (bcc only).
          - Must be below C(EDGEFT_MAX_PLANES) for the edgeft data path.
        type: int
      defines:
        description:
          - Macros for this attach point only, over the top-level O(defines).
        type: dict
      priority:
        description:
          - tc filter priority (1..65535; lower runs first).
          - The default 3792 (C(0x0ed0)) runs before tc's automatic priorities
            (49152 and below) and is unlikely to collide; the edgeft programs
            pass what they do not steer, so filters behind them still run.
        type: int
        default: 3792
      handle:
        description: tc filter handle (1..4294967295).
        type: int
        default: 60919
  state:
    description:
      - V(present) compiles and attaches (or keeps, or replaces in place).
      - V(absent) deletes the filters edgeft created at the attach points
        (matched by name and priority/handle; O(src) is not needed) and a
        C(clsact) qdisc edgeft created once no filter is left on it.
    type: str
    choices: [present, absent]
    default: present
  unpin_maps:
    description:
      - With O(state=absent), also unpin the maps the removed programs used and
        the maps earlier runs pinned under O(pin_root), except those that
        edgeft filters still attached in this network namespace use.
      - Off by default because the maps hold the peer table.
    type: bool
    default: false
requirements:
  - root on the target
  - Linux 5.12 or newer for O(state=present)
  - with objects, libbpf 1.x (Debian/Ubuntu package C(libbpf1), RHEL family C(libbpf))
  - with O(src), bcc's Python bindings (Debian/Ubuntu package C(python3-bpfcc)) and the running kernel's headers (C(linux-headers-$(uname -r)))
  - pyroute2 (Debian package C(python3-pyroute2))
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes
  - edgeft.failover.state_dir
attributes:
  check_mode:
    support: full
    details: Validates, computes the digests and reports what would change; compiles and loads nothing.
notes:
  - Runs in the network namespace its connection places it in.
  - Filters at other priorities, and qdiscs other than C(clsact), are left alone.
    An C(ingress) qdisc where C(clsact) belongs fails the task.
seealso:
  - name: edgeft data path
    description: The programs, maps and pinning this module deploys (docs/datapath.md in the collection).
    link: https://example.invalid/edgeft/failover/blob/main/docs/datapath.md
'''

EXAMPLES = r'''
- name: Attach the edgeft data path from objects built on the controller (edgeft.failover.bpf_object)
  edgeft.failover.ebpf_program:
    pin_root: /sys/fs/bpf/edgeft
    attach:
      - {interface: fab0, direction: egress, object: /usr/local/lib/edgeft/bpf/edgeft-p0-74191d293e49a304.bpf.o}
      - {interface: fab0, direction: ingress, object: /usr/local/lib/edgeft/bpf/edgeft-p0-74191d293e49a304.bpf.o}
      - {interface: fab1, direction: egress, object: /usr/local/lib/edgeft/bpf/edgeft-p1-0c55e1b0f2a7d913.bpf.o}
      - {interface: fab1, direction: ingress, object: /usr/local/lib/edgeft/bpf/edgeft-p1-0c55e1b0f2a7d913.bpf.o}

- name: Compile the edgeft data path with bcc on the target and attach it to both plane NICs
  edgeft.failover.ebpf_program:
    src: /usr/local/lib/edgeft/bpf/failover_tc.c
    pin_root: /sys/fs/bpf/edgeft
    attach:
      - {interface: fab0, direction: egress, plane: 0}
      - {interface: fab0, direction: ingress, plane: 0}
      - {interface: fab1, direction: egress, plane: 1}
      - {interface: fab1, direction: ingress, plane: 1}
  register: datapath

- name: Bigger peer table, and a lab host with its own bpffs and state directory
  edgeft.failover.ebpf_program:
    src: /usr/local/lib/edgeft/bpf/failover_tc.c
    defines:
      EDGEFT_MAX_PEERS: 8192
      EDGEFT_MAX_ADDRS: 65536
    pin_root: "/run/edgeft-lab/lab/bpf/{{ inventory_hostname }}"
    state_dir: "/run/edgeft-lab/lab/state/{{ inventory_hostname }}"
    attach: "{{ edgeft_attach }}"

- name: Remove the programs, keep the peer table
  edgeft.failover.ebpf_program:
    state: absent
    pin_root: /sys/fs/bpf/edgeft
    attach:
      - {interface: fab0, direction: egress}
      - {interface: fab0, direction: ingress}
      - {interface: fab1, direction: egress}
      - {interface: fab1, direction: ingress}
'''

RETURN = r'''
programs:
  description:
    - Per attach point (O(state=present)), what is attached after the run.
    - In check mode, programs that would be loaded have no RV(programs[].prog_id) yet.
  returned: always
  type: list
  elements: dict
  contains:
    <<: &attach_point
      interface:
        description: The interface.
        type: str
      direction:
        description: V(ingress) or V(egress).
        type: str
      priority:
        description: tc filter priority.
        type: int
      handle:
        description: tc filter handle.
        type: int
      name:
        description: The filter's name (tc's C(name) of its BPF program), C(edgeft:<function>:<digest>).
        type: str
    parent:
      description: The clsact parent, C(ffff:fff2) or C(ffff:fff3).
      type: str
    function:
      description: The C function loaded.
      type: str
    digest:
      description: The build digest recorded in the name.
      type: str
    prog_id:
      description: Kernel id of the attached program; null if not loaded yet (check mode).
      type: int
    prog_tag:
      description: The kernel's tag (hash) of the attached program, in hex.
      type: str
  sample:
    - interface: fab0
      direction: egress
      parent: "ffff:fff3"
      priority: 3792
      handle: 60919
      function: edgeft_egress
      name: "edgeft:edgeft_egress:5f0c3a9d41b2e877"
      digest: 5f0c3a9d41b2e877
      prog_id: 412
      prog_tag: "a04f5eef41a6ff1e"
pin_root:
  description: The normalised O(pin_root).
  returned: always
  type: str
  sample: /sys/fs/bpf/edgeft
pin_paths:
  description:
    - With O(state=present), the pins under O(pin_root) whose maps the attached programs use.
    - With O(state=absent), every map still pinned under O(pin_root).
  returned: always
  type: list
  elements: str
  sample: ["/sys/fs/bpf/edgeft/edgeft_peers_v1", "/sys/fs/bpf/edgeft/edgeft_state_v1"]
attached:
  description: Attach points that got a new filter.
  returned: always
  type: list
  elements: dict
  contains: *attach_point
  sample: [{interface: fab0, direction: egress, priority: 3792, handle: 60919, name: "edgeft:edgeft_egress:5f0c3a9d41b2e877"}]
replaced:
  description: Attach points whose program was replaced in place.
  returned: always
  type: list
  elements: dict
  contains: *attach_point
  sample: []
removed:
  description: Attach points whose filter was deleted (O(state=absent)).
  returned: always
  type: list
  elements: dict
  contains: *attach_point
  sample: []
clsact_created:
  description: Interfaces that got a clsact qdisc from this run.
  returned: always
  type: list
  elements: str
  sample: [fab0, fab1]
clsact_removed:
  description: Interfaces whose edgeft-created clsact qdisc was deleted (O(state=absent)).
  returned: always
  type: list
  elements: str
  sample: []
unpinned:
  description: Pins removed (O(state=absent) with O(unpin_maps=true)).
  returned: always
  type: list
  elements: str
  sample: []
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils.module_result import finish, require_pyroute2
from ansible_collections.edgeft.failover.plugins.module_utils.program.run import run as run_program
from ansible_collections.edgeft.failover.plugins.module_utils.program.spec import ARGUMENT_SPEC


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    require_pyroute2(module)

    def run():
        result = run_program(module.params, check_mode=module.check_mode)
        return result, result.pop('warnings')

    finish(module, run)


if __name__ == '__main__':
    main()
