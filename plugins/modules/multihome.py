#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: multihome
short_description: Configure a multihomed host's plane NICs (addresses, per-plane routing, sysctls)
version_added: 0.1.0
description:
  - Gives every plane NIC exactly its declared addresses (IPv4 and IPv6), its MTU when one is
    declared, a routing table of its own holding the plane's connected prefixes (and a default
    route through the plane's gateways on routed planes), a source rule per address family
    (C(from ADDRESS lookup TABLE)), and the sysctls a dual-homed host needs - C(rp_filter=2),
    C(arp_ignore=1), C(arp_announce=2), C(ignore_routes_with_linkdown=1) for IPv4 and IPv6,
    and C(accept_ra) as declared.
  - Exact set over what this module owns, which it records under O(state_dir) (C(multihome.json)).
    A declared address, route or rule already on the host is adopted into the record; a recorded one
    that is no longer declared is removed; anything else on the host is left alone. Sysctls, MTUs and
    link states it changed are recorded with their previous values and put back when no longer
    declared and with O(state=absent).
  - Plane NICs that are administratively down are brought up (an IPv4 route cannot be added
    through a NIC that is down).
  - Everything is validated before anything changes; an error names the option, for example
    C(planes[1].ipv4). A failure while applying undoes what the run had changed.
  - On routed planes, each plane's failover addresses (O(planes[].failover4), O(planes[].failover6))
    are installed on its NIC with their source rules, recorded and removed like the native addresses.
  - Returns the network plan, the one description of the host's multihomed networking that the
    persistence renderers write to configuration files (see docs/multihome.md).
author:
  - edgeft maintainers (@edgeft)
options:
  table_base:
    description:
      - Routing table of plane index 0; plane N uses O(table_base) + N.
      - The tables must avoid the kernel's reserved tables (253-255) and the failover agent's (60919, 60920).
    type: int
    default: 60901
  rule_priority_base:
    description:
      - Priority of the source rules of plane index 0; plane N uses O(rule_priority_base) + N.
      - Must lie within 32692..32765, after the failover agent's rules (32689-32691) and before the main table's rule at 32766.
    type: int
    default: 32700
  sysctls:
    description:
      - Set the per-NIC sysctls of a dual-homed host. V(false) leaves them to you, and puts back
        the ones this module changed earlier.
    type: bool
    default: true
  state:
    description:
      - V(present) makes the host match O(planes); V(absent) removes everything the record names
        and restores recorded sysctls, MTUs and link states. O(planes) is ignored with V(absent).
    type: str
    choices: [present, absent]
    default: present
requirements:
  - root on the target
  - pyroute2 on the target (Debian and Ubuntu package python3-pyroute2)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes
  - edgeft.failover.planes.multihome
  - edgeft.failover.state_dir
notes:
  - Runs inside whatever network namespace the connection places it in; sysctls under
    C(/proc/sys/net) are that namespace's.
  - The kernel deletes routes through a NIC that goes administratively down; a re-run (or the
    persistent configuration at the next link-up) puts the plane tables back.
seealso:
  - module: edgeft.failover.plane_info
  - module: edgeft.failover.peer_table
'''

EXAMPLES = r'''
- name: Configure the plane NICs of a dual-homed host
  edgeft.failover.multihome:
    planes:
      - name: a
        interface: fab0
        ipv4: 198.18.1.11/16
        ipv6: fd0e:d6ef:7a00:1::b/64
        mtu: 9000
      - name: b
        interface: fab1
        ipv4: 198.19.1.11/16
        ipv6: fd0e:d6ef:7b00:1::b/64
        mtu: 9000

- name: Routed planes with failover addresses
  edgeft.failover.multihome:
    planes:
      - name: a
        interface: fab0
        ipv4: 198.18.1.11/24
        gateway4: 198.18.1.1
        failover4: 198.18.255.1
      - name: b
        interface: fab1
        ipv4: 198.19.1.11/24
        gateway4: 198.19.1.1
        failover4: 198.19.255.1

- name: A routed plane, from the inventory
  edgeft.failover.multihome:
    planes: "{{ edgeft_planes }}"
    state_dir: "{{ edgeft_state_dir | default('/var/lib/edgeft') }}"
  register: multihome_result

- name: Show the plan the persistence renderers consume
  ansible.builtin.debug:
    var: multihome_result.plan

- name: Remove everything the module configured and put the sysctls back
  edgeft.failover.multihome:
    state: absent
