# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's planes in its pinned maps: declaration, drain state and report.

Shared by the peer_table module (which configures the planes) and the
plane_state module (drain/undrain, report). Free of Ansible imports; every
error names the option that caused it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct

from ansible_collections.edgeft.failover.plugins.module_utils import atomicfile, constants, jsonrecord
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import (
    DatapathMaps,
    now_ns,
    peer_view,
    pin_dir_lock,
)
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError

DEFAULT_STATE_DIR = constants.STATE_DIR
STATE_FILE = "peer_table.json"
LOCK_FILE = "peer_table.lock"
RECORD_VERSION = 1
DRAIN_FILE = "peer_drains.json"
DRAIN_LOCK_FILE = "peer_drains.lock"
DRAIN_RECORD_VERSION = 1
# What a peer's down bit for a plane was before plane_state drained the peer there.
BEFORE_CLEAR, BEFORE_JUDGED, BEFORE_LEARNED = "clear", "judged", "learned"
NIC_COUNTERS = ("rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "rx_dropped", "tx_dropped", "rx_errors", "tx_errors")
ATTACH_HINT = "attach the programs first with edgeft.failover.ebpf_program"


class OptionError(EdgeftError, ValueError):
    """Bad input; the message starts with the option path (peers[3].planes[1].ipv4: ...)."""


# --------------------------------------------------------------------- maps
def maps_pinned(pin_root) -> bool:
    """Whether every map of the layout is pinned under pin_root (shape not checked)."""
    return os.path.isdir(pin_root) and all(os.path.exists(os.path.join(pin_root, m.name)) for m in layout.MAPS)


class EmptyMaps:
    """Stands in for maps that are not pinned yet (check mode before the first
    attach): no peers, unconfigured planes, the header's default capacity."""

    class _Planes:
        @staticmethod
        def get(index):
            return layout.Plane()

    planes = _Planes()

    @staticmethod
    def capacity():
        t = layout.tunables()
        return {"peers": t["EDGEFT_MAX_PEERS"], "addresses": t["EDGEFT_MAX_ADDRS"]}

    @staticmethod
    def addresses():
        return {}

    @staticmethod
    def peer_ids():
        return []

    @staticmethod
    def get_peer(peer_id):
        return None

    @staticmethod
    def failovers():
        return {}


@contextlib.contextmanager
def open_maps(pin_root, option="pin_root", allow_missing=False):
    """The host's pinned maps, with the pin dir locked against other writers.

    allow_missing (check mode): EmptyMaps when nothing is pinned yet.
    """
    if not pin_root or not os.path.isabs(pin_root):
        raise OptionError("%s: %r must be an absolute path" % (option, pin_root))
    if allow_missing and not maps_pinned(pin_root):
        yield EmptyMaps()
        return
    if not os.path.isdir(pin_root):
        raise OptionError("%s: %s does not exist: %s" % (option, pin_root, ATTACH_HINT))
    with pin_dir_lock(pin_root):
        try:
            maps = DatapathMaps.open_pinned(pin_root)
        except DatapathError as e:
            raise OptionError("%s: %s (%s)" % (option, e, ATTACH_HINT)) from None
        try:
            yield maps
        finally:
            maps.close()


# ------------------------------------------------------------ host record
class HostRecord:
    """What the kernel cannot hold for us, per host (keyed by pin root).

    The maps know peer ids, not names: the name -> id assignment, the plane
    declaration and the neighbour entries we own live in a JSON file, so ids
    stay stable across runs and we only ever delete what we created. Several
    hosts may share the file (the namespace lab): each has its own entry.
    """

    def __init__(self, state_dir, pin_root):
        if not state_dir or not os.path.isabs(state_dir):
            raise OptionError("state_dir: %r must be an absolute path" % (state_dir,))
        if os.path.exists(state_dir) and not os.path.isdir(state_dir):
            raise OptionError("state_dir: %s exists and is not a directory" % state_dir)
        self.state_dir = state_dir
        self.path = os.path.join(state_dir, STATE_FILE)
        self.key = os.path.normpath(pin_root)
        self.table = self._load().get("tables", {}).get(self.key, {})

    def _load(self):
        return jsonrecord.read(self.path, RECORD_VERSION, "peer table record", OptionError)

    @property
    def peer_ids(self) -> dict:
        return dict(self.table.get("peers", {}))

    @property
    def planes(self) -> list:
        return list(self.table.get("planes", []))

    @property
    def neighbors(self) -> set:
        return {tuple(n) for n in self.table.get("neighbors", [])}

    def save(self, peers: dict, planes: list, neighbors) -> None:
        """Atomically replace this host's entry (re-reading the others)."""
        table = {
            "peers": dict(sorted(peers.items())),
            "planes": [{"name": p["name"], "interface": p["interface"]} for p in planes],
            "neighbors": sorted([a, d] for a, d in neighbors),
        }
        data = self._load() or {"version": RECORD_VERSION}
        data.setdefault("tables", {})[self.key] = table
        jsonrecord.write(self.state_dir, self.path, data)
        self.table = table

    @contextlib.contextmanager
    def locked(self, create=True):
        """Serialise runs sharing the record (and hosts sharing state_dir).

        create=False (check mode) never creates state_dir: without it there
        is no record to protect.
        """
        with atomicfile.locked(self.state_dir, LOCK_FILE, create) as held:
            if held:
                self.table = self._load().get("tables", {}).get(self.key, {})
            yield self


class DrainRecord:
    """The per-peer drains plane_state made, per host (keyed by pin root, like HostRecord).

    drains: {peer name: {plane index as text: {"before": clear | judged | learned}}}.
    "before" is the peer's down bit for the plane when we drained it: clear, set
    by the control plane's judgement (the agent), or learned from traffic. An
    undrain clears only a bit that was clear, gives a learned one back to
    learning and leaves a judged one to its owner: it never clears a bit it
    did not set. The maps cannot hold this (a down bit has no owner field).
    """

    def __init__(self, state_dir, pin_root):
        self.state_dir = state_dir
        self.path = os.path.join(state_dir, DRAIN_FILE)
        self.key = os.path.normpath(pin_root)
        self.drains = self._entry(self._load())

    def _load(self):
        return jsonrecord.read(self.path, DRAIN_RECORD_VERSION, "peer drain record", OptionError)

    def _entry(self, data) -> dict:
        entry = data.get("hosts", {}).get(self.key, {})
        kinds = (BEFORE_CLEAR, BEFORE_JUDGED, BEFORE_LEARNED)
        ok = isinstance(entry, dict) and all(
            isinstance(planes, dict) and all(
                str(i).isdigit() and int(i) < layout.PLANE_SLOTS and isinstance(d, dict) and d.get("before") in kinds
                for i, d in planes.items())
            for planes in entry.values())
        if not ok:
            raise OptionError("state_dir: %s: the entry of %s is malformed; remove it (the peers' down bits it "
                              "recorded stay as they are)" % (self.path, self.key))
        return {name: {i: dict(d) for i, d in planes.items()} for name, planes in entry.items() if planes}

    def save(self, drains: dict) -> None:
        """Atomically replace this host's entry (re-reading the other hosts')."""
        drains = {name: dict(sorted(planes.items())) for name, planes in sorted(drains.items()) if planes}
        data = self._load() or {"version": DRAIN_RECORD_VERSION}
        hosts = data.setdefault("hosts", {})
        if drains:
            hosts[self.key] = drains
        else:
            hosts.pop(self.key, None)
        jsonrecord.write(self.state_dir, self.path, data)
        self.drains = drains

    @contextlib.contextmanager
    def locked(self, create=True):
        """Serialise writers of the record (hosts may share state_dir, each with its own pin root).

        create=False (check mode) never creates state_dir.
        """
        with atomicfile.locked(self.state_dir, DRAIN_LOCK_FILE, create) as held:
            if held:
                self.drains = self._entry(self._load())
            yield self


def drains_by_plane(drains: dict, names, shown=()) -> dict:
    """{plane name: [peer names]} from a DrainRecord's drains; every plane in shown is listed."""
    out = {names[i]: [] for i in shown}
    for name, planes in drains.items():
        for i in planes:
            out.setdefault(names[int(i)], []).append(name)
    return {plane: sorted(peers) for plane, peers in out.items()}


# ------------------------------------------------------------ declaration
def normalize_planes(planes, links=None, option="planes"):
    """Validate the local plane declaration: [{name, interface, index, ifindex, where}].

    links (iproute.links()) checks that each interface exists; None skips that.
    """
    if not planes:
        raise OptionError("%s: at least one plane is required" % option)
    if len(planes) > layout.PLANE_SLOTS:
        raise OptionError("%s: %d planes, the data path has %d plane slots" % (option, len(planes), layout.PLANE_SLOTS))
    out, names, ifaces = [], {}, {}
    for index, plane in enumerate(planes):
        where = "%s[%d]" % (option, index)
        if not isinstance(plane, dict):
            raise OptionError("%s: expected a dict with name and interface, got %r" % (where, plane))
        name, iface = plane.get("name"), plane.get("interface")
        if not name:
            raise OptionError("%s.name: a plane name is required" % where)
        if not iface:
            raise OptionError("%s.interface: the plane NIC name is required" % where)
        if name in names:
            raise OptionError("%s.name: plane %r is already declared at %s" % (where, name, names[name]))
        if iface in ifaces:
            raise OptionError("%s.interface: %r already carries plane %r" % (where, iface, ifaces[iface]))
        names[name], ifaces[iface] = where, name
        ifindex = None
        if links is not None:
            if iface not in links:
                raise OptionError("%s.interface: interface %r does not exist on this host" % (where, iface))
            ifindex = links[iface]["ifindex"]
        out.append({"name": str(name), "interface": iface, "index": index, "ifindex": ifindex, "where": where})
    return out


def plane_names(declared, record=None):
    """(names by index, how many are declared): the declaration, else what
    peer_table recorded, else the index as text."""
    names = [p["name"] for p in declared or (record.planes if record else [])]
    return names + [str(i) for i in range(len(names), layout.PLANE_SLOTS)], len(names)


def configure_writes(maps, planes, routed=frozenset()) -> list:
    """Plane slot writes (index, ifindex, flags) that make the maps match planes.

    A plane gets its ifindex and UP when it is new or its NIC changed; a plane
    that is already configured keeps its flags: UP belongs to the agent (link
    and probe state) and DRAINED to plane_state, and a re-run must not undo
    either. ROUTED follows the declaration (`routed`: plane indexes). Slots of
    planes no longer declared are cleared.
    """
    writes = []
    for index in range(layout.PLANE_SLOTS):
        cur = maps.planes.get(index)
        if index < len(planes):
            ifindex = planes[index]["ifindex"]
            routed_flag = layout.PLANE_ROUTED if index in routed else 0
            if cur.ifindex != ifindex:
                writes.append((index, ifindex, layout.PLANE_UP | (cur.flags & layout.PLANE_DRAINED) | routed_flag))
            elif cur.flags & layout.PLANE_ROUTED != routed_flag:
                writes.append((index, ifindex, (cur.flags & ~layout.PLANE_ROUTED) | routed_flag))
        elif cur.ifindex or cur.flags:
            writes.append((index, 0, 0))
    return writes


def flags_view(flags: int) -> dict:
    return {"up": bool(flags & layout.PLANE_UP), "drained": bool(flags & layout.PLANE_DRAINED)}


def usable(plane) -> bool:
    """Configured, up and not drained: may carry steered traffic (edgeft_plane_ok)."""
    return bool(plane.ifindex) and (plane.flags & (layout.PLANE_UP | layout.PLANE_DRAINED)) == layout.PLANE_UP


# ------------------------------------------------------------------ drain
def resolve_plane(value, names, named, option="plane") -> int:
    """Plane index from a name, or from an index given as a number."""
    text = str(value)
    if text in names[:named]:
        return names.index(text)
    if text.isdigit() and int(text) < layout.PLANE_SLOTS:
        return int(text)
    known = ", ".join(names[:named]) or "none declared or recorded"
    raise OptionError("%s: %r is neither a plane name of this host (%s) nor a plane index 0..%d"
                      % (option, value, known, layout.PLANE_SLOTS - 1))


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
    declared = normalize_planes(params["planes"]) if params.get("planes") else None
    state_dir = params.get("state_dir") or DEFAULT_STATE_DIR
    warnings = []
    with open_maps(pin_root) as maps:
        record = HostRecord(state_dir, pin_root)
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
        if peers is not None:
            # The local plane's flag is not touched: only these peers' traffic moves.
            with drains.locked(create=not check_mode):
                drained_before = drains.drains
                out = _peer_drains(maps, record, drains, names, index, before, state, peers, params, check_mode, warnings)
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
            if changed and not check_mode:
                # The routes of a drained plane (drain_routes.py) go before an undrain and come
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
        result = {
            "changed": changed,
            "plane": None if index is None else {"name": names[index], "index": index},
            "notified": notified,
            "held_routes": held_routes,
            "changed_peers": changed_peers,
        }
        result.update(report(maps, record, names, named, flags=[p.flags for p in after], states=planned,
                             drains=drained_after, warnings=warnings))
        result["diff"] = {
            "before": dict({"planes": _flags_by_name(before, names)}, **diff_extra[0]),
            "after": dict({"planes": _flags_by_name(after, names)}, **diff_extra[1]),
        }
    return result, warnings


def _drained_plane_routes(maps, planes, index, state, warnings) -> int:
    """Route the peers' addresses on a drained plane via another plane (drain_routes.py), or stop.

    Returns how many routes were put in or taken out; failures are warnings: the
    drain itself (tc steering) stands without them.
    """
    from ansible_collections.edgeft.failover.plugins.module_utils import drain_routes  # it imports this module

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


# --------------------------------------------------------- per-peer drain
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


def _peer_drains(maps, record, drains, names, index, planes, state, peers, params, check_mode, warnings):
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


# ----------------------------------------------------------------- notify
def _icmp_checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _echo_request(family: int, ident: int, seq: int) -> bytes:
    payload = b"edgeft plane change"
    if family == 6:  # the kernel fills in the ICMPv6 checksum of raw sockets
        return struct.pack("!BBHHH", 128, 0, 0, ident, seq) + payload
    head = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    return struct.pack("!BBHHH", 8, 0, _icmp_checksum(head + payload), ident, seq) + payload


def notify_peers(maps, index, peer_ids=None):
    """One ICMP echo request to every peer's (or each of peer_ids') address on
    plane `index`, sent on its NIC.

    The egress program handles it like any packet: steered off a drained
    plane or a plane down for the peer (the peer learns at once), native after
    an undrain (the peer forgets). Peers that exchange no traffic with us move
    too. Returns (sent, warnings); failures never fail the task.
    """
    plane = maps.planes.get(index)
    try:
        ifname = socket.if_indextoname(plane.ifindex)
    except OSError:
        return 0, ["notify_peers: plane %d's ifindex %d does not exist here; no peer notified" % (index, plane.ifindex)]
    socks, sent, errors = {}, 0, []
    try:
        for peer_id in maps.peer_ids() if peer_ids is None else peer_ids:
            peer = maps.get_peer(peer_id)
            if peer is None:
                continue
            family, addr = (4, peer["v4"][index]) if peer["v4"][index] else (6, peer["v6"][index])
            if not addr:
                continue
            try:
                if family not in socks:
                    af, proto = (socket.AF_INET, socket.IPPROTO_ICMP) if family == 4 else (socket.AF_INET6, socket.IPPROTO_ICMPV6)
                    s = socket.socket(af, socket.SOCK_RAW, proto)
                    socks[family] = s
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, ifname.encode())
                socks[family].sendto(_echo_request(family, os.getpid() & 0xFFFF, peer_id & 0xFFFF), (addr, 0))
                sent += 1
            except OSError as e:
                errors.append("notify_peers: echo request to %s on %s failed: %s" % (addr, ifname, e))
    finally:
        for s in socks.values():
            s.close()
    return sent, errors[:5]


