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
  - Draining also routes every peer's address on the plane via another plane
    (the agent's held table, rules added where missing), so the plane carries
    nothing even when its switch is then powered off; undraining removes those
    routes again.
  - Undraining moves the traffic back - the host sends on the plane again and
    each peer forgets what it learned from the first packet it receives there.
  - Refuses to drain the host's last usable plane unless O(force=true).
  - With O(peers), drains or undrains O(plane) for those peers only, e.g. the
    hosts behind a switch in maintenance, and leaves the plane's own flag
    alone - this host's traffic for each named peer leaves O(plane) (its down
    bit for the plane is set, the active plane moves to the first other plane
    that can carry it), and O(state=active) puts it back. A record in
    O(state_dir) (C(peer_drains.json), one entry per O(pin_root)) says which
    drains this module made, so an undrain only clears a down bit it set; a
    bit that the failover agent or the data path's learning had already set
    stays.
  - Always reports every plane (flags, data path counters, the NIC's kernel
    counters) and every peer (active plane, planes it avoids, last-seen ages,
    addresses, per-peer drains), named as M(edgeft.failover.peer_table)
    recorded them in O(state_dir); O(state=query) only reports.
author:
  - edgeft maintainers (@edgeft)
options:
  plane:
    description:
      - The plane to drain or undrain, by name (see O(planes)) or by index (V(0) is the first plane).
      - Required unless O(state=query).
    type: str
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
      - With O(peers), mark O(plane) down even for a peer that has no other
        plane left (no address on another usable plane, or all others down
        for it); its traffic then stays on O(plane).
    type: bool
    default: false
  peers:
    description:
      - Peers, by inventory host name (the names given to
        M(edgeft.failover.peer_table)), to drain or undrain O(plane) for,
        instead of the whole plane. The plane's own flag is not changed.
      - With O(state=drained), this host's traffic to each named peer avoids
        O(plane) - the peer's down bit for the plane is set (as a judgement,
        which the peer's traffic cannot undo), and its active plane becomes the
        first plane in plane order that is usable here, not down for the
        peer and where the peer has an address. A peer with no such plane
        fails the task, changing nothing for any peer, unless O(force=true).
      - With O(state=active), the drains this module made for the named
        peers on O(plane) are undone; a down bit that was already set before
        the drain (by the agent or by learning) is left set. Peers not
        drained by this module are not changed.
      - Unknown names fail the task before anything changes. An empty list
        changes nothing (it does not drain the whole plane).
      - Only with O(state=drained) or O(state=active).
      - In diff mode the diff shows the per-peer drains (plane name to peer
        names) before and after, next to the planes' flags.
    type: list
    elements: str
  notify_peers:
    description:
      - After a change, send one ICMP echo request to every peer's address on
        O(plane) (with O(peers), to each peer whose traffic moved), so that
        peers with no traffic to or from this host learn the change at once
        too.
    type: bool
    default: true
  confirm_ms:
    description:
      - With O(state=drained) for the whole plane, after the drain, prove that
        every peer keeps off the plane for this host, waiting up to this many
        milliseconds. An echo request to each peer's address on O(plane) leaves
        steered onto another plane (the peer learns from it), and the peer's
        answer must come back on another plane too; it is sent again every
        100 ms to a peer whose answer has not. Once learned, a peer keeps off
        the plane until this host sends on it natively again, so a confirmed
        peer stays off it for as long as the drain lasts, with or without
        traffic. The peers must answer ICMP echo requests.
      - With O(state=active) for the whole plane, after the undrain, prove that
        every peer is back on the plane for this host - the echo arrives
        natively, the peer forgets what the drain taught it, and its answer
        must come back on the plane. It is sent again every 100 ms, so a
        peer whose learning hold swallowed the first one (it changed state
        itself at the same moment, as hosts behind one switch undrain together)
        still comes back. For the first three rounds this host does not learn
        from the peers not back yet (it renews its learning hold for them).
        Their answers still come back steered, and learning from them would
        make this host's next echoes leave steered too, so that the two hosts
        kept each other off the plane for good.
      - Also when the plane was drained (undrained) already. Peers not
        confirmed in time are a result (RV(unconfirmed)), not a failure.
      - C(0) confirms nothing. Otherwise 100 to 60000; not with O(peers), and
        not with O(notify_peers=false). Nothing is sent in check mode.
    type: int
    default: 0
  forget_learned:
    description:
      - With O(state=active) for the whole plane, before the undrain's notification, forget
        what this host learned about O(plane) from its peers' steering (their down bits for it
        that were learned, never those the agent judged), so that the notification and the
        confirmation leave natively to every peer.
      - Only once the plane was just proven to work both ways with every peer - check probes
        answered (M(edgeft.failover.plane_check) healthy), as the switch_maintenance role does
        before it undrains. Hosts behind one switch undrain together, and each may hold such a
        bit about another from the drain; while both do, each one's steered packets keep
        teaching the other, and neither would come back to the plane for the other.
      - A peer that really keeps off the plane teaches it again with its next steered packet.
        Nothing changes in check mode.
    type: bool
    default: false
  check_planes:
    description:
      - With O(state=query), after the report, check each of these planes (names or indexes)
        end to end as M(edgeft.failover.plane_check) does - check probes to every peer with an
        address there - and return the results in RV(checks). One module run reads a host and
        proves its backup planes, as the switch_maintenance role's guard does before a drain.
      - Nothing changes, also outside check mode; an unknown plane fails the task before anything
        is sent.
    type: list
    elements: str
    default: []
  check_count:
    description: Check probes sent to each peer on each plane of O(check_planes) (1 to 1000).
    type: int
    default: 5
  check_max_loss_percent:
    description:
      - A peer of a plane of O(check_planes) is healthy when at most this share of its check
        probes went unanswered (0 to 100); one that answered none never is.
    type: int
    default: 0
