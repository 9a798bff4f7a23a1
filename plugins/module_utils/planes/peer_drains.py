# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-peer drains: steer named peers' traffic off a plane, or back, leaving the plane's flag alone."""

from __future__ import annotations

import contextlib

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import now_ns
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError
from ansible_collections.edgeft.failover.plugins.module_utils.planes.drain_record import BEFORE_CLEAR, BEFORE_JUDGED, BEFORE_LEARNED
from ansible_collections.edgeft.failover.plugins.module_utils.planes.notify import notify_peers
from ansible_collections.edgeft.failover.plugins.module_utils.planes.slots import usable


def _has_address(st, plane) -> bool:
    return bool(st.v4[plane]) or any(st.v6[plane].w)


def _drain_target(st, planes):
    """The first plane, in plane order, that may carry the peer's traffic: configured,
    usable here, not in its down_mask, with an address of the peer (the next hop)."""
    for i, p in enumerate(planes):
        if usable(p) and not st.down_mask & (1 << i) and _has_address(st, i):
            return i
    return None


def _no_target_text(st, index, planes, names) -> str:
    parts = []
    for i, p in enumerate(planes):
        if i == index or not p.ifindex:
            continue
        if p.flags & layout.PLANE_DRAINED:
            why = "drained here"
        elif not usable(p):
            why = "down here"
        elif st.down_mask & (1 << i):
            why = "down for this peer"
        else:
            why = "no address of the peer"
        parts.append("%s: %s" % (names[i], why))
    return ", ".join(parts) or "no other configured plane"


def _copy_state(st):
    return layout.PeerState.from_buffer_copy(st)


def _routing(st):
    return st.active_plane, st.down_mask, st.learned_mask


def peer_drains(maps, record, drains, names, index, planes, state, peers, params, check_mode, warnings):
    """Steer traffic to the named peers off plane `index` (state=drained) or back
    (state=active), leaving the local plane's flag alone.

    Everything is validated before anything is written; the maps writes happen
    under the caller's pin_dir_lock and are rolled back if one fails. Returns
    {changed, changed_peers (names), states ({peer id: planned state}, for the
    report), drains (the record afterwards), notified (echo requests sent)}.
    """
    wanted = list(dict.fromkeys(str(p) for p in peers))
    ids = record.peer_ids
    current = drains.drains
    key = str(index)
    # An undrain may name a peer peer_table has removed since: only our record changes.
    unknown = [n for n in wanted if n not in ids and not (state == "active" and key in current.get(n, {}))]
    if unknown:
        raise OptionError("peers: unknown peer%s %s; the peers of this host (peer_table's record for %s in %s) are: %s"
                          % ("s" if len(unknown) > 1 else "", ", ".join(repr(n) for n in unknown), drains.key,
                             record.path, ", ".join(sorted(ids)) or "none"))
    now = now_ns()
    bit = 1 << index
    new_drains = {n: dict(p) for n, p in current.items()}
    writes, stranded, moved = [], [], []
    for name in wanted:
        peer_id = ids.get(name)
        st = maps.state.get(peer_id) if peer_id is not None else None
        entry = current.get(name, {}).get(key)
        if state == "drained":
            if st is None:
                raise OptionError("peers: peer %r (id %d) has no state in the maps under %s: fill the peer table with "
                                  "edgeft.failover.peer_table first" % (name, peer_id, drains.key))
            if entry is None:
                kind = BEFORE_CLEAR if not st.down_mask & bit else (
                    BEFORE_LEARNED if st.learned_mask & bit else BEFORE_JUDGED)
                new_drains.setdefault(name, {})[key] = {"before": kind}
            new = _copy_state(st)
            new.down_mask |= bit
            new.learned_mask &= ~bit  # a packet must not undo it (unlearn clears learned bits only)
            target = _drain_target(new, planes)
            if target is None:
                stranded.append("%s (%s)" % (name, _no_target_text(new, index, planes, names)))
            else:
                new.active_plane = target
            if new.down_mask != st.down_mask:
                moved.append(peer_id)
        else:
            if entry is None:
                continue  # not drained by us on this plane: not ours to undo
            del new_drains[name][key]
            if st is None:
                continue
            new = _copy_state(st)
            if entry["before"] == BEFORE_CLEAR:
                if new.down_mask & bit:  # DatapathMaps.clear_down()
                    new.down_mask &= ~bit
                    new.learned_mask &= ~bit
                    if not new.down_mask:
                        new.active_plane = index
                    moved.append(peer_id)
            elif entry["before"] == BEFORE_LEARNED and new.down_mask & bit:
                new.learned_mask |= bit  # learning taught it: the peer's native traffic may undo it again
            # BEFORE_JUDGED: the agent's bit; it fails back by its own probes.
        if _routing(new) != _routing(st):
            # The learning hold, in the same write: the peer's packets in flight
            # (sent before it sees our change) must not be learned back.
            new.changed_ns = now
            writes.append((name, peer_id, st, new))
    if stranded:
        if not params.get("force"):
            raise OptionError(
                "force: steering traffic off plane %r would leave no plane for peer%s %s; nothing was changed. Set "
                "force=true to mark the plane down for them anyway (their traffic then stays on it)"
                % (names[index], "s" if len(stranded) > 1 else "", ", ".join(stranded)))
        warnings.append("no other plane for peer%s %s: the traffic stays on plane %r (steer_skipped counts it)"
                        % ("s" if len(stranded) > 1 else "", ", ".join(stranded), names[index]))
    new_drains = {n: p for n, p in new_drains.items() if p}
    changed_peers = sorted({w[0] for w in writes} | {n for n in wanted if new_drains.get(n) != current.get(n)})
    out = {"changed": bool(changed_peers), "changed_peers": changed_peers, "states": {}, "drains": new_drains,
           "notified": 0}
    if check_mode:
        out["states"] = {peer_id: new for _n, peer_id, _old, new in writes}
        return out
    if not changed_peers:
        return out
    # Record the drains first and forget them last: a crash in between leaves a
    # record of a bit that is not set (a re-run sets it, an undrain forgets it),
    # never a bit we set without its record (no undrain would clear it).
    merged = _merge_drains(current, new_drains)
    if merged != current:
        drains.save(merged)
    try:
        _write_states(maps, writes)
    except DatapathError as e:
        if getattr(e, "rolled_back", False) and merged != current:
            with contextlib.suppress(Exception):
                drains.save(current)
        raise
    if new_drains != merged:
        drains.save(new_drains)
    if moved and params.get("notify_peers", True):
        out["notified"], errors = notify_peers(maps, index, moved)
        warnings.extend(errors)
    return out


def _merge_drains(a, b):
    out = {n: dict(p) for n, p in a.items()}
    for name, planes in b.items():
        out.setdefault(name, {}).update(planes)
    return out


def _write_states(maps, writes) -> None:
    """Write every planned peer state; if one write fails, put back those already written."""
    done = []
    try:
        for _name, peer_id, old, new in writes:
            maps.state.put(peer_id, new)
            done.append((peer_id, old))
    except Exception as e:
        failed = []
        for peer_id, old in reversed(done):
            try:
                maps.state.put(peer_id, old)
            except Exception:  # keep rolling back the others
                failed.append(peer_id)
        where = writes[len(done)][0]
        if failed:
            err = DatapathError("writing peer %r's state failed (%s); restoring the peers written before it failed "
                                "too (ids %s): run the task again" % (where, e, sorted(failed)))
        else:
            err = DatapathError("writing peer %r's state failed (%s); the %d peer(s) written before it were "
                                "restored, nothing changed" % (where, e, len(done)))
        err.rolled_back = not failed
        raise err from e
