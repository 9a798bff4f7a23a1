# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inventory model of switches (docs/maintenance.md).

A switch is named by the hosts it serves (``edgeft_planes[].switch``: the ToR of each
plane), or is an inventory host in group ``switches`` with ``edgeft_switch_plane``
(the plane it carries) and optionally ``edgeft_switch_role`` (tor, spine, ...).
The hosts behind it are the members of group ``switch_<name>`` (``-`` and ``.``
become ``_``) or of the group named by ``edgeft_switch_hosts_group`` where the
inventory has one; otherwise, for a spine every fabric host with its plane, and
for any other switch the hosts that name it. So an inventory needs no group but
``fabric`` (and ``switches`` for the spines). Draining a switch drains its plane
on every host behind it (a ToR: its rack; a spine: the whole plane), and every
other host with that plane steers its traffic for those hosts onto another plane.

Everything here works on plain data (``inventory`` below), so tests and the
filter plugins share it:

    inventory = {"groups": {name: [hosts]}, "hostvars": {host: {var: value}}}
"""

from __future__ import annotations

import re

from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError

SWITCH_GROUP = "switches"
FABRIC_GROUP = "fabric"
HOST_VARS = ("edgeft_planes", "edgeft_pin_root", "edgeft_state_dir")
SWITCH_VARS = ("edgeft_switch_plane", "edgeft_switch_role", "edgeft_switch_hosts_group")


class MaintenanceError(EdgeftError, ValueError):
    """A request the inventory cannot satisfy; the text names the variable and the fix."""


def hosts_group(switch: str, switch_vars: dict) -> str:
    return switch_vars.get("edgeft_switch_hosts_group") or "switch_" + re.sub(r"[^A-Za-z0-9_]", "_", switch)


def named_switches(inventory: dict) -> dict:
    """{switch: {"plane", "hosts"}} from the fabric hosts' edgeft_planes[].switch, in inventory order."""
    out = {}
    hostvars = inventory["hostvars"]
    for host in inventory["groups"].get(FABRIC_GROUP) or []:
        planes = hostvars.get(host, {}).get("edgeft_planes")
        for plane in planes if isinstance(planes, list) else []:
            if not isinstance(plane, dict) or not plane.get("switch"):
                continue
            switch, name = str(plane["switch"]), str(plane.get("name"))
            entry = out.setdefault(switch, {"plane": name, "hosts": [], "first": host})
            if entry["plane"] != name:
                raise MaintenanceError("%s: %s names it as the switch of plane %r, %s as the switch of plane %r "
                                       "(edgeft_planes[].switch); a switch carries one plane"
                                       % (switch, entry["first"], entry["plane"], host, name))
            entry["hosts"].append(host)
    return out


def known_switches(inventory: dict) -> list:
    """Group ``switches``, then the switches only the hosts name."""
    known = list(inventory["groups"].get(SWITCH_GROUP) or [])
    return known + [s for s in named_switches(inventory) if s not in known]


def _split(targets) -> list:
    if targets is None:
        return []
    if isinstance(targets, str):
        return [t.strip() for t in targets.replace(":", ",").split(",") if t.strip()]
    if isinstance(targets, (list, tuple)):
        out = []
        for t in targets:
            out.extend(_split(t))
        return out
    raise MaintenanceError("edgeft_switch: give a switch name, a group of switches or a list of them, not %r" % (targets,))


def resolve_switches(targets, inventory: dict, option: str = "edgeft_switch") -> list:
    """Switch names, in order and without repeats, from names and groups of switches."""
    groups = inventory["groups"]
    known = known_switches(inventory)
    names = _split(targets)
    if not names:
        raise MaintenanceError("%s: name at least one switch (or a group of switches); switches of the inventory: %s"
                               % (option, ", ".join(known) or "none: name each plane's switch in edgeft_planes[].switch, "
                                  "or add the switches to group 'switches'"))
    out = []
    for name in names:
        if name in known:
            members = [name]
        elif name in groups and name not in ("all", "ungrouped"):
            members = groups[name]
            if not members:
                raise MaintenanceError("%s: group %r is empty: it names no switch to maintain" % (option, name))
            strangers = [m for m in members if m not in known]
            if strangers:
                raise MaintenanceError("%s: group %r holds %s, which %s no switch: neither in group 'switches' nor named "
                                       "by a host's edgeft_planes[].switch"
                                       % (option, name, ", ".join(strangers), "is" if len(strangers) == 1 else "are"))
        else:
            raise MaintenanceError("%s: %r is neither a switch of the inventory nor a group of switches (switches: %s)"
                                   % (option, name, ", ".join(known) or "none"))
        for m in members:
            if m not in out:
                out.append(m)
    return out