requirements:
  - root on the target
  - pyroute2 on the target for the NIC counters (Debian package C(python3-pyroute2));
    without it RV(planes[].nic) is null and a warning says why; O(check_planes) needs it
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes
  - edgeft.failover.pin_root
  - edgeft.failover.planes.names_only
  - edgeft.failover.state_dir
seealso:
  - module: edgeft.failover.peer_table
'''

EXAMPLES = r'''
- name: Drain plane a before its switch is powered off
  edgeft.failover.plane_state:
    pin_root: /sys/fs/bpf/edgeft
    plane: a
    state: drained

- name: Drain plane a and prove, within 2 s, that every peer keeps off it for this host
  edgeft.failover.plane_state:
    pin_root: /sys/fs/bpf/edgeft
    plane: a
    state: drained
    confirm_ms: 2000
  register: drained
  failed_when: drained.unconfirmed | length > 0

- name: Undrain it after the maintenance
  edgeft.failover.plane_state:
    pin_root: /sys/fs/bpf/edgeft
    plane: a
    state: active

- name: ToR tor-r1-a is drained - steer this host's traffic for r1h1 and r1h2 off plane a
  edgeft.failover.plane_state:
    pin_root: /sys/fs/bpf/edgeft
    plane: a
    peers: [r1h1, r1h2]
    state: drained

- name: Its maintenance is over - put that traffic back on plane a
  edgeft.failover.plane_state:
    pin_root: /sys/fs/bpf/edgeft
    plane: a
    peers: [r1h1, r1h2]
    state: active

- name: Read the planes and prove plane b end to end before draining plane a
  edgeft.failover.plane_state:
    check_planes: [b]
  register: before_drain

- name: Stop unless every peer answered on plane b
  ansible.builtin.assert:
    that: before_drain.checks.b.healthy
    fail_msg: "check probes lost on plane b to {{ before_drain.checks.b.unhealthy_peers | join(', ') }}"

- name: Show per-plane counters and per-peer state
  edgeft.failover.plane_state:
    pin_root: /sys/fs/bpf/edgeft
  register: dp

- name: Fail if a peer has not been heard on plane b for a second
  ansible.builtin.assert:
    that: dp.peers | selectattr('last_seen_age_ms.b', 'gt', 1000) | list | length == 0

- name: Query again a second later
  edgeft.failover.plane_state:
    pin_root: /sys/fs/bpf/edgeft
  register: dp2

- name: Packets per second received by each plane's NIC between the two reports
  ansible.builtin.debug:
    msg: >-
      {{ item.0.name }}: {{ ((item.1.nic.rx_packets - item.0.nic.rx_packets) * 1e9
      / (dp2.now_ns - dp.now_ns)) | round(1) }} pps
  loop: "{{ dp.planes | zip(dp2.planes) | list }}"
  loop_control:
    label: "{{ item.0.name }}"
  when: item.0.nic is not none and item.1.nic is not none
