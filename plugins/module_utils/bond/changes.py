# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""From a bond as declared and as the kernel has it: the diff, the ordered steps
that apply it, and the network plan. Pure.

Steps are dicts {"op": ..., ...} run in order by kernel.run_steps, which undoes
the completed ones, newest first, when one fails. The order follows what the
bonding driver requires:

- a port is enslaved while it is down (the driver opens it itself) and comes
  back down when released, so its earlier admin state is restored from the record;
- the mode changes only on a bond that is down and has no ports, so a mode
  change releases every port, sets the options and enslaves them again;
- lacp_rate changes only while the bond is down;
- options are sent only when they change (the driver refuses even an
  unchanged mode on a bond with ports), the delays always with miimon
  (the driver keeps them as multiples of it).
"""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.bond import mapping

IFDOWN_ARGS = ("bond_mode", "bond_ad_lacp_rate")  # the driver refuses these on a bond that is up


def option_args(old, new) -> tuple:
    """(args to send, args that put the old values back) for moving a bond from old to new options."""
    new_args = mapping.pyroute2_args(new)
    old_args = mapping.pyroute2_args(old) if old else {}
    send = {k: v for k, v in new_args.items() if old_args.get(k) != v}
    if "bond_miimon" in send and new["miimon"]:
        send.update({k: new_args[k] for k in ("bond_updelay", "bond_downdelay")})
    undo = {k: old_args[k] for k in send if k in old_args}
    if "bond_miimon" in undo and old["miimon"]:
        undo.update({k: old_args[k] for k in ("bond_updelay", "bond_downdelay")})
    return send, undo


def view(bond) -> dict:
    """What the diff shows of a bond (declared or read back)."""
    if bond is None:
        return {}
    return {"options": dict(bond["options"]), "ports": list(bond["ports"]), "mtu": bond.get("mtu"),
            "addresses": sorted(bond["addresses"]) if bond.get("addresses") is not None else None}


def _enslave(port, links):
    steps = []
    if links.get(port, {}).get("up"):
        steps.append({"op": "link_down", "ifname": port})
    steps.append({"op": "enslave", "port": port})
    return steps


def _release(port, record_ports):
    steps = [{"op": "release", "port": port}]
    if record_ports.get(port, {}).get("up"):
        steps.append({"op": "link_up", "ifname": port})  # as it was before it became a port
    return steps


def present_steps(desired, current, links, record_entry) -> list:
    """Steps that make the kernel's bond (current, or None) equal desired."""
    name = desired["name"]
    record_ports = record_entry.get("ports", {})
    steps = []
    if current is None:
        steps.append({"op": "create", "name": name, "args": mapping.pyroute2_args(desired["options"])})
        for port in desired["ports"]:
            steps.extend(_enslave(port, links))
        bond_up = False
    else:
        old = current["options"]
        send, undo = option_args(old, desired["options"])
        added = [p for p in desired["ports"] if p not in current["ports"]]
        removed = [p for p in current["ports"] if p not in desired["ports"]]
        bond_up = current["up"]
        if "bond_mode" in send:
            if bond_up:
                steps.append({"op": "link_down", "ifname": name})
                bond_up = False
            for port in current["ports"]:
                steps.extend(_release(port, record_ports) if port in removed else [{"op": "release", "port": port}])
            steps.append({"op": "set_options", "name": name, "args": mapping.pyroute2_args(desired["options"]),
                          "undo": mapping.pyroute2_args(old)})
            for port in desired["ports"]:
                steps.extend(_enslave(port, links) if port in added else [{"op": "enslave", "port": port}])
        else:
            for port in removed:
                steps.extend(_release(port, record_ports))
            if any(k in send for k in IFDOWN_ARGS) and bond_up:
                steps.append({"op": "link_down", "ifname": name})
                bond_up = False
            if send:
                steps.append({"op": "set_options", "name": name, "args": send, "undo": undo})
            for port in added:
                steps.extend(_enslave(port, links))
    if desired["mtu"] is not None and (current is None or current["mtu"] != desired["mtu"]):
        steps.append({"op": "mtu", "ifname": name, "mtu": desired["mtu"], "old": current["mtu"] if current else None})
    if not bond_up:
        steps.append({"op": "link_up", "ifname": name})
    if desired["addresses"] is not None:
        have = current["addresses"] if current else []
        for address in desired["addresses"]:
            if address not in have:
                steps.append({"op": "addr_add", "ifname": name, "address": address})
        for address in record_entry.get("addresses", []):
            if address in have and address not in desired["addresses"]:
                steps.append({"op": "addr_del", "ifname": name, "address": address})
    return steps


