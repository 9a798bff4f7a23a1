#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: multihome_release
short_description: Undo what multihome changed on a host, keeping the plane addresses
version_added: 0.1.0
description:
  - Removes what M(edgeft.failover.multihome) recorded under O(state_dir) - the routes of the plane
    tables, the source rules, failover addresses and other recorded addresses - and puts back the
    sysctls, MTUs and link states it recorded, like its O(edgeft.failover.multihome#module:state=absent),
    with its order and rollback.
  - Except the addresses in O(keep_addresses). multihome records an address it found on a NIC
    (adopted) just like one it added, so its C(state=absent) would also remove a plane address the
    installer configured, and with it the host's traffic on that plane. Kept addresses stay on
    their NICs and leave the record.
  - Nothing happens, and nothing is created, without a multihome record.
author:
  - edgeft maintainers (@edgeft)
options:
  keep_addresses:
    description:
      - Addresses to leave on the host (with or without a prefix length), typically the plane
        addresses of C(edgeft_planes); V([]) removes every recorded address, as
        M(edgeft.failover.multihome) C(state=absent) does.
    type: list
    elements: str
    default: []
requirements:
  - root on the target
  - pyroute2 (Debian package C(python3-pyroute2))
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes
  - edgeft.failover.state_dir
'''

EXAMPLES = r'''
- name: Undo multihome, keeping the plane addresses
  edgeft.failover.multihome_release:
    keep_addresses: "{{ edgeft_planes | map(attribute='ipv4') | list + edgeft_planes | map(attribute='ipv6') | list }}"
'''

RETURN = r'''
kept_addresses:
  description: Recorded addresses left on the host, as C(CIDR dev NIC).
  returned: always
  type: list
  elements: str
  sample: ["198.18.1.11/16 dev fab0"]
removed:
  description: The addresses, routes and rules removed (or that would be).
  returned: always
  type: dict
  sample: {"addresses": ["198.18.255.1/32 dev fab0"], "routes": ["198.18.0.0/16 dev fab0 table 60901"], "rules": []}
sysctls_changed:
  description: 'Sysctls put back, C({key: {before, after}}).'
  returned: always
  type: dict
links_changed:
  description: 'MTUs and link states put back, C({nic: {mtu: {before, after}, up: {before, after}}}).'
  returned: always
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils import module_options
from ansible_collections.edgeft.failover.plugins.module_utils.module_result import run_module
from ansible_collections.edgeft.failover.plugins.module_utils.uninstall.addresses import release


def main():
    run_module(AnsibleModule, dict(
        keep_addresses=dict(type='list', elements='str', default=[]),
        state_dir=module_options.state_dir(),
    ), release)


if __name__ == '__main__':
    main()
