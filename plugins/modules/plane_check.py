#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: plane_check
short_description: Check a plane end to end, also while it is drained
version_added: 0.1.0
description:
  - Sends check probes from this host's NIC of one plane to peers' addresses
    on that plane, as the pinned maps under O(pin_root) hold them, and reports,
    per peer (named as M(edgeft.failover.peer_table) recorded them in
    O(state_dir)), how many were answered and the round trip times.
  - The peers' edgeft data path answers check probes in the kernel, also on a
    plane they have drained (where it ignores the failover agent's probes). So
    during rolling switch maintenance a plane through a switch can be proven
    to work before traffic is moved back onto it, while every host behind the
    switch still has it drained.
  - Checks test exactly the plane they are sent on - the data path never
    steers them - and leave no trace in its counters, last-seen times or
    learned state. The module changes nothing, so it runs the same in check
    mode, and C(changed) is always false.
  - Unhealthy peers do not fail the task; test RV(healthy) or
    RV(unhealthy_peers) to decide.
author:
  - edgeft maintainers (@edgeft)
options:
  plane:
    description:
      - The plane to check, by name (see O(planes)) or by index (V(0) is the first plane).
    type: str
    required: true
  peers:
    description:
      - Inventory names of the peers to check (the names given to
        M(edgeft.failover.peer_table)).
      - When omitted, every peer with an address on O(plane) (of O(family),
        unless V(auto)) is checked. An empty list checks no peer.
      - An unknown name, or a peer without an address on O(plane), is an error.
    type: list
    elements: str
  family:
    description:
      - Address family of the checks. V(auto) uses IPv4 for a peer that has an
        IPv4 address on the plane, else IPv6.
      - This host's NIC of the plane must have a global address of each family
        used; the checks are sent from it.
    type: str
    choices: ['auto', '4', '6']
    default: auto
  count:
    description: Check probes sent to each peer (1 to 1000).
    type: int
    default: 5
  interval_ms:
    description: Milliseconds between two rounds of check probes (at least 1).
    type: int
    default: 20
  timeout_ms:
    description: Milliseconds to wait for the last replies after the last round (at least 1).
    type: int
    default: 500
  max_loss_percent:
    description:
      - A peer that lost more of its check probes than this (0 to 100) is
        unhealthy. A peer that answered none is always unhealthy.
    type: int
    default: 0
requirements:
  - root on the target
  - pyroute2 on the target (Debian package C(python3-pyroute2))
  - the edgeft data path attached on the peers (M(edgeft.failover.ebpf_program))
    and this host in their peer tables, since only known peers are answered
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes.info_module
  - edgeft.failover.pin_root
  - edgeft.failover.planes.names_only
  - edgeft.failover.state_dir
seealso:
  - module: edgeft.failover.plane_state
  - module: edgeft.failover.peer_table
'''

EXAMPLES = r'''
- name: Prove plane a through the repaired switch before undraining it
  edgeft.failover.plane_check:
    pin_root: /sys/fs/bpf/edgeft
    plane: a
  register: check

- name: Undrain plane a only if every peer answered on it
  edgeft.failover.plane_state:
    pin_root: /sys/fs/bpf/edgeft
    plane: a
    state: active
  when: check.healthy

- name: Check two peers over IPv6 with more probes, tolerating a little loss
  edgeft.failover.plane_check:
    pin_root: /sys/fs/bpf/edgeft
    plane: b
    peers: [r1h2, r2h1]
    family: "6"
    count: 100
    interval_ms: 5
    max_loss_percent: 1
  register: check_b

- name: Stop when a peer did not answer
  ansible.builtin.assert:
    that: check_b.healthy
    fail_msg: "plane b unhealthy towards {{ check_b.unhealthy_peers | join(', ') }}"
'''

RETURN = r'''
plane:
  description: The plane checked, and this host's NIC of it (where the checks left).
  returned: always
  type: dict
  sample: {name: a, index: 0, interface: fab0}
peers:
  description:
    - One entry per peer checked, sorted by name (C(#<id>) when no record names it).
    - C(address) is the peer's address on the plane the checks went to;
      C(sent), C(answered), C(lost) count check probes, C(loss_percent) is
      C(lost) in percent of C(sent).
    - C(rtt_ms_avg) and C(rtt_ms_max) are the round trip times of the
      answered probes in milliseconds (null when none was answered).
    - C(healthy) is true when the peer answered at least one probe and lost
      at most O(max_loss_percent).
  returned: always
  type: list
  elements: dict
  sample:
    - name: r1h2
      address: 198.18.1.12
      sent: 5
      answered: 5
      lost: 0
      loss_percent: 0.0
      rtt_ms_avg: 0.081
      rtt_ms_max: 0.112
      healthy: true
healthy:
  description: Every checked peer is healthy, and at least one peer was checked.
  returned: always
  type: bool
  sample: true
unhealthy_peers:
  description: Names of the checked peers that are not healthy.
  returned: always
  type: list
  elements: str
  sample: [r2h1]
checked:
  description: How many peers were checked.
  returned: always
  type: int
  sample: 3
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils import module_options
from ansible_collections.edgeft.failover.plugins.module_utils import plane_check as core
from ansible_collections.edgeft.failover.plugins.module_utils.module_result import finish, require_pyroute2


def main():
    module = AnsibleModule(
        argument_spec=dict(
            pin_root=module_options.pin_root(),
            plane=dict(type='str', required=True),
            planes=module_options.planes(),
            peers=dict(type='list', elements='str'),
            family=dict(type='str', choices=['auto', '4', '6'], default='auto'),
            count=dict(type='int', default=5),
            interval_ms=dict(type='int', default=20),
            timeout_ms=dict(type='int', default=500),
            max_loss_percent=dict(type='int', default=0),
            state_dir=module_options.state_dir(),
        ),
        supports_check_mode=True,
    )
    require_pyroute2(module)
    finish(module, lambda: core.plane_check(module.params))


if __name__ == '__main__':
    main()
