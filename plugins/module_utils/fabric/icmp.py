# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ICMP echo requests: the agent's first-hop probes and plane_state's notifications."""

from __future__ import annotations

import struct

ECHO_REQUEST = {4: 8, 6: 128}
ECHO_REPLY = {4: 0, 6: 129}
HEADER = struct.Struct("!BBHHH")  # type, code, checksum, identifier, sequence


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of data."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def echo_request(family: int, ident: int, seq: int, payload: bytes) -> bytes:
    """An echo request; IPv6's checksum is the kernel's (it covers the pseudo-header)."""
    header = HEADER.pack(ECHO_REQUEST[family], 0, 0, ident & 0xFFFF, seq & 0xFFFF)
    if family == 6:
        return header + payload
    return HEADER.pack(ECHO_REQUEST[4], 0, checksum(header + payload), ident & 0xFFFF, seq & 0xFFFF) + payload
