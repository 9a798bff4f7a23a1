"""Address encoding shared by the map accessors (matches edgeft_parse in C)."""

from __future__ import annotations

import ctypes
import ipaddress

from ansible_collections.edgeft.failover.plugins.module_utils.datapath.layout import Addr


def parse_peer_address(text):
    """A unicast address that can identify a peer; ValueError says why not.

    Multicast/broadcast never reach a lookup in C; link-local and loopback are
    scoped to one link or host, so steering them to another plane is wrong.
    """
    a = ipaddress.ip_address(text)
    if a.version == 6 and a.ipv4_mapped is not None:
        a = a.ipv4_mapped
    bad = (
        a.is_multicast
        or a.is_unspecified
        or a.is_loopback
        or a.is_link_local
        or (a.version == 4 and a == ipaddress.IPv4Address("255.255.255.255"))
        or (a.version == 4 and int(a) >> 28 >= 0xE)
    )
    if bad:
        raise ValueError("%s is not a unicast, global-or-private address usable as a peer address" % a)
    return a


def to_key(text) -> Addr:
    """Addr for the peers map: IPv6 as is, IPv4 as ::ffff:a.b.c.d."""
    a = parse_peer_address(text)
    if a.version == 4:
        a = ipaddress.IPv6Address(b"\0" * 10 + b"\xff\xff" + a.packed)
    return Addr.from_buffer_copy(a.packed)


def from_key(key: Addr) -> str:
    a = ipaddress.IPv6Address(bytes(key))
    return str(a.ipv4_mapped or a)


def v4_word(text) -> int:
    """IPv4 as the u32 whose memory holds network order (edgeft_peer_state.v4)."""
    if text is None:
        return 0
    a = parse_peer_address(text)
    if a.version != 4:
        raise ValueError("%s is not an IPv4 address" % a)
    return ctypes.c_uint32.from_buffer_copy(a.packed).value


def v4_text(word: int):
    if not word:
        return None
    return str(ipaddress.IPv4Address(bytes(ctypes.c_uint32(word))))


def v6_addr(text) -> Addr:
    if text is None:
        return Addr()
    a = parse_peer_address(text)
    if a.version != 6:
        raise ValueError("%s is not an IPv6 address" % a)
    return Addr.from_buffer_copy(a.packed)


def v6_text(addr: Addr):
    raw = bytes(addr)
    if not any(raw):
        return None
    return str(ipaddress.IPv6Address(raw))
