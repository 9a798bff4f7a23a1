# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every plane with its counters and its NIC's, every peer with its state: the modules' report."""

from __future__ import annotations

import socket

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import now_ns, peer_view
from ansible_collections.edgeft.failover.plugins.module_utils.host import nics
from ansible_collections.edgeft.failover.plugins.module_utils.planes.drain_record import drains_by_plane
from ansible_collections.edgeft.failover.plugins.module_utils.planes.slots import flags_view, usable


def peer_addresses(maps) -> dict:
    """peer id -> {plane index or PLANE_NONE: [addresses]}, from the address keys."""
    out = {}
    for addr, (peer_id, plane) in maps.addresses().items():
        out.setdefault(peer_id, {}).setdefault(plane, []).append(addr)
    return out


def addresses_view(by_plane: dict, names) -> dict:
    """{planes: {name: {ipv4, ipv6}}, identity: [...]} from {plane: [addresses]}."""
    planes, identity = {}, []
    for plane, addrs in sorted(by_plane.items()):
        for a in sorted(addrs):
            if plane == layout.PLANE_NONE:
                identity.append(a)
            else:
                planes.setdefault(names[plane], {"ipv4": None, "ipv6": None})["ipv4" if ":" not in a else "ipv6"] = a
    return {"planes": planes, "identity": identity}


def report(maps, record, names, named=0, flags=None, states=None, drains=None, warnings=None) -> dict:
    """Every configured or declared plane with its counters and its NIC's, every
    peer with its state, ages and the planes we drained for it.

    flags/states/drains override what the maps and the record hold (check mode
    reports the planned state).
    """
    now = now_ns()
    planes = []
    for index in range(layout.PLANE_SLOTS):
        p = maps.planes.get(index)
        if flags is not None:
            p.flags = flags[index]
        if not p.ifindex and index >= named:
            continue
        try:
            ifname = socket.if_indextoname(p.ifindex) if p.ifindex else None
        except OSError:
            ifname = None
        entry = {"name": names[index], "index": index, "ifindex": p.ifindex, "interface": ifname, "usable": usable(p)}
        entry.update(flags_view(p.flags))
        entry["counters"] = maps.plane_counters(index)
        planes.append(entry)
    found = nics.stats([p["ifindex"] for p in planes], warnings)
    for entry in planes:
        entry["nic"] = found[entry["ifindex"]]
    shown = [p["index"] for p in planes]
    peer_name = record.peer_namer()
    drains = {} if drains is None else drains
    addrs = peer_addresses(maps)
    peers = []
    for peer_id in maps.peer_ids():
        if states and peer_id in states:
            st = peer_view(states[peer_id])
        else:
            st = maps.get_peer(peer_id)
            if st is None:  # deleted while we walked
                continue
        seen = maps.last_seen(peer_id)
        name = peer_name(peer_id)
        peers.append({
            "name": name,
            "id": peer_id,
            "active_plane": names[st["active_plane"]] if st["active_plane"] < layout.PLANE_SLOTS else None,
            "down_planes": [names[i] for i in st["down_planes"]],
            "learned_planes": [names[i] for i in st["learned_planes"]],
            "learn": not st["flags"] & layout.PEER_NO_LEARN,
            "changed_age_ms": _age_ms(now, st["changed_ns"]),
            "last_seen_age_ms": {names[i]: _age_ms(now, seen[i]) for i in shown},
            "addresses": addresses_view(addrs.get(peer_id, {}), names),
            "drained_planes": [names[int(i)] for i in sorted(drains.get(name, {}), key=int)],
        })
    peers.sort(key=lambda p: p["name"])
    return {"planes": planes, "peers": peers, "peer_drains": drains_by_plane(drains, names, shown), "now_ns": now}


def _age_ms(now: int, stamp: int):
    if not stamp:
        return None
    return max(0, now - stamp) // 1000000