def absent_steps(current, record_entry) -> list:
    """Delete the bond (the driver releases its ports), then bring back up the
    ports that were up before this module enslaved them."""
    if current is None:
        return []
    steps = [{"op": "delete", "name": current["name"]}]
    for port in current["ports"]:
        if record_entry.get("ports", {}).get(port, {}).get("up"):
            steps.append({"op": "link_up", "ifname": port})
    return steps


def record_after(desired, current, links, record_entry) -> dict:
    """The bond's record entry after the steps: each port's admin state from before it
    was first enslaved, and the declared addresses (the only ones removed later)."""
    ports = {}
    for port in desired["ports"]:
        if port in record_entry.get("ports", {}):
            ports[port] = record_entry["ports"][port]
        elif current is not None and port in current["ports"]:
            ports[port] = {"up": True}  # a port before we knew the bond: it was serving traffic
        else:
            ports[port] = {"up": bool(links.get(port, {}).get("up"))}
    addresses = desired["addresses"] if desired["addresses"] is not None else record_entry.get("addresses", [])
    return {"created": record_entry.get("created", current is None), "ports": ports, "addresses": list(addresses)}


def step_text(step) -> str:
    """One line per step, for check mode and errors."""
    op = step["op"]
    if op in ("create", "set_options"):
        args = ", ".join("%s=%s" % (k[5:], v) for k, v in sorted(step["args"].items()))
        return "%s bond %s (%s)" % ("create" if op == "create" else "set options of", step["name"], args)
    if op in ("link_up", "link_down"):
        return "set %s %s" % (step["ifname"], op[5:])
    if op == "enslave":
        return "enslave %s" % step["port"]
    if op == "release":
        return "release %s" % step["port"]
    if op == "mtu":
        return "set mtu %d on %s" % (step["mtu"], step["ifname"])
    if op in ("addr_add", "addr_del"):
        return "%s address %s on %s" % ("add" if op == "addr_add" else "remove", step["address"], step["ifname"])
    return "delete bond %s" % step["name"]


def plan_bond_options(options) -> dict:
    """The bond options in the shared plan shape ("bond:" of a kind bond interface).

    arp_all_targets is not a key of the shared shape: it is added only when it is not the
    kernel's default (any), so that a renderer that does not know it refuses the plan
    rather than dropping the setting at the next boot.
    """
    out = {k: (list(v) if isinstance(v, list) else v) for k, v in options.items() if k != "arp_all_targets"}
    if options.get("arp_all_targets") not in (None, "any"):
        out["arp_all_targets"] = options["arp_all_targets"]
    return out


def build_plan(desired) -> dict:
    """The bond and its ports as plan interfaces ({interfaces, sysctls}); empty for None."""
    if desired is None:
        return {"interfaces": [], "sysctls": {}}
    interfaces = [{
        "name": desired["name"], "kind": "bond", "mtu": desired["mtu"], "addresses": list(desired["addresses"] or []),
        "accept_ra": False, "routes": [], "rules": [], "bond": plan_bond_options(desired["options"]), "master": None,
    }]
    for port in desired["ports"]:
        interfaces.append({"name": port, "kind": "bond-port", "master": desired["name"], "mtu": None, "addresses": [],
                           "routes": [], "rules": [], "bond": None, "accept_ra": False})
    return {"interfaces": interfaces, "sysctls": {}}