'''

RETURN = r'''
plan:
  description:
    - The network plan of the declaration (also in check mode; empty with O(state=absent)). Every
      plane NIC with its addresses, MTU, C(accept_ra), the routes of its plane table and its
      source rules; and the sysctls, as strings, keyed as in C(/etc/sysctl.d).
    - C(kind) is V(ethernet) for plane NICs; C(bond) and C(master) are null (bonds are another module's).
  returned: always
  type: dict
  sample:
    interfaces:
      - name: fab0
        kind: ethernet
        mtu: 9000
        addresses: [198.18.1.11/16, "fd0e:d6ef:7a00:1::b/64"]
        accept_ra: false
        routes:
          - {dst: 198.18.0.0/16, table: 60901, scope: link}
          - {dst: "fd0e:d6ef:7a00:1::/64", table: 60901, scope: link}
          - {dst: 0.0.0.0/0, gateway: 198.18.1.1, table: 60901}
        rules:
          - {family: 4, from: 198.18.1.11/32, table: 60901, priority: 32700}
          - {family: 6, from: "fd0e:d6ef:7a00:1::b/128", table: 60901, priority: 32700}
        bond: null
        master: null
    sysctls:
      net.ipv4.conf.fab0.rp_filter: "2"
      net.ipv4.conf.fab0.arp_ignore: "1"
      net.ipv4.conf.fab0.arp_announce: "2"
      net.ipv4.conf.fab0.ignore_routes_with_linkdown: "1"
      net.ipv6.conf.fab0.ignore_routes_with_linkdown: "1"
      net.ipv6.conf.fab0.accept_ra: "0"
failover_addresses:
  description:
    - The failover addresses installed per plane NIC (empty with O(state=absent)).
    - They are not in RV(plan)'s addresses - persistent network configuration cannot mark an address
      as never a source, so they are live only; their source rules are in RV(plan).
  returned: always
  type: dict
  sample:
    fab1: [198.19.255.1/32, "fd0e:d6ef:7b00:ff::1/128"]
added:
  description: Addresses (C(CIDR dev NIC)), routes and rules added (in check mode - would be added).
  returned: always
  type: dict
  sample:
    addresses: ["198.18.1.11/16 dev fab0"]
    routes: ["198.18.0.0/16 dev fab0 table 60901 scope link"]
    rules: ["32700: from 198.18.1.11/32 lookup 60901"]
removed:
  description:
    - Addresses, routes and rules removed, in the same form as RV(added).
    - Besides recorded items no longer declared, an address with a declared IP but another prefix
      length on the same NIC, and a route in the slot of a declared one in a plane table, are replaced.
  returned: always
  type: dict
  sample:
    addresses: ["fd0e:d6ef:7b00:1::b/56 dev fab1"]
    routes: ["fd0e:d6ef:7b00::/56 dev fab1 table 60902"]
    rules: ["32701: from fd0e:d6ef:7b00:1::b/128 lookup 60902"]
sysctls_changed:
  description: Every sysctl written, with its value before and after (restores included).
  returned: always
  type: dict
  sample:
    net.ipv4.conf.fab0.rp_filter: {before: "0", after: "2"}
links_changed:
  description: MTU and administrative state changes per NIC.
  returned: always
  type: dict
  sample:
    fab0:
      mtu: {before: 1500, after: 9000}
      up: {before: false, after: true}
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils import module_options
from ansible_collections.edgeft.failover.plugins.module_utils.module_result import finish, require_pyroute2
from ansible_collections.edgeft.failover.plugins.module_utils.multihome import run as core
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.spec import DEFAULT_PRIORITY_BASE, DEFAULT_TABLE_BASE


def main():
    module = AnsibleModule(
        argument_spec=dict(
            planes=module_options.planes(
                **module_options.plane_addresses(),
                mtu=dict(type='int'),
                gateway4=dict(type='str'),
                gateway6=dict(type='str'),
                accept_ra=dict(type='bool', default=False),
                switch=dict(type='str'),
                failover4=dict(type='str'),
                failover6=dict(type='str'),
            ),
            state_dir=module_options.state_dir(),
            table_base=dict(type='int', default=DEFAULT_TABLE_BASE),
            rule_priority_base=dict(type='int', default=DEFAULT_PRIORITY_BASE),
            sysctls=dict(type='bool', default=True),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
        ),
        required_if=[('state', 'present', ('planes',))],
        supports_check_mode=True,
    )
    require_pyroute2(module)
    finish(module, lambda: core.multihome(module.params, module.check_mode),
           diff_headers=('plane NICs (host)', 'plane NICs (declared)'))


if __name__ == '__main__':
    main()
