# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sockets that test one plane: bound to its NIC and marked like the agent's probes."""

from __future__ import annotations

import socket

from ansible_collections.edgeft.failover.plugins.module_utils import constants


def plane_socket(family: int, kind: int, interface: str, tos: int, proto: int = 0):
    """A non-blocking socket (kind: SOCK_DGRAM or SOCK_RAW) bound to the NIC, so it sends on that
    plane and nowhere else, with `tos` as its IPv4 TOS or IPv6 traffic class. The caller binds
    the address. Raises OSError (no such NIC, no CAP_NET_RAW); nothing is left open then."""
    af = socket.AF_INET if family == 4 else socket.AF_INET6
    s = socket.socket(af, kind | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, proto)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, interface.encode())
        if family == 4:
            s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
        else:
            s.setsockopt(socket.IPPROTO_IPV6, constants.IPV6_TCLASS, tos)
    except OSError:
        s.close()
        raise
    return s
