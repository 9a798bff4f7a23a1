# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check one plane end to end: check probes from this host's NIC of the plane
to peers' addresses on it, answered by the peers' data path (module plane_check).

A check is a probe of kind CHECK (bpf/edgeft_maps.h, datapath/probe.py): the
peer's tc ingress program reflects it in the kernel like the agent's requests,
but also while the peer has the plane DRAINED, so an operator can prove a plane
through a switch under maintenance before moving traffic back onto it. Egress
never steers checks, so a check tests exactly the plane it was sent on: the
socket is bound to the plane's NIC and to this host's address there, and a
reply steered onto another plane would not reach it.

Changes nothing anywhere (the data path neither counts nor learns from
checks), so the module runs the same in check mode. Free of Ansible imports;
every error names the option that caused it. plane_state's check_planes runs the
same checks after its query (state_and_checks): the maintenance guard reads a
host and proves its backup planes in one module run.
"""

from __future__ import annotations

import ipaddress
import os
import select
import socket
import time

from ansible_collections.edgeft.failover.plugins.module_utils import constants
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import probe
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.fabric import sockets
from ansible_collections.edgeft.failover.plugins.module_utils.host import nics
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError, normalize_planes, plane_names, resolve_plane
from ansible_collections.edgeft.failover.plugins.module_utils.host.records import PeerTableRecord
from ansible_collections.edgeft.failover.plugins.module_utils.planes import state as planes_state
from ansible_collections.edgeft.failover.plugins.module_utils.planes.maps import open_maps, require_pin_root

TOS = 0xC0  # DSCP CS6 (network control), as the agent's probes: queued like them
MAX_COUNT = 1000
_FAMILY_NAMES = {"auto": None, "4": 4, "6": 6}


class CheckError(EdgeftError, RuntimeError):
    """The check could not run on this host (a socket failed); the message says why."""


# ------------------------------------------------------------------ options
def int_option(params, name, default, low, high=None):
    """params[name] as an int in low..high (high None: no bound), default when unset."""
    value = params.get(name)
    if value is None:
        return default
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise OptionError("%s: %r is not an integer" % (name, params.get(name))) from None
    if value < low or (high is not None and value > high):
        bound = "%d..%d" % (low, high) if high is not None else ">= %d" % low
        raise OptionError("%s: must be %s, got %d" % (name, bound, value))
    return value


def options(params) -> dict:
    """The validated options (ranges checked here too: callers need not be Ansible)."""
    if params.get("plane") in (None, ""):
        raise OptionError("plane: the plane to check is required, by name or index")
    family = str(params.get("family") or "auto")
    if family not in _FAMILY_NAMES:
        raise OptionError("family: %r must be auto, 4 or 6" % params.get("family"))
    peers = params.get("peers")
    if peers is not None:
        if isinstance(peers, (str, bytes)) or not all(isinstance(p, str) and p for p in peers):
            raise OptionError("peers: a list of peer names is expected, got %r" % (peers,))
        peers = list(dict.fromkeys(peers))  # once each, in the given order
    return {
        "pin_root": params.get("pin_root"),
        "state_dir": params.get("state_dir") or constants.STATE_DIR,
        "planes": normalize_planes(params["planes"]) if params.get("planes") else None,
        "plane": params["plane"],
        "peers": peers,
        "family": _FAMILY_NAMES[family],
        "count": int_option(params, "count", 5, 1, MAX_COUNT),
        "interval_ms": int_option(params, "interval_ms", 20, 1),
        "timeout_ms": int_option(params, "timeout_ms", 500, 1),
        "max_loss_percent": int_option(params, "max_loss_percent", 0, 0, 100),
    }


# ------------------------------------------------------------------ what to check
def _plane_peers(maps, record, index) -> dict:
    """name -> {4: address or None, 6: ...} on plane `index`, for every peer in the maps.

    Named as plane_state reports them: the peer_table record's name, else #<id>.
    """
    peer_name = record.peer_namer()
    out = {}
    for peer_id in maps.peer_ids():
        peer = maps.get_peer(peer_id)
        if peer is None:  # removed meanwhile
            continue
        out[peer_name(peer_id)] = {4: peer["v4"][index], 6: peer["v6"][index]}
    return out


def _interface(ifindex, declared, index, plane_name) -> str:
    """The data path's NIC of the plane, by name; a declaration must agree with it."""
    try:
        ifname = socket.if_indextoname(ifindex)
    except OSError:
        raise OptionError("plane: the maps give plane %r the NIC with ifindex %d, which does not exist on this host: "
                          "re-run edgeft.failover.peer_table with the host's planes" % (plane_name, ifindex)) from None
    if declared is not None and index < len(declared) and declared[index]["interface"] != ifname:
        mine = declared[index]
        raise OptionError("%s.interface: %r is not the data path's NIC of plane %r (%s): declare the planes as "
                          "edgeft.failover.peer_table did" % (mine["where"], mine["interface"], plane_name, ifname))
    return ifname


