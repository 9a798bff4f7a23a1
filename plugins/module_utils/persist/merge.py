# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Merge the network plans of several modules into the one plan a host persists.

multihome, bond and backup_routes each return the part of the plan they own;
a renderer must see each interface once (networkd, for one, reads only the
first .network file that matches a NIC). Interfaces are merged by name, lists
joined without repeats; a value two plans set differently is an error naming
both, never a silent choice.
"""

from __future__ import annotations

import copy

from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError


class MergeError(EdgeftError, ValueError):
    """Two plans disagree; the message names the interface and the key."""


def _join(into, more):
    for item in more or []:
        if item not in into:
            into.append(copy.deepcopy(item))


def _same(name, key, old, new):
    """The one value of old and new that is set; MergeError if both are set and differ."""
    if old is None or old == new:
        return copy.deepcopy(new) if old is None else old
    if new is None:
        return old
    raise MergeError("interfaces %s: %s is %r in one plan and %r in another" % (name, key, old, new))


def _merge_interface(into, more):
    name = into["name"]
    kinds = {into.get("kind") or "ethernet", more.get("kind") or "ethernet"} - {"ethernet"}
    if len(kinds) > 1:
        raise MergeError("interfaces %s: kind is %s in one plan and %s in another" % (name, *sorted(kinds)))
    into["kind"] = kinds.pop() if kinds else "ethernet"
    for key in ("mtu", "bond", "master"):
        into[key] = _same(name, key, into.get(key), more.get(key))
    into["accept_ra"] = bool(into.get("accept_ra")) or bool(more.get("accept_ra"))
    for key in ("addresses", "routes", "rules"):
        into[key] = into.get(key) or []
        _join(into[key], more.get(key))


def merge_plans(plans) -> dict:
    """One plan from several ({interfaces, sysctls} each; None or {} entries are skipped)."""
    interfaces, by_name, sysctls = [], {}, {}
    for plan in plans or []:
        if not plan:
            continue
        if not isinstance(plan, dict):
            raise MergeError("a network plan must be a mapping with interfaces and sysctls, got %r" % (plan,))
        for iface in plan.get("interfaces") or []:
            name = iface.get("name")
            if name in by_name:
                _merge_interface(by_name[name], iface)
            else:
                by_name[name] = copy.deepcopy(iface)
                interfaces.append(by_name[name])
        for key, value in (plan.get("sysctls") or {}).items():
            if key in sysctls and str(sysctls[key]) != str(value):
                raise MergeError("sysctls %s is %r in one plan and %r in another" % (key, sysctls[key], value))
            sysctls[key] = value
    return {"interfaces": interfaces, "sysctls": sysctls}
