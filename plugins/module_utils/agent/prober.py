# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Probe sockets: one non-blocking UDP socket per plane and address family.

Each is bound to this host's address on the plane and to the plane's NIC
(SO_BINDTODEVICE), so a probe leaves on that plane and nowhere else; the data
path never steers probes (bpf/edgeft_maps.h). Probes carry DSCP CS6 (network
control) by default, as BFD does, so congestion queues drop data first.
"""

from __future__ import annotations

import errno
import socket

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import probe
from ansible_collections.edgeft.failover.plugins.module_utils.fabric import sockets

# Errors that say "this socket cannot work now" (address gone, NIC gone): reopen later.
_REOPEN = (errno.EADDRNOTAVAIL, errno.ENODEV, errno.EINVAL)


class Prober:
    def __init__(self, planes, tos: int, log, on_open=None, on_close=None):
        self.planes = planes  # config planes with resolved own addresses
        self.tos = tos
        self.log = log
        self.on_open = on_open or (lambda s: None)  # the loop registers sockets for reading
        self.on_close = on_close or (lambda s: None)
        self.socks = {}  # (plane index, family) -> socket
        self.keys = {}  # fileno -> (plane index, family)
        self.failed = {}  # (plane index, family) -> last error text (logged once)

    def socket(self, plane: int, family: int):
        """The bound socket, opened on first use; None while it cannot be opened."""
        key = (plane, family)
        s = self.socks.get(key)
        if s is not None:
            return s
        spec = self.planes[plane]
        source = spec.get(family)
        if source is None:
            return None
        s = None
        try:
            s = sockets.plane_socket(family, socket.SOCK_DGRAM, spec["interface"], self.tos)
            s.bind((source, 0))
        except OSError as e:
            if s is not None:
                s.close()
            text = "probe socket on %s (%s) cannot open: %s" % (spec["interface"], source, e.strerror or e)
            if self.failed.get(key) != text:
                self.log.warning(text)
                self.failed[key] = text
            return None
        self.failed.pop(key, None)
        self.socks[key] = s
        self.keys[s.fileno()] = key
        self.on_open(s)
        return s

    def send(self, plane: int, family: int, address: str, payload: bytes) -> bool:
        s = self.socket(plane, family)
        if s is None:
            return False
        try:
            s.sendto(payload, (address, probe.PORT))
            return True
        except BlockingIOError:
            return False
        except OSError as e:
            if e.errno in _REOPEN:
                self.close_one(plane, family)
            return False

    def receive(self, s) -> list:
        """[(data, source address)] of every datagram waiting on s."""
        out = []
        while True:
            try:
                data, addr = s.recvfrom(256)
            except BlockingIOError:
                return out
            except OSError:
                # ICMP errors (port/host unreachable) surface here: the probe was lost.
                continue
            out.append((data, addr[0]))

    def close_one(self, plane: int, family: int) -> None:
        s = self.socks.pop((plane, family), None)
        if s is not None:
            self.keys.pop(s.fileno(), None)
            self.on_close(s)
            s.close()

    def close(self) -> None:
        for plane, family in list(self.socks):
            self.close_one(plane, family)
