# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's peer table: validate a declared table, then make the pinned maps equal it.

Exact-set semantics: peers and addresses that are not declared are removed,
and the neighbour entries this code created for them with them. Everything is
validated before the first write; writes are ordered so that a peer is never
half-present to the programs (docs/datapath.md, "Peer table"). Free of
Ansible imports, so the agent and the tests use it directly.
"""

from __future__ import annotations

import ipaddress
from collections import Counter

from ansible_collections.edgeft.failover.plugins.module_utils import constants
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import addresses, iproute, layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError, normalize_planes, on_host
from ansible_collections.edgeft.failover.plugins.module_utils.host.records import PeerTableRecord
from ansible_collections.edgeft.failover.plugins.module_utils.planes.maps import EmptyMaps, open_maps
from ansible_collections.edgeft.failover.plugins.module_utils.planes.report import addresses_view, peer_addresses
from ansible_collections.edgeft.failover.plugins.module_utils.planes.slots import configure_writes, flags_view
from ansible_collections.edgeft.failover.plugins.module_utils.routed import desired_failovers, plan_failovers

FAMILIES = (("ipv4", 4), ("ipv6", 6))


# ------------------------------------------------------------- validation
def host_address(value, where, family=None) -> str:
    """The host address of '198.18.1.12' or '198.18.1.12/16', checked usable as a peer key."""
    text = str(value).strip()
    try:
        iface = ipaddress.ip_interface(text)
    except ValueError:
        raise OptionError("%s: %r is not an IP address (with or without a /prefix)" % (where, value)) from None
    a = iface.ip
    if family is not None and a.version != family:
        raise OptionError("%s: %s is not an IPv%d address" % (where, a, family))
    if a.version == 6 and a.ipv4_mapped is not None:
        raise OptionError("%s: %s is IPv4-mapped; give the IPv4 address as ipv4" % (where, a))
    if "/" in text and iface.network.prefixlen < a.max_prefixlen - 1 and a == iface.network.network_address:
        raise OptionError("%s: %s is the network address of %s, not a host address" % (where, a, iface.network))
    try:
        addresses.parse_peer_address(str(a))
    except ValueError as e:
        raise OptionError("%s: %s" % (where, e)) from None
    return str(a)


def normalize_peers(peers, planes, option="peers") -> list:
    """Validate the declared peers against the local planes.

    Returns [{name, where, hops: {plane: {4: addr, 6: addr}}, keys: {addr: plane}, flags}].
    """
    if peers is None:
        peers = []
    if not isinstance(peers, list):
        raise OptionError("%s: expected a list of peers" % option)
    by_name = {p["name"]: p["index"] for p in planes}
    known = ", ".join(by_name)
    used, names, out = {}, {}, []

    def claim(addr, where):
        if addr in used:
            raise OptionError("%s: %s is already declared at %s" % (where, addr, used[addr]))
        used[addr] = where

    for i, peer in enumerate(peers):
        where = "%s[%d]" % (option, i)
        if not isinstance(peer, dict):
            raise OptionError("%s: expected a dict with name and planes, got %r" % (where, peer))
        name = peer.get("name")
        if not name:
            raise OptionError("%s.name: a peer name is required" % where)
        name = str(name)
        if name in names:
            raise OptionError("%s.name: peer %r is already declared at %s" % (where, name, names[name]))
        names[name] = where
        hops, keys, seen_planes = {}, {}, {}
        for j, plane in enumerate(peer.get("planes") or []):
            pwhere = "%s.planes[%d]" % (where, j)
            if not isinstance(plane, dict):
                raise OptionError("%s: expected a dict with name, ipv4 and ipv6, got %r" % (pwhere, plane))
            pname = plane.get("name")
            if pname not in by_name:
                raise OptionError("%s.name: %r is not one of this host's planes (%s); a peer's planes must match "
                                  "the planes option" % (pwhere, pname, known))
            if pname in seen_planes:
                raise OptionError("%s.name: plane %r is already listed at %s" % (pwhere, pname, seen_planes[pname]))
            seen_planes[pname] = pwhere
            index = by_name[pname]
            for key, family in FAMILIES:
                if plane.get(key) in (None, ""):
                    continue
                awhere = "%s.%s" % (pwhere, key)
                addr = host_address(plane[key], awhere, family)
                claim(addr, awhere)
                hops.setdefault(index, {})[family] = addr
                keys[addr] = index
        if not hops:
            raise OptionError("%s.planes: peer %r has no address on any plane (the next hop of steering)" % (where, name))
        for j, value in enumerate(peer.get("identity") or []):
            iwhere = "%s.identity[%d]" % (where, j)
            addr = host_address(value, iwhere)
            claim(addr, iwhere)
            keys[addr] = layout.PLANE_NONE
        learn = peer.get("learn", True)
        out.append({
            "name": name,
            "where": where,
            "hops": hops,
            "keys": keys,
            "flags": 0 if learn in (None, True) else layout.PEER_NO_LEARN,
        })
    return out


# ------------------------------------------------------------------- plan
class Plan:
    """Every write needed, in apply order, plus what to report."""

    def __init__(self):
        self.neigh_add = []
        self.plane_writes = []
        self.key_deletes = []
        self.state_deletes = []
        self.state_writes = []  # (id, v4, v6, flags, new)
        self.key_puts = []  # (addr, id, plane)
        self.failover_deletes = []  # (native, plane)
        self.failover_puts = []  # (native, plane, failover, local)
        self.failovers = {}  # the declaration: (native, plane) -> (failover, local)
        self.neigh_delete = []
        self.added, self.updated, self.removed = [], [], []
        self.ids = {}
        self.neighbors = set()

    @property
    def changed(self) -> bool:
        return any((self.neigh_add, self.plane_writes, self.key_deletes, self.state_deletes,
                    self.state_writes, self.key_puts, self.failover_deletes, self.failover_puts, self.neigh_delete))


def _hops_arrays(hops):
    v4 = [hops.get(p, {}).get(4) for p in range(layout.PLANE_SLOTS)]
    v6 = [hops.get(p, {}).get(6) for p in range(layout.PLANE_SLOTS)]
    return v4, v6


def assign_ids(desired, recorded, current_keys, present, capacity) -> dict:
    """name -> peer id: recorded ids first, then adopted, then the lowest free.

    Adoption: a peer the record does not know (a lost state file, a renamed
    peer) whose addresses already point at one id keeps that id, and so the
    failover state its traffic built.
    """
    ids, used = {}, set()
    for p in desired:
        i = recorded.get(p["name"])
        if isinstance(i, int) and 0 <= i < capacity and i not in used:
            ids[p["name"]] = i
            used.add(i)
    for p in desired:
        if p["name"] in ids:
            continue
        owners = Counter(current_keys[a][0] for a in p["keys"] if a in current_keys)
        for cid, _count in owners.most_common():
            if cid not in used and cid in present and cid < capacity:
                ids[p["name"]] = cid
                used.add(cid)
                break
    busy = used | present | {ref[0] for ref in current_keys.values()}
    free = (i for i in range(capacity) if i not in busy)
    spare = (i for i in range(capacity) if i not in used)
    for p in desired:
        if p["name"] not in ids:
            i = next(free, None)
            if i is None:  # only ids about to be freed are left: reuse them
                i = next(i for i in spare if i not in ids.values())
            ids[p["name"]] = i
    return ids


def plan_table(maps, record, planes, desired, neighbors=True, max_peers=None, current_neigh=None, failovers=None) -> Plan:
    """Compare maps + record with the declaration; check capacity. Changes nothing.

    failovers: desired_failovers() of the declaration, (routed planes, mapping)."""
    routed, want_failovers = failovers or (set(), {})
    cap = maps.capacity()
    if max_peers is not None:
        if max_peers < 0:
            raise OptionError("max_peers: must not be negative")
        if max_peers > cap["peers"]:
            raise OptionError("max_peers: %d is more than the pinned map edgeft_state_v1 holds (%d, the programs' "
                              "EDGEFT_MAX_PEERS): rebuild the programs with a larger EDGEFT_MAX_PEERS"
                              % (max_peers, cap["peers"]))
        if len(desired) > max_peers:
            raise OptionError("peers: %d peers declared, more than max_peers (%d)" % (len(desired), max_peers))
    if len(desired) > cap["peers"]:
        raise OptionError("peers: %d peers declared, the pinned map edgeft_state_v1 holds at most %d "
                          "(EDGEFT_MAX_PEERS of the programs)" % (len(desired), cap["peers"]))
    n_keys = sum(len(p["keys"]) for p in desired)
    if n_keys > cap["addresses"]:
        raise OptionError("peers: %d addresses declared, the pinned map edgeft_peers_v1 holds at most %d "
                          "(EDGEFT_MAX_ADDRS of the programs)" % (n_keys, cap["addresses"]))

    if len(want_failovers) > cap["addresses"]:
        raise OptionError("peers: %d failover addresses declared, the pinned map edgeft_fo_v1 holds at most %d "
                          "(EDGEFT_MAX_ADDRS of the programs)" % (len(want_failovers), cap["addresses"]))

    plan = Plan()
    plan.plane_writes = configure_writes(maps, planes, routed)
    plan.failovers = want_failovers
    plan.failover_puts, plan.failover_deletes = plan_failovers(maps.failovers(), want_failovers)
    current_keys = maps.addresses()  # addr -> (id, plane)
    present = set(maps.peer_ids())
    plan.ids = assign_ids(desired, record.peer_ids, current_keys, present, cap["peers"])

    want_keys = {}  # addr -> (id, plane), as maps.addresses() gives them
    for p in desired:
        for addr, plane in p["keys"].items():
            want_keys[addr] = (plan.ids[p["name"]], plane)
    plan.key_deletes = sorted(a for a in current_keys if a not in want_keys)
    plan.key_puts = sorted((a,) + ref for a, ref in want_keys.items() if current_keys.get(a) != ref)

    kept = set(plan.ids.values())
    id_names = {v: k for k, v in record.peer_ids.items()}
    stale = (present | {ref[0] for ref in current_keys.values()}) - kept
    plan.state_deletes = sorted(i for i in stale if i in present)
    plan.removed = sorted(id_names.get(i, "#%d" % i) for i in stale)

    touched = {put[1] for put in plan.key_puts} | {current_keys[a][0] for a in plan.key_deletes}
    for p in desired:
        pid = plan.ids[p["name"]]
        v4, v6 = _hops_arrays(p["hops"])
        cur = maps.get_peer(pid) if pid in present else None
        if cur is None:
            plan.state_writes.append((pid, v4, v6, p["flags"], True))
            plan.added.append(p["name"])
        elif cur["v4"] != v4 or cur["v6"] != v6 or cur["flags"] != p["flags"]:
            plan.state_writes.append((pid, v4, v6, p["flags"], False))
            plan.updated.append(p["name"])
        elif pid in touched:  # only address keys differ (e.g. identity addresses)
            plan.updated.append(p["name"])
    plan.added.sort()
    plan.updated.sort()

    # Neighbours: every plane address resolved on its plane NIC, managed by the kernel; not
    # on routed planes, where the peers' addresses are behind the plane's gateway.
    nic = {p["index"]: p["interface"] for p in planes}
    want = set()
    if neighbors:
        for p in desired:
            for plane, fams in p["hops"].items():
                if plane not in routed:
                    want.update((a, nic[plane]) for a in fams.values())
    current_neigh = iproute.neighbours() if current_neigh is None else current_neigh
    plan.neigh_add = sorted(n for n in want if not current_neigh.get(n, {}).get("managed"))
    plan.neigh_delete = sorted(n for n in record.neighbors - want if current_neigh.get(n, {}).get("managed"))
    plan.neighbors = want
    return plan


def apply_plan(maps, record, planes, plan) -> None:
    """Write in an order that never leaves a peer half-present to the programs."""
    step = "start"
    try:
        # Record new ids (and keep the old) before the maps: a crash leaves
        # nothing unnamed, and the next run finishes the job with the same ids.
        step = "recording peer ids"
        keep = dict(record.peer_ids)
        keep.update(plan.ids)
        record.save(keep, planes, record.neighbors | set(plan.neigh_add))
        # Next hops resolved before any packet can be steered to them: an
        # unresolved one costs the first steered packet (docs/datapath.md).
        step = "adding neighbour entries"
        for addr, dev in plan.neigh_add:
            iproute.neigh_managed(addr, dev)
        step = "configuring planes"
        for index, ifindex, flags in plan.plane_writes:
            maps.planes.put(index, layout.Plane(ifindex=ifindex, flags=flags))
        # Removal: address keys first, then the state (the programs find a
        # peer only through its keys). Addition: the state first, then keys.
        # Failover addresses no longer declared go before the peers they name;
        # new ones come after the peers exist (a translation needs both).
        step = "removing stale failover addresses"
        for native, plane in plan.failover_deletes:
            maps.delete_failover(native, plane)
        step = "removing stale addresses"
        for addr in plan.key_deletes:
            maps.delete_address(addr)
        step = "removing stale peers"
        for pid in plan.state_deletes:
            maps.state.delete(pid)
            maps.clear_seen(pid)
        step = "writing peer state"
        for pid, v4, v6, flags, new in plan.state_writes:
            if new:
                maps.clear_seen(pid)  # a reused id must not inherit last-seen times
            maps.write_state(pid, v4, v6, flags)
        step = "writing addresses"
        for addr, pid, plane in plan.key_puts:
            maps.set_address(addr, pid, plane)
        step = "writing failover addresses"
        for native, plane, failover, local in plan.failover_puts:
            maps.set_failover(native, plane, failover, local)
        step = "removing neighbour entries"
        for addr, dev in plan.neigh_delete:
            iproute.neigh_delete(addr, dev)
        step = "recording the table"
        record.save(plan.ids, planes, plan.neighbors)
    except (OSError, ValueError, DatapathError) as e:
        raise PeerTableApplyError("peer table partly applied, failed while %s: %s. Every peer is either fully "
                                  "present or absent; run the task again to finish" % (step, e)) from e


# The module's argument spec, here so that restore.py fills the same defaults.
ARGUMENT_SPEC = dict(
    pin_root=dict(type='path', required=True),
    planes=dict(type='list', elements='dict', required=True, options=dict(
        name=dict(type='str', required=True),
        interface=dict(type='str', required=True),
        ipv4=dict(type='str'),
        ipv6=dict(type='str'),
        failover4=dict(type='str'),
        failover6=dict(type='str'),
    )),
    peers=dict(type='list', elements='dict', required=True, options=dict(
        name=dict(type='str', required=True),
        planes=dict(type='list', elements='dict', required=True, options=dict(
            name=dict(type='str', required=True),
            ipv4=dict(type='str'),
            ipv6=dict(type='str'),
            failover4=dict(type='str'),
            failover6=dict(type='str'),
        )),
        identity=dict(type='list', elements='str', default=[]),
        learn=dict(type='bool', default=True),
    )),
    neighbors=dict(type='bool', default=True),
    max_peers=dict(type='int'),
    state_dir=dict(type='path', default=constants.STATE_DIR),
)


class PeerTableApplyError(EdgeftError, RuntimeError):
    """A write failed after validation; the message says at which step."""


# ----------------------------------------------------------------- views
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
    id_names = {v: k for k, v in record.peer_ids.items()}
    addrs = peer_addresses(maps)
    for pid in sorted(set(addrs) | set(maps.peer_ids())):
        st = maps.get_peer(pid)
        view = {"id": pid}
        view.update(addresses_view(addrs.get(pid, {}), names))
        view["learn"] = bool(st) and not st["flags"] & layout.PEER_NO_LEARN
        out[id_names.get(pid, "#%d" % pid)] = view
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
    on_host(planes, iproute.links())
    desired = normalize_peers(params.get("peers"), planes)
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
            before = _diff_view(table_view(maps, record, planes), planes_view(maps, planes), before_neigh, maps.failovers())
            if plan.changed and not check_mode:
                apply_plan(maps, record, planes, plan)
            elif not check_mode and _record_differs(record, plan, planes):
                record.save(plan.ids, planes, plan.neighbors)  # bookkeeping only: adopted ids, renamed planes
            after_table = table_view(maps, record, planes, plan.ids, desired)
            after = _diff_view(after_table, planes_view(maps, planes, () if not check_mode else plan.plane_writes), plan.neighbors,
                               plan.failovers)
    return {
        "changed": plan.changed,
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
        "diff": {"before": before, "after": after},
    }, warnings