# ----------------------------------------------------------------- report
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


def nic_stats(ifindexes, warnings=None) -> dict:
    """ifindex -> the NIC's kernel counters (IFLA_STATS64) and carrier, or None when it is gone.

    Read with pyroute2 in the caller's network namespace. Without pyroute2
    every NIC is None (and warnings, if given, says why).
    """
    wanted = [i for i in ifindexes if i]
    out = dict.fromkeys(ifindexes)
    if not wanted:
        return out
    try:
        from pyroute2 import IPRoute
        from pyroute2.netlink.exceptions import NetlinkError
    except ImportError as e:
        if warnings is not None:
            warnings.append("pyroute2 is missing on the target (%s): the planes' nic counters are not reported; "
                            "install python3-pyroute2" % e)
        return out
    try:
        ipr = IPRoute()
    except OSError as e:
        if warnings is not None:
            warnings.append("cannot open a netlink socket (%s): the planes' nic counters are not reported" % e)
        return out
    with ipr:
        for ifindex in wanted:
            try:
                (msg,) = ipr.get_links(ifindex)
            except (NetlinkError, ValueError):
                continue  # ENODEV: the NIC is gone
            stats = msg.get_attr("IFLA_STATS64") or msg.get_attr("IFLA_STATS")
            nic = {k: (stats[k] if stats is not None else None) for k in NIC_COUNTERS}
            carrier = msg.get_attr("IFLA_CARRIER")
            nic["carrier"] = bool(carrier) if carrier is not None else msg.get_attr("IFLA_OPERSTATE") == "UP"
            out[ifindex] = nic
    return out


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
    nics = nic_stats([p["ifindex"] for p in planes], warnings)
    for entry in planes:
        entry["nic"] = nics[entry["ifindex"]]
    shown = [p["index"] for p in planes]
    id_names = {v: k for k, v in record.peer_ids.items()}
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
        name = id_names.get(peer_id, "#%d" % peer_id)
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
