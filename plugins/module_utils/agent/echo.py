# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""First-hop probes: ICMP echo to a routed plane's gateway.

A router answers echo requests in its kernel, so these cost the router no
user-space work either, and need nothing installed on it. One raw socket per
plane and family, bound to the plane's NIC and address; the echo payload is
the same struct as a peer probe (probe.py), so a reply carries back our
session, sequence number and send time.
"""

from __future__ import annotations

import socket
import struct

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import probe
from ansible_collections.edgeft.failover.plugins.module_utils.fabric import icmp, sockets

ICMP6_FILTER = 1


def request(family: int, ident: int, session: int, seq: int, sent_ns: int) -> bytes:
    """An echo request carrying a peer probe's payload."""
    return icmp.echo_request(family, ident, seq, probe.request(session, seq, sent_ns))


def parse_reply(family: int, data: bytes, ident: int):
    """(session, seq, sent_ns) of our echo reply, or None for any other ICMP message.

    IPv4 raw sockets deliver the IP header too; IPv6 ones do not.
    """
    if family == 4:
        if len(data) < 20:
            return None
        data = data[(data[0] & 0x0F) * 4:]
    if len(data) < icmp.HEADER.size + probe.SIZE:
        return None
    kind, code, _sum, got_ident, _seq = icmp.HEADER.unpack_from(data)
    if kind != icmp.ECHO_REPLY[family] or code != 0 or got_ident != ident & 0xFFFF:
        return None
    fields = probe.FORMAT.unpack_from(data, icmp.HEADER.size)
    magic, kind_field, _swap, session, seq, sent_ns = fields
    if magic != probe.MAGIC or kind_field != probe.REQUEST:  # an echo comes back as it left
        return None
    return session, seq, sent_ns


def open_socket(family: int, interface: str, source: str, tos: int):
    """A non-blocking raw ICMP socket bound to the NIC and our address on it.

    Raises OSError (no CAP_NET_RAW, address not there yet...).
    """
    s = sockets.plane_socket(family, socket.SOCK_RAW, interface, tos,
                             socket.IPPROTO_ICMP if family == 4 else socket.IPPROTO_ICMPV6)
    try:
        if family == 6:
            # Only echo replies reach the socket: a bit set in the filter blocks that type.
            blocked = [0xFFFFFFFF] * 8
            blocked[icmp.ECHO_REPLY[6] >> 5] &= ~(1 << (icmp.ECHO_REPLY[6] & 31))
            s.setsockopt(socket.IPPROTO_ICMPV6, ICMP6_FILTER, struct.pack("=8I", *blocked))
        s.bind((source, 0))
    except OSError:
        s.close()
        raise
    return s
