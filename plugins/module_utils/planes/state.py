# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plane_state module: drain or undrain a plane (or a plane for some peers), report."""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils import constants
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError, normalize_planes, plane_names, resolve_plane
from ansible_collections.edgeft.failover.plugins.module_utils.host.records import PeerTableRecord
from ansible_collections.edgeft.failover.plugins.module_utils.planes import drain_routes
from ansible_collections.edgeft.failover.plugins.module_utils.planes.confirm import MAX_TIMEOUT_MS, MIN_TIMEOUT_MS, confirm_peers
from ansible_collections.edgeft.failover.plugins.module_utils.planes.drain_record import DrainRecord, drains_by_plane
from ansible_collections.edgeft.failover.plugins.module_utils.planes.maps import open_maps
from ansible_collections.edgeft.failover.plugins.module_utils.planes.notify import notify_peers
from ansible_collections.edgeft.failover.plugins.module_utils.planes.peer_drains import peer_drains
from ansible_collections.edgeft.failover.plugins.module_utils.planes.report import report
from ansible_collections.edgeft.failover.plugins.module_utils.planes.slots import flags_view, usable


def plane_state(params, check_mode=False):
    """The plane_state module: drain/undrain one plane (or one plane for some
    peers), report every plane and peer.

    Returns (result, warnings).
    """
    state = params.get("state") or "query"
    pin_root = params["pin_root"]
    peers = params.get("peers")
    if peers is not None and state == "query":
        raise OptionError("peers: only with state=drained or active")
    if state != "query" and params.get("plane") in (None, ""):
        raise OptionError("plane: required when state=%s" % state)
    confirm_ms = _confirm_ms(params, state, peers)
    forget = bool(params.get("forget_learned"))
    if forget and (state != "active" or peers is not None):
        raise OptionError("forget_learned: only with state=active for the whole plane (without peers)")
    forgotten = []
    declared = normalize_planes(params["planes"]) if params.get("planes") else None
    state_dir = params.get("state_dir") or constants.STATE_DIR
    warnings = []
    with open_maps(pin_root) as maps:
        record = PeerTableRecord(state_dir, pin_root)
        drains = DrainRecord(state_dir, pin_root)
        names, named = plane_names(declared, record)
        before = [maps.planes.get(i) for i in range(layout.PLANE_SLOTS)]
        after = [layout.Plane(ifindex=p.ifindex, flags=p.flags) for p in before]
        index = None
        if params.get("plane") not in (None, ""):
            index = resolve_plane(params["plane"], names, named)
        if state != "query":
            target = before[index]
            if not target.ifindex:
                raise OptionError("plane: plane %r (index %d) is not configured in the maps under %s: set the "
                                  "host's planes with edgeft.failover.peer_table first" % (names[index], index, pin_root))
        planned, held_routes = {}, 0
        confirmations = {"confirmed": [], "unconfirmed": []}
        if peers is not None:
            # The local plane's flag is not touched: only these peers' traffic moves. A first pass
            # as check mode runs, without the lock: a refused request, check mode and a request
            # that changes nothing create nothing in state_dir, not even the lock file.
            drained_before = drains.drains
            out = peer_drains(maps, record, drains, names, index, before, state, peers, params, True,
                              warnings if check_mode else [])
            if out["changed"] and not check_mode:
                with drains.locked():
                    drained_before = drains.drains  # again under the lock: another run may have just finished
                    out = peer_drains(maps, record, drains, names, index, before, state, peers, params, False, warnings)
            changed, changed_peers, notified = out["changed"], out["changed_peers"], out["notified"]
            planned, drained_after = out["states"], out["drains"]
            shown = [i for i, p in enumerate(before) if p.ifindex or i < named]
            diff_extra = ({"peer_drains": drains_by_plane(drained_before, names, shown)},
                          {"peer_drains": drains_by_plane(drained_after, names, shown)})
        else:
            drained_after, changed_peers, diff_extra = drains.drains, [], ({}, {})
            if state == "drained" and not before[index].flags & layout.PLANE_DRAINED:
                others = [names[i] for i, p in enumerate(before) if i != index and usable(p)]
                if usable(before[index]) and not others and not params.get("force"):
                    raise OptionError(
                        "force: plane %r is this host's last usable plane (%s); draining it leaves known peers' "
                        "traffic nowhere to go. Set force=true to drain it anyway"
                        % (names[index], _others_text(before, names, index)))
                after[index].flags |= layout.PLANE_DRAINED
                warnings.extend(_stranded_warning(maps, index, names, before))
            elif state == "active":
                after[index].flags &= ~layout.PLANE_DRAINED
            changed = after[index].flags != before[index].flags if index is not None else False
            notified = held_routes = 0
            if forget and not check_mode:
                # Before the undrain's notification, so that it leaves natively to every peer.
                forgotten = _forget_learned(maps, index)
            if changed and not check_mode:
                # The routes of a drained plane (planes/drain_routes.py) go before an undrain and come
                # after a drain, so at every moment our packets for a peer's address on the plane
                # leave on one plane only, and the undrain's notification is the first thing the
                # peers see from us natively: with the routes removed (ip runs, tens of ms) after
                # it, packets still routed around the plane would teach the peers, once their
                # learning hold is over, that we left it again, and both sides would keep echoing
                # each other's steering.
                if state == "active":
                    held_routes = _drained_plane_routes(maps, after, index, state, warnings)
                    # Before the flag: from the moment the plane is usable again, the
                    # peers' packets still steered away from it must not be learned.
                    maps.hold()
                maps.set_plane_flags(index, after[index].flags)
                if params.get("notify_peers", True):
                    notified, errors = notify_peers(maps, index)
                    warnings.extend(errors)
                if state == "drained":
                    held_routes = _drained_plane_routes(maps, after, index, state, warnings)
            if confirm_ms and not check_mode:
                outcome, errors = confirm_peers(maps, index, confirm_ms, back=state == "active")
                warnings.extend(errors)
                peer_name = record.peer_namer()
                confirmations = {"confirmed": sorted(peer_name(p) for p, o in outcome.items() if o == "confirmed"),
                                 "unconfirmed": sorted(({"name": peer_name(p), "reason": o}
                                                        for p, o in outcome.items() if o != "confirmed"),
                                                       key=lambda u: u["name"])}
        result = {
            "changed": changed,
            "plane": None if index is None else {"name": names[index], "index": index},
            "notified": notified,
            "held_routes": held_routes,
            "changed_peers": changed_peers,
            "forgotten": sorted(record.peer_namer()(p) for p in forgotten),
        }
        result.update(confirmations)
        result.update(report(maps, record, names, named, flags=[p.flags for p in after], states=planned,
                             drains=drained_after, warnings=warnings))
        result["diff"] = {
            "before": dict({"planes": _flags_by_name(before, names)}, **diff_extra[0]),
            "after": dict({"planes": _flags_by_name(after, names)}, **diff_extra[1]),
        }
    return result, warnings


