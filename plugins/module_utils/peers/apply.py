# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The peer table's writes, in an order that never leaves a peer half-present to the programs."""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import iproute, layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError


class PeerTableApplyError(EdgeftError, RuntimeError):
    """A write failed after validation; the message says at which step."""


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
        iproute.neigh_managed_all(plan.neigh_add)
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
