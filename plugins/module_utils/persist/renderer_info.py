# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The network_renderer_info module: which renderer persists a host's network plan, whether it
can, and what it would leave out. Reads the host (under root); changes nothing."""

from __future__ import annotations

import os

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


def renderer_info(params):
    """The module: (result, warnings). Raises PlanError naming the option."""
    warnings = []
    root = params['root']
    if not os.path.isabs(root) or not os.path.isdir(root):
        raise PlanError("root: %r is not an existing absolute directory" % root)
    prefix = params['file_prefix']
    if prefix is not None and not files.PREFIX.match(prefix):
        raise PlanError("file_prefix: %r must consist of letters, digits, _ and -" % prefix)
    plan = normalize_plan(params['plan'])

    nics = [i["name"] for i in plan["interfaces"] if i["kind"] != "bond"]
    facts = detect.probe(root, nics)
    requested = params['renderer']
    if requested == 'auto':
        renderer, reasons = detect.choose(facts)
    else:
        renderer, reasons = requested, ["chosen: renderer=%s" % requested]
    gaps = gaps_for(plan, renderer, facts["networkd"]["version"])
    # netplan's generator starts systemd-networkd at boot by itself; the others must be enabled.
    if renderer in detect.UNITS and facts[renderer]["installed"] and not (facts[renderer]["enabled"] or facts[renderer]["active"]):
        warnings.append("%s is not enabled under %s: the files written for it take effect only once it runs at boot"
                        % (detect.UNITS[renderer], root))
    if params['warn_gaps']:
        for gap in gaps:
            warnings.append("not persisted by %s: %s" % (renderer, gap))
    result = dict(changed=False, renderer=renderer, requested=requested, reasons=reasons,
                  problems=problems_of(renderer, facts, plan, root), gaps=gaps, renderers=facts, plan=plan)
    if prefix is not None:
        result["files"], result["directories"] = files.edgeft_files(root, prefix)
    return result, warnings
