# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Link (carrier) events from rtnetlink, on a raw socket.

Why not pyroute2 here: this is the agent's fastest path (carrier loss ->
plane flag), and all it needs is ifi_index and ifi_flags, at fixed offsets of
every RTM_NEWLINK message. Parsing them with struct costs microseconds and no
dependency; pyroute2 would decode every attribute of every message.
"""

from __future__ import annotations

import errno
import os
import socket
import struct

NETLINK_ROUTE = 0
RTMGRP_LINK = 1
RTM_NEWLINK = 16
RTM_DELLINK = 17
RTM_GETLINK = 18
NLMSG_ERROR = 2
NLMSG_DONE = 3
NLM_F_REQUEST = 1
NLM_F_DUMP = 0x300
IFF_UP = 0x1
IFF_LOWER_UP = 0x10000

NLMSG = struct.Struct("=IHHII")  # len, type, flags, seq, pid
IFINFO = struct.Struct("=BxHiII")  # family, type, index, flags, change


def carrier(flags: int) -> bool:
    """Admin up with carrier: a NIC that can carry traffic."""
    return bool(flags & IFF_UP) and bool(flags & IFF_LOWER_UP)


def parse(data: bytes) -> list:
    """[(ifindex, flags or None when the link was deleted)] of the link messages in data."""
    out = []
    offset = 0
    while offset + NLMSG.size <= len(data):
        length, kind, _flags, _seq, _pid = NLMSG.unpack_from(data, offset)
        if length < NLMSG.size:
            break
        if kind in (RTM_NEWLINK, RTM_DELLINK) and length >= NLMSG.size + IFINFO.size:
            _family, _type, index, flags, _change = IFINFO.unpack_from(data, offset + NLMSG.size)
            out.append((index, None if kind == RTM_DELLINK else flags))
        offset += (length + 3) & ~3
    return out


def _socket(groups: int) -> socket.socket:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, NETLINK_ROUTE)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    s.bind((0, groups))
    return s


def dump_links() -> dict:
    """ifindex -> flags of every link in this network namespace."""
    s = _socket(0)
    try:
        req = NLMSG.pack(NLMSG.size + IFINFO.size, RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + IFINFO.pack(0, 0, 0, 0, 0)
        s.send(req)
        links = {}
        while True:
            data = s.recv(1 << 16)
            for index, flags in parse(data):
                links[index] = flags
            offset = 0
            while offset + NLMSG.size <= len(data):
                length, kind = NLMSG.unpack_from(data, offset)[:2]
                if kind == NLMSG_DONE:
                    return links
                if kind == NLMSG_ERROR:
                    code = struct.unpack_from("=i", data, offset + NLMSG.size)[0]
                    raise OSError(-code, "RTM_GETLINK dump: %s" % os.strerror(-code))
                if length < NLMSG.size:
                    break
                offset += (length + 3) & ~3
    finally:
        s.close()


class LinkMonitor:
    """Non-blocking subscription to this namespace's link events."""

    def __init__(self):
        self.sock = _socket(RTMGRP_LINK)
        self.sock.setblocking(False)
        self.overflowed = False

    def fileno(self) -> int:
        return self.sock.fileno()

    def read(self) -> list:
        """Every pending (ifindex, flags or None) event; sets `overflowed` when
        the kernel dropped events (the caller then re-reads every link)."""
        out = []
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except BlockingIOError:
                return out
            except OSError as e:
                if e.errno == errno.ENOBUFS:
                    self.overflowed = True
                    continue
                raise
            out.extend(parse(data))

    def close(self) -> None:
        self.sock.close()