def select_targets(peers: dict, wanted, family, plane_name):
    """([{name, family, address}] sorted by name, [names skipped]): the peers
    to check and how.

    family None (auto): IPv4 when the peer has an IPv4 address on the plane,
    else IPv6. wanted None: every peer with a usable address, skipping (and
    listing) those that only have the other family there; named peers must
    exist and have one.
    """
    def pick(addrs):
        if family is not None:
            return family, addrs[family]
        return (4, addrs[4]) if addrs[4] else (6, addrs[6])

    known = sorted(peers)
    if wanted is not None:
        unknown = [n for n in wanted if n not in peers]
        if unknown:
            raise OptionError("peers: unknown peer(s) %s; the peers of this host are: %s (names recorded by "
                              "edgeft.failover.peer_table in state_dir)"
                              % (", ".join(unknown), ", ".join(known) or "none"))
        missing = [n for n in wanted if not pick(peers[n])[1]]
        if missing:
            raise OptionError("peers: no %s on plane %r in the peer table for %s: leave them out%s"
                              % ("IPv%d address" % family if family else "address", plane_name, ", ".join(missing),
                                 " or choose the other family" if family else ""))
    targets, skipped = [], []
    for name in known if wanted is None else sorted(wanted):
        fam, address = pick(peers[name])
        if address:
            targets.append({"name": name, "family": fam, "address": address})
        elif any(peers[name].values()):
            skipped.append(name)
    return targets, skipped


def select_sources(have: dict, targets, interface, plane_name, family_option) -> dict:
    """{family: source address} for the families the targets need: the NIC's
    address whose prefix holds the most of those peers (on-link), else its first."""
    out = {}
    for family in sorted({t["family"] for t in targets}):
        peers = [t for t in targets if t["family"] == family]
        if not have[family]:
            names = ", ".join(t["name"] for t in peers)
            hint = "choose the other family" if family_option else "set family to the other one"
            raise OptionError("%s: %s (plane %r) has no global IPv%d address to send checks from, needed for %s: "
                              "add one to the NIC or %s"
                              % ("family" if family_option else "plane", interface, plane_name, family, names, hint))
        best = max(have[family], key=lambda i: sum(ipaddress.ip_address(t["address"]) in i.network for t in peers))
        out[family] = str(best.ip)
    return out


# ------------------------------------------------------------------ probing
# Socket buffers for a round to many peers: a round is sent as a burst and its
# replies may all arrive before we read; the defaults (~200 kB) hold a few
# hundred datagrams, and a dropped reply would read as loss on the plane.
BUFFER_PER_PEER = 2048
BUFFER_MIN, BUFFER_MAX = 1 << 18, 1 << 24
READ_EVERY = 32  # sends between two reads of the replies during a burst
SEND_WAIT_MS = 50  # how long a send waits for room in a full socket buffer


def open_socket(family, interface, source, peers=1, tos=TOS):
    s = None
    try:
        s = sockets.plane_socket(family, socket.SOCK_DGRAM, interface, tos)
        size = min(BUFFER_MAX, max(BUFFER_MIN, peers * BUFFER_PER_PEER))
        for force, plain in ((getattr(socket, "SO_RCVBUFFORCE", 33), socket.SO_RCVBUF),
                             (getattr(socket, "SO_SNDBUFFORCE", 32), socket.SO_SNDBUF)):
            try:  # root may exceed net.core.[rw]mem_max; anyone else gets what the limit allows
                s.setsockopt(socket.SOL_SOCKET, force, size)
            except OSError:
                s.setsockopt(socket.SOL_SOCKET, plain, size)
        s.bind((source, 0))
    except OSError as e:
        if s is not None:
            s.close()
        raise CheckError("plane: cannot open a check socket on %s from %s: %s" % (interface, source, e.strerror or e)) from None
    return s