def _forget_learned(maps, index) -> list:
    """Clear the down bits this host learned on plane `index` from its peers' steering; the
    peer ids whose bit went. Only after the plane was proven both ways to every peer: such a
    bit is then an echo of an old drain (two hosts that undrain together each hold one about
    the other, and each one's steered packets would keep teaching the other). A peer that
    really keeps off the plane teaches it again with its next steered packet."""
    return [peer_id for peer_id in maps.peer_ids() if maps.forget_learned(peer_id, index)]


def _confirm_ms(params, state, peers) -> int:
    """confirm_ms, validated against the options it goes with."""
    value = params.get("confirm_ms")
    if value is None:
        return 0
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise OptionError("confirm_ms: %r is not an integer" % (value,)) from None
    if value == 0:
        return 0
    if not MIN_TIMEOUT_MS <= value <= MAX_TIMEOUT_MS:
        raise OptionError("confirm_ms: must be 0 (no confirmation) or %d..%d, got %d" % (MIN_TIMEOUT_MS, MAX_TIMEOUT_MS, value))
    if state == "query" or peers is not None:
        raise OptionError("confirm_ms: only with state=drained or active for the whole plane (without peers): it "
                          "proves that the peers keep off a drained plane, or are back on an undrained one")
    if not params.get("notify_peers", True):
        raise OptionError("confirm_ms: confirming sends echo requests to the peers, which notify_peers=false forbids; "
                          "leave one of the two out")
    return value


def _drained_plane_routes(maps, planes, index, state, warnings) -> int:
    """Route the peers' addresses on a drained plane via another plane (planes/drain_routes.py), or stop.

    Returns how many routes were put in or taken out; failures are warnings: the
    drain itself (tc steering) stands without them.
    """
    try:
        want = drain_routes.wanted(maps, planes, index)
        if state == "drained":
            errors = drain_routes.hold(want)
        elif planes[index].flags & layout.PLANE_UP:
            errors = drain_routes.release(want)
        else:
            return 0  # the agent judges the plane down: its held routes stay until its failback
    except (drain_routes.DrainRoutesError, OSError) as e:
        errors = [str(e)]
    if errors:
        warnings.append("routes of the drained plane (held table): %s" % errors[0])
    return len(want)


def _others_text(planes, names, index):
    parts = []
    for i, p in enumerate(planes):
        if i == index or not p.ifindex:
            continue
        parts.append("%s: %s" % (names[i], "drained" if p.flags & layout.PLANE_DRAINED else "down"))
    return ", ".join(parts) or "it is the only configured plane"


def _stranded_warning(maps, index, names, planes):
    """Peers with no address on another usable plane stay on the drained one."""
    others = [i for i, p in enumerate(planes) if i != index and usable(p)]
    stranded = 0
    for peer_id in maps.peer_ids():
        peer = maps.get_peer(peer_id)
        if (peer["v4"][index] or peer["v6"][index]) and not any(peer["v4"][i] or peer["v6"][i] for i in others):
            stranded += 1
    if not stranded:
        return []
    return ["%d peer(s) have no address on another usable plane: their traffic stays on plane %r" % (stranded, names[index])]


def _flags_by_name(planes, names):
    return {names[i]: flags_view(p.flags) for i, p in enumerate(planes) if p.ifindex}
