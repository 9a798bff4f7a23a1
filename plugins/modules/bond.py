#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: bond
short_description: Create, change or remove a Linux bond and its ports
version_added: 0.1.0
description:
  - Makes a bond (the kernel's bonding driver) with exactly the declared
    ports and options, through netlink (pyroute2); changes an existing bond
    in place where the driver allows it, and removes it with O(state=absent).
  - Every option is checked against the others before anything changes, and
    the error names the option - the ARP monitor (O(arp_interval)) needs
    O(arp_ip_target) and excludes O(miimon); O(lacp_rate) is for mode
    C(802.3ad) only; O(primary) must be a port and needs an active-backup or
    balance-tlb/alb mode; O(updelay) and O(downdelay) need O(miimon) and must
    be multiples of it; O(xmit_hash_policy) is for the modes that hash flows
    (balance-xor, 802.3ad, balance-tlb); ports must exist and belong to no
    other bond.
  - On a kernel without the bonding driver the module fails with a clear
    message and changes nothing.
  - The bonds it manages, each port's admin state from before it was
    enslaved and the addresses it manages are recorded under O(state_dir).
  - A failure part-way undoes every change made by the task. A mode change
    takes the bond down, releases its ports and enslaves them again - a short
    outage on the bond.
  - A bond only sees its own ports' carrier (O(miimon)) or, with the ARP
    monitor, whether O(arp_ip_target) answers; see docs/bonds.md for when to
    use it rather than edgeft's eBPF failover or backup routes.
author:
  - edgeft maintainers (@edgeft)
options:
  name:
    description: The bond's interface name, for example V(bond0).
    type: str
    required: true
  state:
    description:
      - V(present) creates or changes the bond; V(absent) deletes it (its ports
        are released and brought back up if they were up before this module
        enslaved them).
    type: str
    choices: [present, absent]
    default: present
  mode:
    description: Bonding mode.
    type: str
    choices: [balance-rr, active-backup, balance-xor, broadcast, 802.3ad, balance-tlb, balance-alb]
    default: active-backup
  ports:
    description:
      - The bond's ports (NICs), exactly. Required with O(state=present).
      - Ports not listed any more are released.
    type: list
    elements: str
  miimon:
    description:
      - MII (carrier) monitor interval in milliseconds. Defaults to 100 when
        O(arp_interval) is not set; V(0) is only valid with the ARP monitor.
    type: int
  arp_interval:
    description:
      - ARP monitor interval in milliseconds; a port is down when
        O(arp_ip_target) stops answering through it. Excludes O(miimon). Not
        available in modes 802.3ad, balance-tlb and balance-alb.
    type: int
  arp_ip_target:
    description: IPv4 addresses the ARP monitor probes (1 to 16). Required with O(arp_interval).
    type: list
    elements: str
  arp_validate:
    description: Which ports check the ARP replies they receive (ARP monitor only). Defaults to V(none).
    type: str
    choices: [none, active, backup, all, filter, filter_active, filter_backup]
  arp_all_targets:
    description: A port is up when V(any) target answers, or only when V(all) do (ARP monitor only). Defaults to V(any).
    type: str
    choices: [any, all]
  lacp_rate:
    description: LACPDU rate asked of the partner (mode 802.3ad only). Defaults to V(slow).
    type: str
    choices: [slow, fast]
  primary:
    description: The port preferred whenever it is up (modes active-backup, balance-tlb, balance-alb); one of O(ports).
    type: str
  updelay:
    description: Milliseconds a port must be up before it is used; a multiple of O(miimon).
    type: int
  downdelay:
    description: Milliseconds a port must be down before it is dropped; a multiple of O(miimon).
    type: int
  xmit_hash_policy:
    description:
      - How flows are spread over ports (modes balance-xor, 802.3ad,
        balance-tlb). Defaults to V(layer2) in those modes.
    type: str
    choices: [layer2, layer2+3, layer3+4, encap2+3, encap3+4, vlan+srcmac]
  mtu:
    description: The bond's MTU (the driver passes it to the ports). Left as it is when omitted.
    type: int
  addresses:
    description:
      - Addresses with prefix length on the bond. Omit to leave the bond's
        addresses alone (for example when M(edgeft.failover.multihome) manages
        them). Addresses this module added earlier and no longer declared are
        removed.
    type: list
    elements: str
requirements:
  - root on the target
  - pyroute2 (Debian package C(python3-pyroute2))
  - a kernel with the bonding driver (C(CONFIG_BONDING))
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes
  - edgeft.failover.state_dir
notes:
  - The live configuration only; this module returns a network
    plan that the C(edgeft.failover.bond) role hands to the persistence
    renderers so the bond survives a reboot.
seealso:
  - module: edgeft.failover.backup_routes
'''

EXAMPLES = r'''
- name: Active-backup over both fabric NICs, carrier monitor, fab0 preferred
  edgeft.failover.bond:
    name: bond0
    mode: active-backup
    ports: [fab0, fab1]
    primary: fab0
    miimon: 100
    updelay: 200
    addresses: [198.18.1.11/16]

- name: Active-backup with the ARP monitor (both ToRs in one L2 domain)
  edgeft.failover.bond:
    name: bond0
    ports: [fab0, fab1]
    arp_interval: 100
    arp_ip_target: [198.18.1.1]
    arp_validate: all

- name: LACP towards an MLAG pair
  edgeft.failover.bond:
    name: bond1
    mode: 802.3ad
    ports: [fab2, fab3]
    lacp_rate: fast
    xmit_hash_policy: layer3+4
    mtu: 9000

- name: Remove a bond
  edgeft.failover.bond:
    name: bond1
    state: absent
'''

RETURN = r'''
bond:
  description: The bond as declared, normalised (options that do not apply to its mode are null). Empty when absent.
  returned: always
  type: dict
  sample:
    options: {mode: active-backup, miimon: 100, arp_interval: null, arp_ip_target: [], arp_validate: null,
              arp_all_targets: null, lacp_rate: null, primary: fab0, updelay: 200, downdelay: 0, xmit_hash_policy: null}
    ports: [fab0, fab1]
    mtu: null
    addresses: [198.18.1.11/16]
steps:
  description: The changes made (in check mode, that would be made), in order.
  returned: always
  type: list
  elements: str
  sample: ["create bond bond0 (miimon=100, mode=1, primary=fab0)", "set fab0 down", "enslave fab0", "set bond0 up"]
plan:
  description:
    - The bond and its ports in the shared network plan shape, for the
      persistence renderers (docs/bonds.md). Empty interfaces with O(state=absent).
    - C(arp_all_targets) is not a key of the shared shape; it appears only
      when it is V(all), the one value that differs from the kernel's default.
  returned: always
  type: dict
  sample:
    interfaces:
      - name: bond0
        kind: bond
        mtu: null
        addresses: [198.18.1.11/16]
        accept_ra: false
        routes: []
        rules: []
        bond: {mode: active-backup, miimon: 100, arp_interval: null, arp_ip_target: [], arp_validate: null,
               lacp_rate: null, primary: fab0, updelay: 200, downdelay: 0, xmit_hash_policy: null}
        master: null
      - {name: fab0, kind: bond-port, master: bond0, mtu: null, addresses: [], routes: [], rules: [], bond: null,
         accept_ra: false}
    sysctls: {}
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils import module_options
from ansible_collections.edgeft.failover.plugins.module_utils.bond.run import bond
from ansible_collections.edgeft.failover.plugins.module_utils.module_result import finish


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type='str', required=True),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
            mode=dict(type='str', default='active-backup',
                      choices=['balance-rr', 'active-backup', 'balance-xor', 'broadcast', '802.3ad', 'balance-tlb',
                               'balance-alb']),
            ports=dict(type='list', elements='str'),
            miimon=dict(type='int'),
            arp_interval=dict(type='int'),
            arp_ip_target=dict(type='list', elements='str'),
            arp_validate=dict(type='str', choices=['none', 'active', 'backup', 'all', 'filter', 'filter_active',
                                                   'filter_backup']),
            arp_all_targets=dict(type='str', choices=['any', 'all']),
            lacp_rate=dict(type='str', choices=['slow', 'fast']),
            primary=dict(type='str'),
            updelay=dict(type='int'),
            downdelay=dict(type='int'),
            xmit_hash_policy=dict(type='str', choices=['layer2', 'layer2+3', 'layer3+4', 'encap2+3', 'encap3+4',
                                                       'vlan+srcmac']),
            mtu=dict(type='int'),
            addresses=dict(type='list', elements='str'),
            state_dir=module_options.state_dir(),
        ),
        required_if=[('state', 'present', ('ports',))],
        supports_check_mode=True,
    )
    finish(module, lambda: bond(module.params, module.check_mode))


if __name__ == '__main__':
    main()
