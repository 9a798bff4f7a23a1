#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: network_renderer_info
short_description: Find the network configuration system of a host and what it can persist of a network plan
version_added: 0.1.0
description:
  - Finds which network configuration system (renderer) restores the host's network at boot -
    netplan, NetworkManager, systemd-networkd or ifupdown - or checks the one asked for.
  - Detection order with O(renderer=auto) - netplan if C(/etc/netplan) holds YAML files; else
    NetworkManager if it is running or enabled and does not leave the plan's NICs unmanaged; else
    systemd-networkd if it is running or enabled; else ifupdown if C(/etc/network/interfaces)
    exists. Only installed renderers count.
  - Checks the network plan (the C(plan) the C(edgeft.failover.multihome) module returns, with
    bonds and backup routes added) and returns it normalised, every key present.
  - Reports what the renderer cannot express of the plan (gaps), for example a per-route RTO
    minimum with systemd-networkd older than 255.
  - Reads the filesystem under O(root); asks systemd and NetworkManager about running services only
    when O(root=/). Changes nothing.
author:
  - edgeft maintainers (@edgeft)
options:
  root:
    description:
      - The root directory of the system whose configuration is judged (an image being built, or a
        scratch directory in tests).
    type: path
    default: /
  renderer:
    description:
      - V(auto) detects the renderer; any other value is checked as given.
      - V(none) means no network configuration files are written (only the sysctl file).
    type: str
    choices: [auto, networkd, ifupdown, networkmanager, netplan, none]
    default: auto
  plan:
    description:
      - The network plan, with C(interfaces) and C(sysctls); see docs/persistence.md for every key.
      - Unknown keys are refused, since no renderer would write them.
    type: dict
    default: {}
  warn_gaps:
    description:
      - Also report every gap as a warning.
    type: bool
    default: false
  file_prefix:
    description:
      - Also report the files edgeft wrote with this prefix in every renderer's directory under O(root)
        (RV(files)), and which of those directories exist (RV(directories)).
      - Letters, digits, C(_) and C(-) only.
    type: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes.info_module
'''

EXAMPLES = r'''
- name: Find the host's renderer and what it can persist
  edgeft.failover.network_renderer_info:
    plan: "{{ multihome_result.plan }}"
  register: renderer

- name: Show it
  ansible.builtin.debug:
    msg: "{{ renderer.renderer }} ({{ renderer.reasons | last }}), gaps: {{ renderer.gaps }}"
'''

RETURN = r'''
renderer:
  description:
    - The renderer chosen (O(renderer)) or detected; V(none) when asked for none.
    - Null when detection found none; RV(reasons) says why.
  returned: always
  type: str
  sample: networkd
requested:
  description: O(renderer) as given.
  returned: always
  type: str
  sample: auto
reasons:
  description: Why each renderer in detection order was or was not chosen.
  returned: always
  type: list
  elements: str
  sample: ["netplan: not installed (package netplan.io)", "networkmanager: not installed (package network-manager)", "networkd: enabled"]
problems:
  description:
    - Why the chosen renderer cannot be used as it is - not installed (naming the package), ifupdown
      without C(source /etc/network/interfaces.d/*), bonds without ifenslave. Empty when it can.
  returned: always
  type: list
  elements: str
gaps:
  description: Plan items the chosen renderer cannot express, each with the plan path and the reason.
  returned: always
  type: list
  elements: str
  sample: ["plan.interfaces[1].routes[3] (fab1 198.18.2.11/32): rto_min 20 ms: systemd-networkd 252 has no per-route RTO minimum ..."]
renderers:
  description:
    - Per renderer - C(installed), C(program), C(package), C(enabled) and C(active) (null when unknown);
      networkd C(version); netplan C(config_files); networkmanager C(unmanaged) NICs;
      ifupdown C(interfaces_file), C(sources_interfaces_d), C(ifenslave).
  returned: always
  type: dict
files:
  description: The files edgeft wrote earlier with O(file_prefix), as absolute paths under O(root).
  returned: when O(file_prefix) is given
  type: list
  elements: str
  sample: ["/etc/systemd/network/60-edgeft-fab0.network", "/etc/sysctl.d/60-edgeft.conf"]
directories:
  description: Every renderer's directory, relative to O(root), and whether it exists.
  returned: when O(file_prefix) is given
  type: dict
  sample: {"etc/systemd/network": true, "etc/netplan": false}
plan:
  description:
    - The plan, checked and normalised - every key present (null where the kernel default applies),
      addresses as C({address, family}), routes and rules with C(family), bonds with their C(ports),
      next hops with their C(dev).
  returned: always
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils.module_result import finish
from ansible_collections.edgeft.failover.plugins.module_utils.persist import detect
from ansible_collections.edgeft.failover.plugins.module_utils.persist import renderer_info as core


def main():
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type='path', default='/'),
            renderer=dict(type='str', default='auto', choices=['auto'] + list(detect.RENDERERS) + ['none']),
            plan=dict(type='dict', default={}),
            warn_gaps=dict(type='bool', default=False),
            file_prefix=dict(type='str'),
        ),
        supports_check_mode=True,
    )
    finish(module, lambda: core.renderer_info(module.params))


if __name__ == '__main__':
    main()
