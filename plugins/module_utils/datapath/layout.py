"""ctypes mirror of bpf/edgeft_maps.h (the one definition of the map layouts).

Why a mirror: processes that only read or fill the pinned maps (agent, status,
the peer-table module) must work without a C compiler, and parsing C is
fragile. The mirror is never trusted blindly: every compile appends
_Static_assert()s generated from it (layout_check.c_asserts), loaded maps are
checked against MapSpec (type, key/value size, max_entries), and a unit test
compares it field by field with the types bcc derives from the header.
"""

from __future__ import annotations

import ctypes
from collections import namedtuple

LAYOUT_VERSION = 1
PLANE_SLOTS = 4
PLANE_NONE = 255

PLANE_UP = 0x1
PLANE_DRAINED = 0x2
PLANE_ROUTED = 0x4
PEER_NO_LEARN = 0x1
XLAT_LOCAL = 0x1
TCP_RTO = 1
TCP_RETRANS = 2
WAKE_RING_BYTES = 65536
WAKE_TX = 0
WAKE_RX = 1
# edgeft_tcpctr's slots, in order (EDGEFT_TCP_CTR_*).
TCP_COUNTERS = ("tuned", "tune_failed", "rto", "retrans", "events", "events_lost", "last_error")

# Fixed constants: asserted equal in every compile.
CONSTANTS = {
    "EDGEFT_LAYOUT_VERSION": LAYOUT_VERSION,
    "EDGEFT_PLANE_SLOTS": PLANE_SLOTS,
    "EDGEFT_PLANE_NONE": PLANE_NONE,
    "EDGEFT_PLANE_UP": PLANE_UP,
    "EDGEFT_PLANE_DRAINED": PLANE_DRAINED,
    "EDGEFT_PEER_NO_LEARN": PEER_NO_LEARN,
    "EDGEFT_PLANE_ROUTED": PLANE_ROUTED,
    "EDGEFT_XLAT_LOCAL": XLAT_LOCAL,
    "EDGEFT_TCP_RTO": TCP_RTO,
    "EDGEFT_TCP_RETRANS": TCP_RETRANS,
    "EDGEFT_TCP_COUNTERS": len(TCP_COUNTERS),
    "EDGEFT_WAKE_RING_BYTES": WAKE_RING_BYTES,
    "EDGEFT_WAKE_TX": WAKE_TX,
    "EDGEFT_WAKE_RX": WAKE_RX,
    **{"EDGEFT_TCP_CTR_%s" % name.upper(): i for i, name in enumerate(TCP_COUNTERS)},
}

# Overridable with -D<name>=<value>; the header's defaults.
TUNABLES = {
    "EDGEFT_MAX_PLANES": 2,
    "EDGEFT_MAX_PEERS": 4096,
    "EDGEFT_MAX_ADDRS": 32768,
    "EDGEFT_SEEN_RES_NS": 100000,
    "EDGEFT_LEARN_HOLD_NS": 50000000,
    "EDGEFT_WAKE_IDLE_NS": 1000000000,
}

# enum bpf_map_type values used here
MAP_HASH = 1
MAP_ARRAY = 2
MAP_PERCPU_ARRAY = 6
MAP_RINGBUF = 27


class Addr(ctypes.Structure):
    """struct edgeft_addr: IPv6, or IPv4 as ::ffff:a.b.c.d; network order."""

    c_name = "edgeft_addr"
    _fields_ = [("w", ctypes.c_uint32 * 4)]


class PeerRef(ctypes.Structure):
    c_name = "edgeft_peer_ref"
    _fields_ = [
        ("peer_id", ctypes.c_uint32),
        ("plane", ctypes.c_uint8),
        ("pad", ctypes.c_uint8 * 3),
    ]


