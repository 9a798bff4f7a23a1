#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: peer_table
short_description: Set a host's edgeft peer table (exact set)
version_added: 0.1.0
description:
  - Makes the peer table in the host's pinned edgeft maps equal the declared
    peers, with exact-set semantics - peers are added, peers whose addresses
    or options changed are updated, and peers or addresses that are not
    declared are removed.
  - A peer keeps its peer id across runs (recorded under O(state_dir), per
    O(pin_root)); ids of removed peers are reused.
  - What the traffic taught the data path about a peer (its active plane, the
    planes it avoids) is kept when a peer is updated, so a re-run never undoes
    a failover in progress.
  - Also writes this host's planes (ifindex, and the UP flag when a plane is
    new or its NIC changed) into the maps; the drain state of a plane is kept
    (see M(edgeft.failover.plane_state)).
  - With O(neighbors=true), keeps every peer plane address resolved on its
    plane NIC with a kernel-managed neighbour entry, which the data path
    needs to steer the first packet correctly; entries this module created
    (recorded under O(state_dir)) are removed with their peer.
  - Everything is validated before anything changes; an error names the
    option, for example C(peers[3].planes[1].ipv4).
author:
  - edgeft maintainers (@edgeft)
options:
  peers:
    description:
      - The complete peer table. Peers not listed are removed; V([]) removes all.
      - An address may appear once in the whole table.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Unique peer name, usually its inventory hostname.
        type: str
        required: true
      planes:
        description:
          - The peer's addresses per plane; the next hops of steering.
          - At least one address is required. A plane may be left out (a peer
            with no address on a plane cannot be steered there).
        type: list
        elements: dict
        required: true
        suboptions:
          name:
            description: One of the plane names of O(planes).
            type: str
            required: true
          ipv4:
            description:
              - The peer's IPv4 address on this plane, with or without a
                prefix length (V(198.18.1.12) or V(198.18.1.12/16)); the host
                address is stored.
            type: str
          ipv6:
            description: The peer's IPv6 address on this plane, with or without a prefix length.
            type: str
          failover4:
            description:
              - The peer's IPv4 failover address on this plane (a routed plane of this host),
                standing for its IPv4 address on the other plane.
            type: str
          failover6:
            description: The peer's IPv6 failover address on this plane, as O(peers[].planes[].failover4).
            type: str
      identity:
        description:
          - Extra addresses of the peer that belong to no plane, for example a
            loopback or service address. Traffic to them follows the peer's
            active plane; they never teach the data path anything.
        type: list
        elements: str
        default: []
      learn:
        description:
          - Let steered traffic from this peer move our return traffic to it
            at once. Set V(false) for a peer whose plane segments are not
            trusted (learning trusts the L2 segment, as ARP does).
        type: bool
        default: true
  neighbors:
    description:
      - Keep every peer plane address resolved on its plane NIC with a
        kernel-managed neighbour entry (C(ip neigh replace ADDR dev NIC managed),
        Linux 5.16 or later).
      - V(false) removes the entries this module created earlier.
    type: bool
    default: true
  neighbor_limits:
    description:
      - The kernel holds at most C(net.ipv4.neigh.default.gc_thresh3) IPv4 neighbour entries (and
        C(net.ipv6.neigh.default.gc_thresh3) IPv6 ones; 1,024 by default), and above C(gc_thresh2) (512)
        it collects entries not confirmed in the last 5 s. With O(neighbors=true) a host keeps one
        managed entry per peer, plane and family, so 512 peers on two planes fill the IPv4 table.
      - V(grow) raises C(gc_thresh2) to the entries this host will hold plus 256 for its other
        neighbours, and C(gc_thresh3) to twice that, before adding the entries; it never lowers them
        and leaves C(gc_thresh1). Up to 128 peers on two planes fit the defaults, and nothing changes. The
        values found first are recorded in O(state_dir)/neighbour_limits.json, so that a removal can
        restore them. The boot-time restore runs this module again, so the raise survives a reboot.
      - V(keep) changes none of them and refuses, before any change, a table that does not fit
        under C(gc_thresh3).
      - The thresholds are machine-wide and exist only in the initial network namespace; in another
        namespace there is nothing to read or raise, and this option has no effect.
    type: str
    choices: [grow, keep]
    default: grow
  max_peers:
    description:
      - Refuse a table with more peers than this (a guard against an
        inventory mistake).
      - Must not exceed the capacity of the pinned maps (the programs'
        C(EDGEFT_MAX_PEERS)); a table larger than that capacity is always
        refused.
    type: int
  host_name:
    description:
      - This host's name, usually C(inventory_hostname). A peer of that name is refused, as is a peer
        with any address of this host (its plane addresses, or any address on its NICs), since a host
        is not its own peer.
    type: str
