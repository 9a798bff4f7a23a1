#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: plane_state
short_description: Drain or undrain a plane of a host, and report the data path state
version_added: 0.1.0
description:
  - Sets or clears the DRAINED flag of one of the host's planes in its
    pinned edgeft maps. The egress programs then steer every known peer's
    traffic off a drained plane at once; the peers learn it from the first
    steered packet, so both directions move.
  - Undraining moves the traffic back - the host sends on the plane again and
    each peer forgets what it learned from the first packet it receives there.
  - Refuses to drain the host's last usable plane unless O(force=true).
  - Always reports every plane (flags, counters) and every peer (active
    plane, planes it avoids, last-seen ages, addresses); O(state=query) only
    reports.
author:
  - edgeft maintainers (@edgeft)
options:
  pin_root:
    description:
      - The bpffs directory of this host's pinned edgeft maps.
    type: path
    required: true
  plane:
    description:
      - The plane to drain or undrain, by name or by index (V(0) is the first plane).
      - Names come from O(planes), else from the plane names
        M(edgeft.failover.peer_table) recorded for O(pin_root).
      - Required unless O(state=query).
    type: str
  planes:
    description:
      - This host's planes in plane order, to name them; the same list as for
        M(edgeft.failover.peer_table).
      - When omitted, the names recorded by M(edgeft.failover.peer_table) are used.
    type: list
    elements: dict
    suboptions:
      name:
        description: Plane name.
        type: str
        required: true
      interface:
        description: The NIC of this host that carries the plane.
        type: str
        required: true
  state:
    description:
      - V(drained) moves known peers' traffic off O(plane); V(active) lets it
        carry traffic again; V(query) changes nothing.
    type: str
    choices: [drained, active, query]
    default: query
  force:
    description:
      - Drain O(plane) even when no other usable plane is left (every other
        plane is down or drained). Known peers' traffic then has nowhere to go
        and stays on the plane.
    type: bool
    default: false
  notify_peers:
    description:
      - After a change, send one ICMP echo request to every peer's address on
        O(plane), so that peers with no traffic to or from this host learn
        the change at once too.
    type: bool
    default: true
  state_dir:
    description:
      - Directory of the records of M(edgeft.failover.peer_table) (peer
        names, plane names), read to name what is reported.
    type: path
    default: /var/lib/edgeft
requirements:
  - root on the target
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
seealso:
  - module: edgeft.failover.peer_table
'''

EXAMPLES = r'''
- name: Drain plane a before its switch is powered off
  edgeft.failover.plane_state:
    pin_root: /sys/fs/bpf/edgeft
    plane: a
    state: drained

- name: Undrain it after the maintenance
  edgeft.failover.plane_state:
    pin_root: /sys/fs/bpf/edgeft
    plane: a
    state: active

- name: Show per-plane counters and per-peer state
  edgeft.failover.plane_state:
    pin_root: /sys/fs/bpf/edgeft
  register: dp

- name: Fail if a peer has not been heard on plane b for a second
  ansible.builtin.assert:
    that: dp.peers | selectattr('last_seen_age_ms.b', 'gt', 1000) | list | length == 0
'''

RETURN = r'''
plane:
  description: The plane acted on (null for a query without O(plane)).
  returned: always
  type: dict
  sample: {name: a, index: 0}
notified:
  description: Peers sent an echo request because of a change (see O(notify_peers)).
  returned: always
  type: int
  sample: 3
planes:
  description:
    - Every configured or named plane, with its flags after the task and its
      counters summed over CPUs.
    - C(counters) are C(tx_packets), C(tx_bytes) (to known peers, left on this
      plane), C(steered_packets), C(steered_bytes) (redirected off it),
      C(steer_skipped), C(steered_in_packets), C(steered_in_bytes) (redirected
      onto it), C(rx_packets), C(rx_bytes) (from known peers), C(learned) and
      C(unlearned) (peers moved onto / back to this plane by their traffic).
  returned: always
  type: list
  elements: dict
  sample:
    - name: a
      index: 0
      interface: fab0
      ifindex: 4
      up: true
      drained: true
      usable: false
      counters: {tx_packets: 10, tx_bytes: 980, steered_packets: 52, steered_bytes: 5096,
                 steer_skipped: 0, steered_in_packets: 0, steered_in_bytes: 0,
                 rx_packets: 12, rx_bytes: 1176, learned: 0, unlearned: 1}
peers:
  description:
    - Every peer in the maps, by name (C(#<id>) when no record names it).
    - C(last_seen_age_ms) is, per plane, how long ago a packet from the peer
      arrived on it (null if never); C(changed_age_ms) how long ago its plane
      choice last changed.
  returned: always
  type: list
  elements: dict
  sample:
    - name: r1h2
      id: 0
      active_plane: b
      down_planes: [a]
      learned_planes: [a]
      learn: true
      changed_age_ms: 5120
      last_seen_age_ms: {a: 5200, b: 3}
      addresses:
        planes:
          a: {ipv4: 198.18.1.12, ipv6: "fd0e:d6ef:7a00:1::c"}
          b: {ipv4: 198.19.1.12, ipv6: "fd0e:d6ef:7b00:1::c"}
        identity: []
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils import planes as core
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            pin_root=dict(type='path', required=True),
            plane=dict(type='str'),
            planes=dict(type='list', elements='dict', options=dict(
                name=dict(type='str', required=True),
                interface=dict(type='str', required=True),
            )),
            state=dict(type='str', choices=['drained', 'active', 'query'], default='query'),
            force=dict(type='bool', default=False),
            notify_peers=dict(type='bool', default=True),
            state_dir=dict(type='path', default='/var/lib/edgeft'),
        ),
        required_if=[('state', 'drained', ('plane',)), ('state', 'active', ('plane',))],
        supports_check_mode=True,
    )
    try:
        result, warnings = core.plane_state(module.params, module.check_mode)
    except core.OptionError as e:
        module.fail_json(msg=str(e))
    except (DatapathError, OSError) as e:
        module.fail_json(msg=str(e))
    for w in warnings:
        module.warn(w)
    diff = result.pop('diff')
    if module._diff:
        result['diff'] = diff
    module.exit_json(**result)


if __name__ == '__main__':
    main()
