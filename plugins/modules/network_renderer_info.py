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

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils.persist import detect, files
from ansible_collections.edgeft.failover.plugins.module_utils.persist.gaps import gaps_for
from ansible_collections.edgeft.failover.plugins.module_utils.persist.plan import PlanError, normalize_plan


def problems_of(renderer, facts, plan, root):
    """Why `renderer` cannot be used under root as it is."""
    if renderer in (None, "none"):
        return []
    info = facts[renderer]
    if not info["installed"]:
        return ["%s is not installed under %s (none of %s): install the package %s%s, or choose another renderer"
                % (renderer, root, ", ".join("/" + p for p in detect.PROGRAMS[renderer]), info["package"],
                   detect.PACKAGE_NOTES.get(renderer, ""))]
    problems = []
    if renderer == "netplan" and not facts["networkd"]["installed"]:
        problems.append("netplan renders for systemd-networkd, which is not installed under %s: install the package %s%s"
                        % (root, facts["networkd"]["package"], detect.PACKAGE_NOTES["networkd"]))
    if renderer == "ifupdown":
        if not info["sources_interfaces_d"]:
            problems.append("%s/etc/network/interfaces does not include /etc/network/interfaces.d: add the line"
                            " 'source /etc/network/interfaces.d/*' to it" % root.rstrip("/"))
        if any(i["kind"] == "bond" for i in plan["interfaces"]) and not info["ifenslave"]:
            problems.append("ifupdown sets up bonds through ifenslave's hooks, which are not installed: install the package ifenslave")
    return problems


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
    root = module.params['root']
    if not os.path.isabs(root) or not os.path.isdir(root):
        module.fail_json(msg="root: %r is not an existing absolute directory" % root)
    prefix = module.params['file_prefix']
    if prefix is not None and not files.PREFIX.match(prefix):
        module.fail_json(msg="file_prefix: %r must consist of letters, digits, _ and -" % prefix)
    try:
        plan = normalize_plan(module.params['plan'])
    except PlanError as exc:
        module.fail_json(msg=str(exc))

    nics = [i["name"] for i in plan["interfaces"] if i["kind"] != "bond"]
    facts = detect.probe(root, nics)
    requested = module.params['renderer']
    if requested == 'auto':
        renderer, reasons = detect.choose(facts)
    else:
        renderer, reasons = requested, ["chosen: renderer=%s" % requested]
    gaps = gaps_for(plan, renderer, facts["networkd"]["version"])
    # netplan's generator starts systemd-networkd at boot by itself; the others must be enabled.
    if renderer in detect.UNITS and facts[renderer]["installed"] and not (facts[renderer]["enabled"] or facts[renderer]["active"]):
        module.warn("%s is not enabled under %s: the files written for it take effect only once it runs at boot"
                    % (detect.UNITS[renderer], root))
    if module.params['warn_gaps']:
        for gap in gaps:
            module.warn("not persisted by %s: %s" % (renderer, gap))
    result = dict(changed=False, renderer=renderer, requested=requested, reasons=reasons,
                  problems=problems_of(renderer, facts, plan, root), gaps=gaps, renderers=facts, plan=plan)
    if prefix is not None:
        result["files"], result["directories"] = files.edgeft_files(root, prefix)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
