#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: backup_routes
short_description: Kernel backup routes over several NICs (exact set)
version_added: 0.1.0
description:
  - Installs routes in the main table that keep a destination reachable over
    another NIC when the preferred NIC loses its link, with no daemon
    involved. Routes carry rtnetlink protocol 237 (edgeft's).
  - With O(routes[].mode=metric) (the default), one route per via with
    increasing metrics; the kernel uses the lowest metric whose NIC has
    carrier. With O(routes[].mode=multipath), one weighted multipath route;
    the kernel spreads flows over the next hops whose NIC has carrier.
  - The kernel only skips a route whose NIC lost carrier when
    C(net.ipv4.conf.NIC.ignore_routes_with_linkdown) (C(net.ipv6...) for
    IPv6) is 1. The module sets it on every via interface and records the
    value it replaced, which it puts back when no declared route goes
    through that interface any more; with O(set_ignore_linkdown=false) it
    only checks it and fails when it is off.
  - Only carrier loss is seen. A switch that dies with its links up, a fault
    beyond the first hop or on the peer's side leaves the route in place and
    the traffic lost; edgeft's eBPF failover (M(edgeft.failover.ebpf_program))
    covers those. See docs/backup_routes.md.
  - Exact set - routes this module installed earlier (recorded under
    O(state_dir) with the sysctl values it replaced, one entry per network
    namespace) and no longer declared are removed; routes it did not
    install are never removed. A declared route replaces whatever route the
    kernel has with the same destination and metric, except the kernel's own
    (connected, router advertisement) routes.
  - Everything is validated before anything changes; a failure part-way rolls
    every change back. Errors name the option, for example
    C(routes[2].via[1].gateway).
author:
  - edgeft maintainers (@edgeft)
options:
  routes:
    description:
      - The backup routes of this host. With O(state=present) exactly these;
        V([]) removes every route this module installed.
      - With O(state=absent), the routes to these destinations that this
        module installed are removed (only C(dst) is needed); an empty list
        removes every route it installed.
    type: list
    elements: dict
    default: []
    suboptions:
      dst:
        description:
          - Destination prefix, V(198.18.2.11/32) or V(fd0e:d6ef:7a00:2::b/128);
            a bare address is a host route. A destination may appear once.
        type: str
        required: true
      via:
        description:
          - The next hops, most preferred first. Required with O(state=present).
        type: list
        elements: dict
        suboptions:
          interface:
            description: The NIC the route leaves by.
            type: str
            required: true
          gateway:
            description:
              - Next-hop address, of the destination's family. Without it the
                destination is on-link on O(routes[].via[].interface).
              - For IPv6 through another plane's NIC, give the peer's address
                on that plane - Linux answers a neighbour solicitation only for
                addresses of the interface it arrives on.
            type: str
          metric:
            description:
              - Route metric (mode metric only). Defaults to 100 for the first
                via, 200 for the second, and so on; must increase in via order.
            type: int
      mode:
        description:
          - V(metric) - one route per via, the kernel takes the lowest metric
            whose NIC has carrier (active/backup).
          - V(multipath) - one multipath route over all vias (active/active).
        type: str
        choices: [metric, multipath]
        default: metric
      weights:
        description:
          - Mode multipath only - one weight (1 to 256) per via, in via order.
            Defaults to equal weights.
        type: list
        elements: int
      metric:
        description: Mode multipath only - the metric of the multipath route. Defaults to 100.
        type: int
      src:
        description:
          - Preferred source address for traffic taking these routes (must be
            an address of this host), so that a flow keeps its source address
            whichever NIC it leaves by.
        type: str
      rto_min_ms:
        description:
          - TCP minimum retransmission timeout for connections using these
            routes, in milliseconds (1 to 120000; the kernel default is 200).
            Set as the route's locked C(rto_min) metric, as
            C(ip route ... rto_min 50ms) does.
        type: int
  state:
    description:
      - V(present) makes the recorded routes equal O(routes); V(absent) removes
        recorded routes (see O(routes)).
    type: str
    choices: [present, absent]
    default: present
  set_ignore_linkdown:
    description:
      - Set C(ignore_routes_with_linkdown) to 1 on every via interface (and
        record the old value). V(false) only checks that it is 1 and fails,
        naming the interface option, when it is not.
    type: bool
    default: true
requirements:
  - root on the target
  - pyroute2 (Debian package C(python3-pyroute2))
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes
  - edgeft.failover.state_dir
notes:
  - Runs inside whatever network namespace the connection places it in.
  - A NIC set administratively down loses its routes in the kernel; the next
    run of the module puts them back.
  - The peer must accept traffic for its address arriving on its other NIC -
    C(rp_filter) 0 or 2 (loose) there; strict mode (1) drops it.
seealso:
  - module: edgeft.failover.bond
  - module: edgeft.failover.ebpf_program
'''

EXAMPLES = r'''
- name: Reach r2h1's plane-a address over fab0, else over fab1
  edgeft.failover.backup_routes:
    routes:
      - dst: 198.18.2.11/32
        via:
          - interface: fab0
          - interface: fab1        # r2h1 answers ARP on fab1 for its fab0 address
        src: 198.18.1.11
        rto_min_ms: 50
      - dst: fd0e:d6ef:7a00:2::b/128
        via:
          - interface: fab0
          - interface: fab1
            gateway: fd0e:d6ef:7b00:2::b   # r2h1's plane-b address
        src: fd0e:d6ef:7a00:1::b

- name: A service prefix spread over both planes' gateways
  edgeft.failover.backup_routes:
    routes:
      - dst: 198.51.100.0/24
        mode: multipath
        via:
          - {interface: fab0, gateway: 198.18.1.1}
          - {interface: fab1, gateway: 198.19.1.1}
        weights: [1, 1]

- name: Remove the backup routes to one destination
  edgeft.failover.backup_routes:
    state: absent
    routes:
      - dst: 198.18.2.11/32
'''

RETURN = r'''
added:
  description: Routes installed, in C(ip route) notation.
  returned: always
  type: list
  elements: str
  sample: ["198.18.2.11/32 dev fab0 metric 100 rto_min 50ms"]
updated:
  description: Routes replaced because they differed from the declaration.
  returned: always
  type: list
  elements: str
  sample: []
removed:
  description: Routes removed (installed by this module earlier and no longer declared).
  returned: always
  type: list
  elements: str
  sample: ["198.18.2.12/32 dev fab1 metric 200"]
routes:
  description: Every route this module manages on the host after the task.
  returned: always
  type: list
  elements: str
  sample: ["198.18.2.11/32 dev fab0 metric 100", "198.18.2.11/32 dev fab1 metric 200"]
sysctls:
  description: The sysctls set to 1, and those put back to the value they had before.
  returned: always
  type: dict
  sample:
    set: {net.ipv4.conf.fab0.ignore_routes_with_linkdown: "1"}
    restored: {}
plan:
  description:
    - These routes in the shared network plan shape, for the persistence
      renderers (docs/backup_routes.md). Each route is listed under the
      interface it leaves by (a multipath route under its first next hop's);
      fields this module does not manage are null or empty, so the plan is
      merged by interface name into the plan of the module that manages the
      interface. C(rto_min) is in milliseconds.
  returned: always
  type: dict
  sample:
    interfaces:
      - {name: fab0, kind: ethernet, mtu: null, addresses: [], accept_ra: null, rules: [], bond: null, master: null,
         routes: [{dst: 198.18.2.11/32, gateway: null, scope: link, metric: 100, table: null, src: 198.18.1.11, rto_min: 50}]}
      - {name: fab1, kind: ethernet, mtu: null, addresses: [], accept_ra: null, rules: [], bond: null, master: null,
         routes: [{dst: 198.18.2.11/32, gateway: null, scope: link, metric: 200, table: null, src: 198.18.1.11, rto_min: 50}]}
    sysctls:
      net.ipv4.conf.fab0.ignore_routes_with_linkdown: "1"
      net.ipv4.conf.fab1.ignore_routes_with_linkdown: "1"
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils import module_options
from ansible_collections.edgeft.failover.plugins.module_utils.backup_routes.run import backup_routes
from ansible_collections.edgeft.failover.plugins.module_utils.module_result import finish


def main():
    module = AnsibleModule(
        argument_spec=dict(
            routes=dict(type='list', elements='dict', default=[], options=dict(
                dst=dict(type='str', required=True),
                via=dict(type='list', elements='dict', options=dict(
                    interface=dict(type='str', required=True),
                    gateway=dict(type='str'),
                    metric=dict(type='int'),
                )),
                mode=dict(type='str', choices=['metric', 'multipath'], default='metric'),
                weights=dict(type='list', elements='int'),
                metric=dict(type='int'),
                src=dict(type='str'),
                rto_min_ms=dict(type='int'),
            )),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
            set_ignore_linkdown=dict(type='bool', default=True),
            state_dir=module_options.state_dir(),
        ),
        supports_check_mode=True,
    )
    finish(module, lambda: backup_routes(module.params, module.check_mode))


if __name__ == '__main__':
    main()