requirements:
  - root on the target
  - iproute2 (C(ip)) with managed neighbour support (iproute2 5.16 or later) when O(neighbors=true)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes
  - edgeft.failover.pin_root
  - edgeft.failover.planes.peer_table
  - edgeft.failover.state_dir
attributes:
  check_mode:
    support: full
    details:
      - Maps that are not pinned yet under O(pin_root) are taken as empty (with a warning), so a
        first C(--check) run of a fresh host reports the whole table as to be added.
notes:
  - Runs inside whatever network namespace the connection places it in; with
    the C(edgeft.failover.netns) connection, interfaces and neighbours are
    the namespace's.
seealso:
  - module: edgeft.failover.ebpf_program
  - module: edgeft.failover.plane_state
'''

EXAMPLES = r'''
- name: Set the peer table of a dual-homed host
  edgeft.failover.peer_table:
    pin_root: /sys/fs/bpf/edgeft
    planes:
      - {name: a, interface: fab0}
      - {name: b, interface: fab1}
    peers:
      - name: r1h2
        planes:
          - {name: a, ipv4: 198.18.1.12/16, ipv6: "fd0e:d6ef:7a00:1::c/56"}
          - {name: b, ipv4: 198.19.1.12/16, ipv6: "fd0e:d6ef:7b00:1::c/56"}
        identity: [198.51.100.12]
    max_peers: 1024

- name: Every other fabric host is a peer (inventory variable edgeft_planes)
  edgeft.failover.peer_table:
    pin_root: "{{ edgeft_pin_root }}"
    planes: "{{ edgeft_planes | map('dict2items') | map('selectattr', 'key', 'in', ['name', 'interface'])
                | map('list') | map('items2dict') | list }}"
    peers: >-
      {%- set out = [] -%}
      {%- for host in groups['fabric'] if host != inventory_hostname -%}
      {%-   set _ = out.append({'name': host, 'planes': hostvars[host].edgeft_planes
              | map('dict2items') | map('selectattr', 'key', 'in', ['name', 'ipv4', 'ipv6'])
              | map('list') | map('items2dict') | list}) -%}
      {%- endfor -%}
      {{ out }}
'''

RETURN = r'''
peers:
  description: The table as written, per peer name.
  returned: always
  type: dict
  sample:
    r1h2:
      id: 0
      planes:
        a: {ipv4: 198.18.1.12, ipv6: "fd0e:d6ef:7a00:1::c"}
        b: {ipv4: 198.19.1.12, ipv6: "fd0e:d6ef:7b00:1::c"}
      identity: [198.51.100.12]
      learn: true
added:
  description: Names of the peers added.
  returned: always
  type: list
  elements: str
  sample: [r2h1]
updated:
  description: Names of the peers whose addresses or options changed.
  returned: always
  type: list
  elements: str
  sample: []
removed:
  description:
    - Names of the peers removed. Entries found in the maps that no record
      names appear as C(#<id>).
  returned: always
  type: list
  elements: str
  sample: ["r9h9", "#17"]
planes:
  description: This host's planes as written to the maps.
  returned: always
  type: list
  elements: dict
  sample:
    - {name: a, index: 0, interface: fab0, ifindex: 4, up: true, drained: false, routed: false}
neighbors:
  description: Managed neighbour entries created and removed (C(ADDRESS dev NIC)).
  returned: always
  type: dict
  sample:
    added: ["198.18.2.11 dev fab0"]
    removed: []
neighbor_limits:
  description: The neighbour table thresholds raised (or, in check mode, to be raised), with their values before and after.
  returned: always
  type: dict
  sample: {net.ipv4.neigh.default.gc_thresh3: {before: 1024, after: 16896}}
failover_addresses:
  description: Routed planes. The failover addresses in the maps, with what they stand for.
  returned: always
  type: list
  elements: str
  sample: ["198.19.255.1 on plane b for 198.18.1.11 (own)", "198.19.255.2 on plane b for 198.18.1.12 (peer)"]
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils.module_result import finish
from ansible_collections.edgeft.failover.plugins.module_utils.peers import run as core
from ansible_collections.edgeft.failover.plugins.module_utils.peers.spec import ARGUMENT_SPEC


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    pin_root = module.params['pin_root']
    finish(module, lambda: core.peer_table(module.params, module.check_mode),
           diff_headers=('%s (maps)' % pin_root, '%s (declared)' % pin_root))


if __name__ == '__main__':
    main()