def _plane_names(planes) -> list:
    return [str(p.get("name")) for p in planes if isinstance(p, dict)] if isinstance(planes, list) else []


def _planes_of(host: str, hostvars: dict) -> list:
    planes = hostvars.get(host, {}).get("edgeft_planes")
    if not isinstance(planes, list) or not planes:
        raise MaintenanceError("%s: edgeft_planes is not set, so it is not an edgeft host; remove it from the switch's hosts group" % host)
    return planes


def switch_plan(switch: str, inventory: dict) -> dict:
    """What draining one switch does: hosts that drain the plane, hosts that steer around them."""
    groups, hostvars = inventory["groups"], inventory["hostvars"]
    svars = hostvars.get(switch, {}) if switch in (groups.get(SWITCH_GROUP) or []) else {}
    named = named_switches(inventory).get(switch)
    plane = svars.get("edgeft_switch_plane") or (named or {}).get("plane")
    if not plane:
        raise MaintenanceError("%s: set edgeft_switch_plane, the plane this switch carries (docs/maintenance.md)" % switch)
    plane = str(plane)
    if named and named["plane"] != plane:
        raise MaintenanceError("%s: edgeft_switch_plane is %r, but %s names it as the switch of plane %r "
                               "(edgeft_planes[].switch)" % (switch, plane, named["first"], named["plane"]))
    role = str(svars.get("edgeft_switch_role") or ("tor" if named else "switch"))
    group = hosts_group(switch, svars)
    fabric = list(groups.get(FABRIC_GROUP) or [])
    if group in groups or svars.get("edgeft_switch_hosts_group"):
        served = list(groups.get(group) or [])
    elif role == "spine":
        served = [h for h in fabric if plane in _plane_names(hostvars.get(h, {}).get("edgeft_planes"))]
    else:
        served = list((named or {}).get("hosts") or [])
    if not served:
        raise MaintenanceError("%s: group %r (the hosts behind the switch) is missing or empty, and no host names the "
                               "switch in edgeft_planes[].switch; name it there, or set edgeft_switch_hosts_group to the "
                               "group that lists them" % (switch, group))
    backups = {}
    for host in served:
        names = [str(p.get("name")) for p in _planes_of(host, hostvars)]
        if plane not in names:
            raise MaintenanceError("%s: host %s (group %s) has no plane %r in edgeft_planes (it has %s)"
                                   % (switch, host, group, plane, ", ".join(names)))
        others = [n for n in names if n != plane]
        if not others:
            raise MaintenanceError("%s: host %s has no plane but %r, so draining the switch would cut it off; "
                                   "it cannot be maintained without an outage" % (switch, host, plane))
        backups[host] = others
    steering = []
    for host in fabric:
        if host in served or not isinstance(hostvars.get(host, {}).get("edgeft_planes"), list):
            continue
        if plane in [str(p.get("name")) for p in hostvars[host]["edgeft_planes"]]:
            steering.append(host)
    return {
        "switch": switch,
        "role": role,
        "plane": plane,
        "hosts": served,
        "peers": steering,
        "backup_planes": backups,
        "switch_of": {h: _switch_by_plane(h, hostvars) for h in served},
    }


def _switch_by_plane(host: str, hostvars: dict) -> dict:
    """plane name -> the switch the host declares for it (edgeft_planes[].switch)."""
    return {str(p.get("name")): p.get("switch") for p in hostvars[host]["edgeft_planes"] if p.get("switch")}


def maintenance_plan(targets, inventory: dict, option: str = "edgeft_switch") -> dict:
    """Every named switch's plan, checked against the inventory before anything changes."""
    switches = resolve_switches(targets, inventory, option)
    plans = [switch_plan(s, inventory) for s in switches]
    hosts, served = [], []
    for p in plans:
        for h in p["hosts"] + p["peers"]:
            if h not in hosts:
                hosts.append(h)
        served.extend(h for h in p["hosts"] if h not in served)
    return {"switches": switches, "plans": {p["switch"]: p for p in plans}, "hosts": hosts, "served": served}