class PeerState(ctypes.Structure):
    c_name = "edgeft_peer_state"
    _fields_ = [
        ("v4", ctypes.c_uint32 * PLANE_SLOTS),
        ("v6", Addr * PLANE_SLOTS),
        ("active_plane", ctypes.c_uint8),
        ("down_mask", ctypes.c_uint8),
        ("flags", ctypes.c_uint8),
        ("learned_mask", ctypes.c_uint8),
        ("pad", ctypes.c_uint8 * 4),
        ("changed_ns", ctypes.c_uint64),
    ]


class Plane(ctypes.Structure):
    c_name = "edgeft_plane"
    _fields_ = [("ifindex", ctypes.c_uint32), ("flags", ctypes.c_uint32)]


class Counters(ctypes.Structure):
    c_name = "edgeft_counters"
    _fields_ = [
        ("tx_packets", ctypes.c_uint64),
        ("tx_bytes", ctypes.c_uint64),
        ("steered_packets", ctypes.c_uint64),
        ("steered_bytes", ctypes.c_uint64),
        ("steer_skipped", ctypes.c_uint64),
        ("steered_in_packets", ctypes.c_uint64),
        ("steered_in_bytes", ctypes.c_uint64),
        ("rx_packets", ctypes.c_uint64),
        ("rx_bytes", ctypes.c_uint64),
        ("learned", ctypes.c_uint64),
        ("unlearned", ctypes.c_uint64),
    ]


class FoKey(ctypes.Structure):
    """edgeft_fo_v1 key: a native address and the plane of the failover address standing for it."""

    c_name = "edgeft_fo_key"
    _fields_ = [("native", Addr), ("plane", ctypes.c_uint32)]


class Xlat(ctypes.Structure):
    """edgeft_xlat_v1 value: the native address a failover address stands for."""

    c_name = "edgeft_xlat"
    _fields_ = [("native", Addr), ("flags", ctypes.c_uint32)]


class XlatCounters(ctypes.Structure):
    c_name = "edgeft_xlat_counters"
    _fields_ = [
        ("translated_out", ctypes.c_uint64),
        ("translated_in", ctypes.c_uint64),
        ("icmp_errors_in", ctypes.c_uint64),
        ("untranslatable", ctypes.c_uint64),
    ]


class TcpConfig(ctypes.Structure):
    """edgeft_tcpcfg value: the settings of the sock_ops program (bpf/tcp_peers.c)."""

    c_name = "edgeft_tcp_config"
    _fields_ = [
        ("rto_min_us", ctypes.c_uint32),
        ("delack_max_us", ctypes.c_uint32),
        ("signal_hold_ns", ctypes.c_uint64),
    ]


class TcpEvent(ctypes.Structure):
    """edgeft_tcpev record: a retransmission or RTO of a connection to a peer."""

    c_name = "edgeft_tcp_event"
    _fields_ = [
        ("peer_id", ctypes.c_uint32),
        ("plane", ctypes.c_uint8),
        ("kind", ctypes.c_uint8),
        ("pad", ctypes.c_uint8 * 2),
        ("ns", ctypes.c_uint64),
    ]


class Wake(ctypes.Structure):
    """edgeft_wake_v1 record: traffic with a peer resumed on a plane (WAKE_TX or WAKE_RX)."""

    c_name = "edgeft_wake"
    _fields_ = [
        ("peer_id", ctypes.c_uint32),
        ("plane", ctypes.c_uint8),
        ("dir", ctypes.c_uint8),
        ("pad", ctypes.c_uint8 * 2),
    ]


# A ring buffer map has neither key nor value (the kernel reports sizes 0); its records are
# their own type (Wake).
NOTHING = ctypes.c_uint8 * 0

STRUCTS = (Addr, PeerRef, PeerState, Plane, Counters, FoKey, Xlat, XlatCounters, TcpConfig, TcpEvent, Wake)

MapSpec = namedtuple("MapSpec", "name map_type key value max_entries")
"""max_entries(tunables dict) -> int, the same expression as the header's."""

