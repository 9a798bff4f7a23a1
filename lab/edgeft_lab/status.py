"""Live view of a lab: nodes, links (each end's state), addresses and active faults."""

from __future__ import annotations

from typing import Any

from . import netns
from .faults import FaultRecord
from .plan import Endpoint, FabricPlan

IFF_UP = 0x1


def interface_states(ns: str) -> dict[str, dict[str, Any]]:
    """ifname -> {admin, carrier, operstate, addresses} for one namespace ({} if it is gone)."""
    if not netns.exists(ns):
        return {}
    states: dict[str, dict[str, Any]] = {}
    with netns.ipr(ns) as sock:
        names = {}
        for link in sock.get_links():
            name = link.get_attr("IFLA_IFNAME")
            names[link["index"]] = name
            states[name] = {
                "admin": "up" if link["flags"] & IFF_UP else "down",
                "carrier": bool(link.get_attr("IFLA_CARRIER")),
                "operstate": link.get_attr("IFLA_OPERSTATE"),
                "addresses": [],
            }
        for addr in sock.get_addr():
            name = names.get(addr["index"])
            if name is not None and addr["scope"] == 0:  # global scope only
                states[name]["addresses"].append(f"{addr.get_attr('IFA_ADDRESS')}/{addr['prefixlen']}")
    return states


def end_state(info: dict[str, Any] | None) -> str:
    if info is None:
        return "missing"
    if info["admin"] == "down":
        return "down"
    return "up" if info["carrier"] else "no-carrier"


# A VM's end of its cables is inside the guest: `edgeft-vm status` and `edgeft-vm ssh` see it.
IN_VM = "in-vm"


def gather(plan: FabricPlan, phase: str | None, faults: list[FaultRecord]) -> dict[str, Any]:
    states = {ns: interface_states(ns) for ns in plan.namespaces}

    def end_of(netns: str, ifname: str) -> str:
        return end_state(states[netns].get(ifname)) if netns else IN_VM

    def end(e: Endpoint) -> str:
        return end_of(e.netns, e.ifname)

    topology = plan.topology
    hosts = [
        {
            "name": h.name,
            "netns": h.netns,
            "machine": h.machine,
            "present": bool(states[h.netns]) if h.netns else None,
            "interfaces": [
                {
                    "ifname": p.ifname,
                    "plane": p.plane,
                    "switch": p.switch,
                    "state": end_of(h.netns, p.ifname),
                    "addresses": states.get(h.netns, {}).get(p.ifname, {}).get("addresses", []),
                    # Planned, not live: the multihome role adds them on deploy (routed planes only).
                    "failover": [str(a) for a in (p.failover4, p.failover6) if a is not None],
                }
                for p in h.ports
            ],
        }
        for h in plan.hosts
    ]
    switches = [
        {
            "name": s.name,
            "role": s.role,
            "plane": s.plane,
            "rack": f"r{s.rack}" if s.rack else None,
            "netns": s.netns,
            "present": bool(states[s.netns]),
            "ports": {p: end_state(states[s.netns].get(p)) for p in s.ports},
            "addresses": sorted(
                a for i in states[s.netns].values() for a in i["addresses"]
            ),
        }
        for s in plan.switches
    ]
    links = [
        {"plane": ln.plane, "a": f"{ln.a.node}:{ln.a.ifname}", "b": f"{ln.b.node}:{ln.b.ifname}",
         "a_state": end(ln.a), "b_state": end(ln.b)}
        for ln in plan.links
    ]
    return {
        "name": plan.name,
        "topology": topology.source,
        "kind": topology.kind,
        "mode": topology.mode,
        "phase": phase or "down",
        "hosts": hosts,
        "switches": switches,
        "links": links,
        "faults": [
            {
                "id": r.fault.id,
                "description": r.fault.describe(),
                "started_at": r.started_at,
                **({"pid": r.pid, "running": r.running()} if r.pid is not None else {}),
            }
            for r in faults
        ],
    }


def format_status(doc: dict[str, Any]) -> str:
    lines = [f"lab {doc['name']}: {doc['phase']} (topology {doc['topology']}, {doc['kind']} {doc['mode']})"]
    if doc["phase"] == "down":
        return lines[0]
    lines.append("hosts:")
    for h in doc["hosts"]:
        nics = "   ".join(
            f"{i['ifname']} {' '.join(i['addresses']) or '-'} ->{i['switch']} [{i['state']}]"
            + (f" failover {' '.join(i['failover'])}" if i.get("failover") else "")
            for i in h["interfaces"]
        )
        lines.append(f"  {h['name']:<8} {h['netns'] or '(VM)':<22} {nics}")
    lines.append("switches:")
    for s in doc["switches"]:
        where = f"plane {s['plane']}" + (f" rack {s['rack']}" if s["rack"] else "")
        ports = ", ".join(f"{p} {st}" for p, st in s["ports"].items())
        lines.append(f"  {s['name']:<12} {s['role']:<6} {where:<16} {s['netns']:<22} ports: {ports}")
        if s["addresses"]:
            lines.append(f"  {'':<12} addresses: {' '.join(s['addresses'])}")
    lines.append("links:")
    for ln in doc["links"]:
        lines.append(f"  {ln['plane']}  {ln['a']:<18} <-> {ln['b']:<18} {ln['a_state']} / {ln['b_state']}")
    lines.append("faults:")
    if not doc["faults"]:
        lines.append("  none")
    for f in doc["faults"]:
        note = ""
        if "running" in f:
            note = f" (flapper pid {f['pid']}, {'running' if f['running'] else 'finished'})"
        lines.append(f"  {f['description']}{note}")
    return "\n".join(lines)
