#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: plane_info
short_description: Report the state of a multihomed host's plane interfaces
version_added: 0.1.0
description:
  - Reads, through netlink, the interfaces that carry a host's fabric planes
    and reports per plane the link state (admin, carrier, operstate), MTU, MAC
    and addresses.
  - Compares the host with the declared planes and reports every mismatch
    (missing interface, missing address); with O(fail_on_mismatch=true) a
    mismatch fails the task, naming the option that does not match the host.
  - Changes nothing on the host.
author:
  - edgeft maintainers (@edgeft)
options:
  fail_on_mismatch:
    description:
      - Fail when a declared interface or address is missing on the host.
    type: bool
    default: true
  require_carrier:
    description:
      - Also treat a plane interface without carrier as a mismatch.
    type: bool
    default: false
requirements:
  - pyroute2 on the target (Debian package C(python3-pyroute2))
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes.info_module
  - edgeft.failover.planes.addresses
notes:
  - Runs inside whatever network namespace the connection places it in; with
    the C(edgeft.failover.netns) connection it reports the namespace's interfaces.
'''

EXAMPLES = r'''
- name: Check both planes of a dual-homed host
  edgeft.failover.plane_info:
    planes:
      - name: a
        interface: fab0
        ipv4: 198.18.1.11/16
      - name: b
        interface: fab1
        ipv4: 198.19.1.11/16
    require_carrier: true
  register: planes

- name: Report without failing, from inventory
  edgeft.failover.plane_info:
    planes: "{{ edgeft_planes }}"
    fail_on_mismatch: false
'''

RETURN = r'''
planes:
  description:
    - Per declared plane, what the host has.
    - C(rp_filter) is the reverse path filtering the kernel applies on the NIC, the larger of
      C(net.ipv4.conf.all.rp_filter) and the NIC's own (0 off, 1 strict, 2 loose); null when unknown.
  returned: always
  type: list
  elements: dict
  sample:
    - name: a
      interface: fab0
      present: true
      ifindex: 2
      mac: "02:00:00:00:01:0b"
      mtu: 1500
      admin_up: true
      carrier: true
      operstate: UP
      addresses: ["198.18.1.11/16", "fd0e:d6ef:7a00:1::b/64"]
      missing_addresses: []
      rp_filter: 2
problems:
  description: Every mismatch between the declaration and the host, naming the option.
  returned: always
  type: list
  elements: str
  sample: ["planes[1].interface: interface 'fab1' does not exist on this host"]
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils import module_options
from ansible_collections.edgeft.failover.plugins.module_utils import plane_info as core
from ansible_collections.edgeft.failover.plugins.module_utils.module_result import finish, require_pyroute2


def main():
    module = AnsibleModule(
        argument_spec=dict(
            planes=module_options.planes(required=True, **module_options.plane_addresses()),
            fail_on_mismatch=dict(type='bool', default=True),
            require_carrier=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    require_pyroute2(module)
    finish(module, lambda: core.plane_info(module.params))


if __name__ == '__main__':
    main()