MAPS = (
    MapSpec("edgeft_peers_v1", MAP_HASH, Addr, PeerRef, lambda t: t["EDGEFT_MAX_ADDRS"]),
    MapSpec("edgeft_state_v1", MAP_HASH, ctypes.c_uint32, PeerState, lambda t: t["EDGEFT_MAX_PEERS"]),
    MapSpec(
        "edgeft_seen_v1",
        MAP_ARRAY,
        ctypes.c_uint32,
        ctypes.c_uint64,
        lambda t: t["EDGEFT_MAX_PEERS"] * PLANE_SLOTS,
    ),
    MapSpec(
        "edgeft_sent_v1",
        MAP_ARRAY,
        ctypes.c_uint32,
        ctypes.c_uint64,
        lambda t: t["EDGEFT_MAX_PEERS"] * PLANE_SLOTS,
    ),
    MapSpec("edgeft_plane_v1", MAP_ARRAY, ctypes.c_uint32, Plane, lambda t: PLANE_SLOTS),
    MapSpec("edgeft_ctrs_v1", MAP_PERCPU_ARRAY, ctypes.c_uint32, Counters, lambda t: PLANE_SLOTS),
    MapSpec("edgeft_fo_v1", MAP_HASH, FoKey, Addr, lambda t: t["EDGEFT_MAX_ADDRS"]),
    MapSpec("edgeft_xlat_v1", MAP_HASH, Addr, Xlat, lambda t: t["EDGEFT_MAX_ADDRS"]),
    MapSpec("edgeft_xctr_v1", MAP_PERCPU_ARRAY, ctypes.c_uint32, XlatCounters, lambda t: PLANE_SLOTS),
    MapSpec("edgeft_wake_v1", MAP_RINGBUF, NOTHING, NOTHING, lambda t: WAKE_RING_BYTES),
)
MAPS_BY_NAME = {m.name: m for m in MAPS}
# Maps a data path loaded by an earlier edgeft does not have: every load pins them, and a reader
# of the maps (the agent, the modules) opens them when they are pinned and does without them
# until the programs are replaced, so a rolling upgrade never finds a host it cannot read.
ADDED_MAPS = frozenset(("edgeft_wake_v1",))
REQUIRED_MAPS = tuple(m for m in MAPS if m.name not in ADDED_MAPS)

# The sock_ops program's own maps (bpf/tcp_peers.c): created with it, never pinned. Its object
# also holds every map above, which the loader points at the host's pins (edgeft_peers_v1 is
# the one it reads).
TCP_PROGRAM = "edgeft_tcp"
TCP_MAPS = (
    MapSpec("edgeft_tcpcfg", MAP_ARRAY, ctypes.c_uint32, TcpConfig, lambda t: 1),
    MapSpec("edgeft_tcpctr", MAP_PERCPU_ARRAY, ctypes.c_uint32, ctypes.c_uint64, lambda t: len(TCP_COUNTERS)),
    MapSpec("edgeft_tcplast", MAP_ARRAY, ctypes.c_uint32, ctypes.c_uint64, lambda t: t["EDGEFT_MAX_PEERS"]),
)
TCP_EVENTS_MAP = "edgeft_tcpev"


def tunables(overrides: dict = None) -> dict:
    """Header defaults with overrides applied; unknown names are an error."""
    out = dict(TUNABLES)
    for k, v in (overrides or {}).items():
        if k not in out:
            raise ValueError("unknown data path tunable %r (known: %s)" % (k, ", ".join(sorted(out))))
        try:
            out[k] = int(v)
        except (TypeError, ValueError):
            raise ValueError("%s: %r is not an integer" % (k, v)) from None
    if not 1 <= out["EDGEFT_MAX_PLANES"] <= PLANE_SLOTS:
        raise ValueError("EDGEFT_MAX_PLANES must be 1..%d" % PLANE_SLOTS)
    return out


def seen_slot(peer_id: int, plane: int) -> int:
    """Index into edgeft_seen_v1 and edgeft_sent_v1 (same formula as the C side)."""
    return peer_id * PLANE_SLOTS + plane
