# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The peer_table module: validate the declaration, read the host, plan, apply, report."""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils import constants
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import iproute, layout
from ansible_collections.edgeft.failover.plugins.module_utils.host import nics
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import normalize_planes, on_host
from ansible_collections.edgeft.failover.plugins.module_utils.host.records import PeerTableRecord
from ansible_collections.edgeft.failover.plugins.module_utils.peers import neighbour_limits
from ansible_collections.edgeft.failover.plugins.module_utils.peers.apply import apply_plan
from ansible_collections.edgeft.failover.plugins.module_utils.peers.changes import plan_table
from ansible_collections.edgeft.failover.plugins.module_utils.peers.spec import host_address, normalize_peers, own_addresses
from ansible_collections.edgeft.failover.plugins.module_utils.planes.maps import EmptyMaps, open_maps
from ansible_collections.edgeft.failover.plugins.module_utils.planes.report import addresses_view, peer_addresses
from ansible_collections.edgeft.failover.plugins.module_utils.planes.slots import flags_view
from ansible_collections.edgeft.failover.plugins.module_utils.routed import desired_failovers


def table_view(maps, record, planes, ids=None, desired=None) -> dict:
    """name -> {id, planes: {name: {ipv4, ipv6}}, identity, learn}: the maps now, or the declaration."""
    names = [p["name"] for p in planes] + [str(i) for i in range(len(planes), layout.PLANE_SLOTS)]
    out = {}
    if desired is not None:
        for p in desired:
            by_plane = {}
            for addr, plane in p["keys"].items():
                by_plane.setdefault(plane, []).append(addr)
            view = {"id": ids[p["name"]]}
            view.update(addresses_view(by_plane, names))
            view["learn"] = not p["flags"] & layout.PEER_NO_LEARN
            out[p["name"]] = view
        return out
    peer_name = record.peer_namer()
    addrs = peer_addresses(maps)
    for pid in sorted(set(addrs) | set(maps.peer_ids())):
        st = maps.get_peer(pid)
        view = {"id": pid}
        view.update(addresses_view(addrs.get(pid, {}), names))
        view["learn"] = bool(st) and not st["flags"] & layout.PEER_NO_LEARN
        out[peer_name(pid)] = view
    return out


def planes_view(maps, planes, writes=()) -> dict:
    pending = {i: layout.Plane(ifindex=ifx, flags=fl) for i, ifx, fl in writes}
    out = {}
    for p in planes:
        cur = pending.get(p["index"]) or maps.planes.get(p["index"])
        view = {"interface": p["interface"], "ifindex": cur.ifindex}
        view.update(flags_view(cur.flags))
        view["routed"] = bool(cur.flags & layout.PLANE_ROUTED)
        out[p["name"]] = view
    return out


def _record_differs(record, plan, planes) -> bool:
    declared = [{"name": p["name"], "interface": p["interface"]} for p in planes]
    return record.peer_ids != plan.ids or record.neighbors != plan.neighbors or record.planes != declared


def _diff_view(table, planes_, neighbors, failovers):
    return {
        "planes": planes_,
        "peers": {name: {k: v for k, v in view.items() if k != "id"} for name, view in table.items()},
        "neighbors": ["%s dev %s" % n for n in sorted(neighbors)],
        "failover_addresses": failovers_view(failovers, planes_),
    }


def failovers_view(failovers, planes_) -> list:
    """["<failover> on plane <name> for <native> (own|peer)"], sorted: readable in a diff."""
    names = list(planes_)
    return sorted("%s on plane %s for %s (%s)" % (fo, names[plane] if plane < len(names) else plane, native,
                                                  "own" if local else "peer")
                  for (native, plane), (fo, local) in failovers.items())


# ----------------------------------------------------------------- module
def peer_table(params, check_mode=False):
    """The peer_table module: (result, warnings).

    Raises OptionError (bad input, named) or PeerTableApplyError.
    """
    planes = normalize_planes(params.get("planes"), prefix_required=False)  # the declaration first, then the host
    links = nics.read_links()
    on_host(planes, links)
    desired = normalize_peers(params.get("peers"), planes, own=own_addresses(planes, links),
                              host_name=params.get("host_name"))
    failovers = desired_failovers(params.get("planes"), planes, params.get("peers"), desired, host_address)
    pin_root = params.get("pin_root")
    warnings = []
    # In check mode a fresh host has no pins yet (ebpf_program in check mode
    # attached nothing): report the whole table as to be added.
    with open_maps(pin_root, allow_missing=check_mode) as maps:
        if isinstance(maps, EmptyMaps):
            warnings.append("pin_root: no edgeft maps are pinned under %s yet; reporting against empty maps of the "
                            "default size (a real run needs the programs attached first)" % pin_root)
        record = PeerTableRecord(params.get("state_dir") or constants.STATE_DIR, pin_root)
        with record.locked(create=not check_mode):
            current_neigh = iproute.neighbours()
            plan = plan_table(maps, record, planes, desired, params.get("neighbors", True), params.get("max_peers"),
                              current_neigh, failovers)
            before_neigh = {n for n in record.neighbors | plan.neighbors if current_neigh.get(n, {}).get("managed")}
            limits = neighbour_limits.read_limits()
            raises = neighbour_limits.plan_limits(limits, neighbour_limits.entries_after(current_neigh, plan),
                                                  params.get("neighbor_limits") or "grow")
            before = _diff_view(table_view(maps, record, planes), planes_view(maps, planes), before_neigh, maps.failovers())
            before["neighbor_limits"] = {name: change["before"] for name, change in raises.items()}
            if raises and not check_mode:
                # Room first: the entries below must not meet a full table halfway.
                neighbour_limits.apply_limits(raises, params.get("state_dir") or constants.STATE_DIR)
            if plan.changed and not check_mode:
                apply_plan(maps, record, planes, plan)
            elif not check_mode and _record_differs(record, plan, planes):
                record.save(plan.ids, planes, plan.neighbors)  # bookkeeping only: adopted ids, renamed planes
            after_table = table_view(maps, record, planes, plan.ids, desired)
            after = _diff_view(after_table, planes_view(maps, planes, () if not check_mode else plan.plane_writes), plan.neighbors,
                               plan.failovers)
            after["neighbor_limits"] = {name: change["after"] for name, change in raises.items()}
    return {
        "changed": plan.changed or bool(raises),
        "peers": after_table,
        "added": plan.added,
        "updated": plan.updated,
        "removed": plan.removed,
        "planes": [dict(name=p["name"], index=p["index"], **v) for p, v in zip(planes, after["planes"].values())],
        "neighbors": {
            "added": ["%s dev %s" % n for n in plan.neigh_add],
            "removed": ["%s dev %s" % n for n in plan.neigh_delete],
        },
        "failover_addresses": after["failover_addresses"],
        "neighbor_limits": raises,
        "diff": {"before": before, "after": after},
    }, warnings
