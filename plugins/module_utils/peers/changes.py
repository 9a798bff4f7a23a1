# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The peer ids and the ordered writes that make the maps equal the declared table (Plan)."""

from __future__ import annotations

from collections import Counter

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import iproute, layout
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError
from ansible_collections.edgeft.failover.plugins.module_utils.planes.slots import configure_writes
from ansible_collections.edgeft.failover.plugins.module_utils.routed import plan_failovers


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
    peer_name = record.peer_namer()
    stale = (present | {ref[0] for ref in current_keys.values()}) - kept
    plan.state_deletes = sorted(i for i in stale if i in present)
    plan.removed = sorted(peer_name(i) for i in stale)

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
