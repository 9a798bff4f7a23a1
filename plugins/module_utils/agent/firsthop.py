# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The first hop of a routed plane, probed like a path (path.Path) with ICMP echo.

When the gateway stops answering while the NIC keeps its carrier (a ToR that
forwards nothing, a dead routing engine), every peer behind it is lost on the
plane at once: the whole plane is judged down, as on carrier loss, even for
peers that are idle and so probed rarely.
"""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.agent import echo
from ansible_collections.edgeft.failover.plugins.module_utils.agent.path import Path


class FirstHop:
    def __init__(self, plane: int, family: int, address: str, judge, multiplier: int, log):
        self.path = Path(None, plane, family, address, judge, multiplier)
        self.log = log
        self.sock = None
        self.error = None  # last socket error text, logged once

    @property
    def plane(self) -> int:
        return self.path.plane

    def open(self, spec, tos: int, on_open):
        """The socket, opened on first use; None while it cannot be (address missing, NIC gone)."""
        if self.sock is not None:
            return self.sock
        source = spec.get(self.path.family)
        try:
            if source is None:
                raise OSError("no IPv%d address of ours on %s" % (self.path.family, spec["interface"]))
            self.sock = echo.open_socket(self.path.family, spec["interface"], source, tos)
        except OSError as e:
            text = "first-hop probe socket on %s cannot open: %s" % (spec["interface"], e.strerror or e)
            if text != self.error:
                self.log.warning(text)
                self.error = text
            return None
        self.error = None
        on_open(self.sock)
        return self.sock

    def send(self, session: int, now: int) -> bool:
        seq, token = self.path.next_probe(now)
        payload = echo.request(self.path.family, session, session, seq, token)
        try:
            self.sock.sendto(payload, (self.path.address, 0))
            return True
        except OSError:
            return False

    def receive(self, session: int, now: int) -> None:
        """Read every waiting datagram; our replies count for the path."""
        while True:
            try:
                data = self.sock.recv(512)
            except BlockingIOError:
                return
            except OSError:
                continue
            reply = echo.parse_reply(self.path.family, data, session)
            if reply is not None and reply[0] == session:
                self.path.replied(reply[1], reply[2], now)

    def close(self, on_close) -> None:
        if self.sock is not None:
            on_close(self.sock)
            self.sock.close()
            self.sock = None