'''

RETURN = r'''
checks:
  description:
    - Plane name to what M(edgeft.failover.plane_check) returns for it (C(healthy),
      C(unhealthy_peers), C(peers), C(checked) and C(plane), without C(changed)), for each plane
      of O(check_planes); empty without it.
  returned: always
  type: dict
  sample: {b: {healthy: true, unhealthy_peers: [], checked: 2, plane: {name: b, index: 1, interface: fab1}}}
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
held_routes:
  description:
    - When the plane's state changed, how many peer addresses on it were put into (drain) or
      taken out of (undrain) the agent's held routing table, so that they are routed via
      another plane while the plane is drained, also when its switch is powered off
      (carrier loss). An undrain leaves them while the agent judges the plane down.
  returned: always
  type: int
  sample: 6
confirmed:
  description:
    - With O(confirm_ms), the peers whose answer came back on another plane
      (O(state=drained)) or on the plane (O(state=active)); see O(confirm_ms).
  returned: always
  type: list
  elements: str
  sample: [r2h1, r2h2]
unconfirmed:
  description:
    - With O(confirm_ms), the peers not confirmed in time, each with the
      reason - C(answered on the plane) (after a drain, the peer still sends
      to this host there), C(answered on another plane) (after an undrain,
      the peer still keeps off the plane for this host) or C(no answer).
  returned: always
  type: list
  elements: dict
  sample: [{name: r2h1, reason: answered on the plane}]
forgotten:
  description: With O(forget_learned), the peers whose learned down bit for O(plane) was cleared.
  returned: always
  type: list
  elements: str
  sample: [r1h2]
changed_peers:
  description:
    - With O(peers), the named peers whose per-peer drain changed (their
      state in the maps or the module's record); empty otherwise.
  returned: always
  type: list
  elements: str
  sample: [r1h1]
now_ns:
  description:
    - CLOCK_MONOTONIC time of the report in nanoseconds (the data path's
      clock), to compute rates from the counters of two reports.
  returned: always
  type: int
  sample: 81234567890123
peer_drains:
  description:
    - The per-peer drains this module made (see O(peers)), as the peers
      drained per plane name. Every reported plane is listed, with an empty
      list when no peer is drained on it.
  returned: always
  type: dict
  sample: {a: [r1h1, r1h2], b: []}
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
      nic: {rx_packets: 1520, tx_packets: 1498, rx_bytes: 151200, tx_bytes: 149004,
            rx_dropped: 0, tx_dropped: 0, rx_errors: 0, tx_errors: 0, carrier: true}
  contains:
    nic:
      description:
        - The plane NIC's kernel counters (C(IFLA_STATS64), all its traffic,
          not only to known peers) C(rx_packets), C(tx_packets), C(rx_bytes),
          C(tx_bytes), C(rx_dropped), C(tx_dropped), C(rx_errors),
          C(tx_errors), and C(carrier) (bool).
        - Null when the plane is not configured, its NIC is gone, or pyroute2
          is missing.
      returned: always
      type: dict
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
      drained_planes: [a]
  contains:
    drained_planes:
      description: The planes this module drained for the peer (see O(peers)).
      returned: always
      type: list
      elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils import module_options
from ansible_collections.edgeft.failover.plugins.module_utils.plane_check import state_and_checks
from ansible_collections.edgeft.failover.plugins.module_utils.module_result import finish


def main():
    module = AnsibleModule(
        argument_spec=dict(
            pin_root=module_options.pin_root(),
            plane=dict(type='str'),
            planes=module_options.planes(),
            state=dict(type='str', choices=['drained', 'active', 'query'], default='query'),
            force=dict(type='bool', default=False),
            peers=dict(type='list', elements='str'),
            notify_peers=dict(type='bool', default=True),
            confirm_ms=dict(type='int', default=0),
            forget_learned=dict(type='bool', default=False),
            check_planes=dict(type='list', elements='str', default=[]),
            check_count=dict(type='int', default=5),
            check_max_loss_percent=dict(type='int', default=0),
            state_dir=module_options.state_dir(),
        ),
        required_if=[('state', 'drained', ('plane',)), ('state', 'active', ('plane',))],
        supports_check_mode=True,
    )
    finish(module, lambda: state_and_checks(module.params, module.check_mode))


if __name__ == '__main__':
    main()