def _ceil_ms(ns) -> int:
    return max(1, -(-ns // 1000000))


def run_checks(targets, sources, interface, count, interval_ms, timeout_ms, clock=time.monotonic_ns):
    """Send `count` checks to every target, one round every interval_ms, and
    wait up to timeout_ms after the last round for the replies.

    Fills each target's sent, answered and rtts_ns (in place). Replies match
    by session (random per run, so concurrent runs never take each other's),
    sequence number and source. Returns a list of send errors (text).
    """
    session = int.from_bytes(os.urandom(4), "big")
    socks = {}
    errors = []
    for t in targets:
        t.update(sent=0, answered=0, rtts_ns=[])
    try:
        for family, source in sources.items():
            peers = sum(t["family"] == family for t in targets)
            socks[family] = open_socket(family, interface, source, peers)
        by_fd = {s.fileno(): s for s in socks.values()}
        poller = select.poll()
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        pending = {}  # seq -> (target, sent ns)

        def read_all():
            for s in socks.values():
                _receive(s, session, pending, clock)

        def receive_until(deadline, done_early):
            """Read replies until deadline; done_early: or until none is missing."""
            while not (done_early and not pending):
                left = deadline - clock()
                if left <= 0:
                    return
                for fd, _events in poller.poll(_ceil_ms(left)):
                    _receive(by_fd[fd], session, pending, clock)

        def send(t, seq):
            s = socks[t["family"]]
            for attempt in (0, 1):
                now = clock()
                try:
                    s.sendto(probe.check_request(session, seq, now), (t["address"], probe.PORT))
                    pending[seq] = (t, now)
                    return
                except BlockingIOError:
                    if attempt == 0:  # the send buffer is full: give the NIC a moment
                        select.select([], [s], [], SEND_WAIT_MS / 1000.0)
                        continue
                    error = "the socket's send buffer stayed full"
                except OSError as e:
                    error = e.strerror or str(e)
                break
            # Counts as lost, as a drop on the wire would.
            text = "check to %s (%s) on %s: %s" % (t["name"], t["address"], interface, error)
            if text not in errors:
                errors.append(text)

        seq = 0
        start = clock()
        for r in range(count):
            receive_until(start + r * interval_ms * 1000000, done_early=False)
            for i, t in enumerate(targets):
                t["sent"] += 1
                send(t, seq)
                seq += 1
                if i % READ_EVERY == READ_EVERY - 1:
                    read_all()
        receive_until(clock() + timeout_ms * 1000000, done_early=True)
    finally:
        for s in socks.values():
            s.close()
    return errors


def _receive(s, session, pending, clock) -> None:
    while True:
        try:
            data, addr = s.recvfrom(256)
        except BlockingIOError:
            return
        except OSError:
            # An ICMP error surfacing on the socket: that check is lost, read on.
            continue
        now = clock()
        parsed = probe.parse_check_reply(data)
        if parsed is None or parsed[0] != session or parsed[1] not in pending:
            continue  # not ours, a duplicate, or another run's
        target, sent_ns = pending[parsed[1]]
        if ipaddress.ip_address(addr[0].split("%")[0]) != ipaddress.ip_address(target["address"]):
            continue
        del pending[parsed[1]]
        target["answered"] += 1
        target["rtts_ns"].append(max(0, now - sent_ns))


# ------------------------------------------------------------------ the module
def peer_result(t, max_loss_percent) -> dict:
    lost = t["sent"] - t["answered"]
    loss = round(100.0 * lost / t["sent"], 1) if t["sent"] else 100.0
    rtts = t["rtts_ns"]
    return {
        "name": t["name"],
        "address": t["address"],
        "sent": t["sent"],
        "answered": t["answered"],
        "lost": lost,
        "loss_percent": loss,
        "rtt_ms_avg": round(sum(rtts) / len(rtts) / 1e6, 3) if rtts else None,
        "rtt_ms_max": round(max(rtts) / 1e6, 3) if rtts else None,
        # A peer that answered nothing is never healthy, whatever max_loss_percent says.
        "healthy": bool(t["answered"]) and loss <= max_loss_percent,
    }


def plane_check(params):
    """The plane_check module: returns (result, warnings). Unhealthy peers are a
    result, not an error: the caller decides what they mean."""
    opts = options(params)
    with open_maps(opts["pin_root"]) as maps:
        record = PeerTableRecord(opts["state_dir"], opts["pin_root"])
        names, named = plane_names(opts["planes"], record)
        index = resolve_plane(opts["plane"], names, named)
        cfg = maps.planes.get(index)
        if not cfg.ifindex:
            raise OptionError("plane: plane %r (index %d) is not configured in the maps under %s: set the host's "
                              "planes with edgeft.failover.peer_table first" % (names[index], index, opts["pin_root"]))
        peers = _plane_peers(maps, record, index)
    # The maps are released: checking takes a while and writes nothing to them.
    plane_name = names[index]
    interface = _interface(cfg.ifindex, opts["planes"], index, plane_name)
    targets, skipped = select_targets(peers, opts["peers"], opts["family"], plane_name)
    sources = select_sources(nics.addresses(cfg.ifindex, CheckError), targets, interface, plane_name, opts["family"]) if targets else {}
    warnings = []
    if skipped:
        warnings.append("not checked, no IPv%d address on plane %r: %s" % (opts["family"], plane_name, ", ".join(skipped)))
    if targets:
        errors = run_checks(targets, sources, interface, opts["count"], opts["interval_ms"], opts["timeout_ms"])
        warnings.extend("send failed: %s" % e for e in errors[:5])
    else:
        warnings.append("no peer to check on plane %r%s" % (
            plane_name, "" if opts["peers"] is not None else " (no peer in the table has an address there)"))
    results = [peer_result(t, opts["max_loss_percent"]) for t in targets]
    unhealthy = [r["name"] for r in results if not r["healthy"]]
    result = {
        "changed": False,
        "plane": {"name": plane_name, "index": index, "interface": interface},
        "peers": results,
        "healthy": bool(results) and not unhealthy,
        "unhealthy_peers": unhealthy,
        "checked": len(results),
    }
    return result, warnings


# ------------------------------------------------------------------ plane_state's check_planes
def check_requests(params) -> list:
    """plane_state's check_planes as plane_check's params, one per plane, validated before the
    query (or anything else) runs: a query that also proves planes end to end in one run."""
    wanted = params.get("check_planes") or []
    if not wanted:
        return []
    if (params.get("state") or "query") != "query":
        raise OptionError("check_planes: only with state=query")
    if isinstance(wanted, (str, bytes)):
        raise OptionError("check_planes: a list of plane names or indexes is expected, got %r" % (wanted,))
    count = int_option(params, "check_count", 5, 1, MAX_COUNT)
    max_loss = int_option(params, "check_max_loss_percent", 0, 0, 100)
    require_pin_root(params.get("pin_root"))  # the plane names below are read from what is pinned there
    record = PeerTableRecord(params.get("state_dir") or constants.STATE_DIR, params.get("pin_root"))
    names, named = plane_names(normalize_planes(params["planes"]) if params.get("planes") else None, record)
    requests = {}
    for value in wanted:
        index = resolve_plane(value, names, named, option="check_planes")
        requests[names[index]] = {"pin_root": params.get("pin_root"), "state_dir": params.get("state_dir"),
                                  "planes": params.get("planes"), "plane": str(index), "count": count,
                                  "max_loss_percent": max_loss}
    return list(requests.values())


def state_and_checks(params, check_mode=False) -> tuple:
    """The plane_state module: its query or change (planes/state.py), then the checks of
    check_planes, validated before either runs. Returns (result, warnings)."""
    requests = check_requests(params)
    result, warnings = planes_state.plane_state(params, check_mode)
    result["checks"], check_warnings = run_requests(requests)
    return result, warnings + check_warnings


def run_requests(requests) -> tuple:
    """({plane name: plane_check's result without `changed`}, warnings) for check_requests()."""
    out, warnings = {}, []
    for request in requests:
        try:
            result, check_warnings = plane_check(request)
        except OptionError as e:  # a plane the maps do not configure
            raise OptionError("check_planes: %s" % str(e).replace("plane: ", "", 1)) from None
        result.pop("changed", None)
        out[result["plane"]["name"]] = result
        warnings.extend(check_warnings)
    return out, warnings
