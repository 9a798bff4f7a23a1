# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's planes in its pinned maps: declaration, drain state and report.

Shared by the peer_table module (which configures the planes) and the
plane_state module (drain/undrain, report). Free of Ansible imports; every
error names the option that caused it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import struct
import tempfile

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import (
    DatapathMaps,
    now_ns,
    pin_dir_lock,
)

DEFAULT_STATE_DIR = "/var/lib/edgeft"
STATE_FILE = "peer_table.json"
LOCK_FILE = "peer_table.lock"
RECORD_VERSION = 1
ATTACH_HINT = "attach the programs first with edgeft.failover.ebpf_program"


class OptionError(ValueError):
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
        try:
            with open(self.path) as f:
                data = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise OptionError("state_dir: cannot read %s: %s" % (self.path, e)) from None
        if not isinstance(data, dict) or data.get("version") != RECORD_VERSION:
            raise OptionError("state_dir: %s is not a version %d edgeft peer table record" % (self.path, RECORD_VERSION))
        return data

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
        os.makedirs(self.state_dir, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.state_dir, prefix="." + STATE_FILE)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self.table = table

    @contextlib.contextmanager
    def locked(self, create=True):
        """Serialise runs sharing the record (and hosts sharing state_dir).

        create=False (check mode) never creates state_dir: without it there
        is no record to protect.
        """
        if not create and not os.path.isdir(self.state_dir):
            yield self
            return
        os.makedirs(self.state_dir, exist_ok=True)
        fd = os.open(os.path.join(self.state_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self.table = self._load().get("tables", {}).get(self.key, {})
            yield self
        finally:
            os.close(fd)


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


def configure_writes(maps, planes) -> list:
    """Plane slot writes (index, ifindex, flags) that make the maps match planes.

    A plane gets its ifindex and UP when it is new or its NIC changed; a plane
    that is already configured keeps its flags: UP belongs to the agent (link
    and probe state) and DRAINED to plane_state, and a re-run must not undo
    either. Slots of planes no longer declared are cleared.
    """
    writes = []
    for index in range(layout.PLANE_SLOTS):
        cur = maps.planes.get(index)
        if index < len(planes):
            ifindex = planes[index]["ifindex"]
            if cur.ifindex != ifindex:
                writes.append((index, ifindex, layout.PLANE_UP | (cur.flags & layout.PLANE_DRAINED)))
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
    """The plane_state module: drain/undrain one plane, report every plane and peer.

    Returns (result, warnings).
    """
    state = params.get("state") or "query"
    pin_root = params["pin_root"]
    if state != "query" and params.get("plane") in (None, ""):
        raise OptionError("plane: required when state=%s" % state)
    declared = normalize_planes(params["planes"]) if params.get("planes") else None
    warnings = []
    with open_maps(pin_root) as maps:
        record = HostRecord(params.get("state_dir") or DEFAULT_STATE_DIR, pin_root)
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
            if state == "drained" and not target.flags & layout.PLANE_DRAINED:
                others = [names[i] for i, p in enumerate(before) if i != index and usable(p)]
                if usable(target) and not others and not params.get("force"):
                    raise OptionError(
                        "force: plane %r is this host's last usable plane (%s); draining it leaves known peers' "
                        "traffic nowhere to go. Set force=true to drain it anyway"
                        % (names[index], _others_text(before, names, index)))
                after[index].flags |= layout.PLANE_DRAINED
                warnings.extend(_stranded_warning(maps, index, names, before))
            elif state == "active":
                after[index].flags &= ~layout.PLANE_DRAINED
        changed = after[index].flags != before[index].flags if index is not None else False
        notified = 0
        if changed and not check_mode:
            if state == "active":
                # Before the flag: from the moment the plane is usable again, the
                # peers' packets still steered away from it must not be learned.
                maps.hold()
            maps.set_plane_flags(index, after[index].flags)
            if params.get("notify_peers", True):
                notified, errors = notify_peers(maps, index)
                warnings.extend(errors)
        result = {
            "changed": changed,
            "plane": None if index is None else {"name": names[index], "index": index},
            "notified": notified,
        }
        result.update(report(maps, record, names, named, flags=[p.flags for p in after]))
        result["diff"] = {
            "before": {"planes": _flags_by_name(before, names)},
            "after": {"planes": _flags_by_name(after, names)},
        }
    return result, warnings


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


def notify_peers(maps, index):
    """One ICMP echo request to every peer's address on plane `index`, sent on its NIC.

    The egress program handles it like any packet: steered off a drained
    plane (the peer learns at once), native after an undrain (the peer
    forgets). Peers that exchange no traffic with us move too. Returns
    (sent, warnings); failures never fail the task.
    """
    plane = maps.planes.get(index)
    try:
        ifname = socket.if_indextoname(plane.ifindex)
    except OSError:
        return 0, ["notify_peers: plane %d's ifindex %d does not exist here; no peer notified" % (index, plane.ifindex)]
    socks, sent, errors = {}, 0, []
    try:
        for peer_id in maps.peer_ids():
            peer = maps.get_peer(peer_id)
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


def report(maps, record, names, named=0, flags=None) -> dict:
    """Every configured or declared plane with its counters, every peer with its state and ages."""
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
    shown = [p["index"] for p in planes]
    id_names = {v: k for k, v in record.peer_ids.items()}
    addrs = peer_addresses(maps)
    peers = []
    for peer_id in maps.peer_ids():
        st = maps.get_peer(peer_id)
        seen = maps.last_seen(peer_id)
        peers.append({
            "name": id_names.get(peer_id, "#%d" % peer_id),
            "id": peer_id,
            "active_plane": names[st["active_plane"]] if st["active_plane"] < layout.PLANE_SLOTS else None,
            "down_planes": [names[i] for i in st["down_planes"]],
            "learned_planes": [names[i] for i in st["learned_planes"]],
            "learn": not st["flags"] & layout.PEER_NO_LEARN,
            "changed_age_ms": _age_ms(now, st["changed_ns"]),
            "last_seen_age_ms": {names[i]: _age_ms(now, seen[i]) for i in shown},
            "addresses": addresses_view(addrs.get(peer_id, {}), names),
        })
    peers.sort(key=lambda p: p["name"])
    return {"planes": planes, "peers": peers}


def _age_ms(now: int, stamp: int):
    if not stamp:
        return None
    return max(0, now - stamp) // 1000000
