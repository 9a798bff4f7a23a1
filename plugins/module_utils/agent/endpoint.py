# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A minimal HTTP/1.0 server living in the agent's event loop.

GET /metrics (Prometheus text) and GET /status (JSON for `edgeft-agent
status`). Non-blocking sockets in the same selector as the probes, so a
scrape never needs a thread and a slow client never blocks a probe: a client
gets 1 s to send its request line, and answers are written with one send
(they are a few kB) or dropped.
"""

from __future__ import annotations

import selectors
import socket

MAX_REQUEST = 8192
CLIENT_TIMEOUT_NS = 1000000000


class Endpoint:
    def __init__(self, address: tuple, selector, routes: dict, clock):
        """routes: path -> callable() returning (content type, body bytes)."""
        host, port = address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((host, port))
            self.sock.listen(16)
        except OSError:
            self.sock.close()
            raise
        self.selector = selector
        self.routes = routes
        self.clock = clock
        self.clients = {}  # socket -> (buffer, deadline)
        selector.register(self.sock, selectors.EVENT_READ, self._accept)

    def _accept(self, _sock) -> None:
        while True:
            try:
                conn, _addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # e.g. EMFILE: the client retries
            conn.setblocking(False)
            self.clients[conn] = [b"", self.clock() + CLIENT_TIMEOUT_NS]
            self.selector.register(conn, selectors.EVENT_READ, self._read)

    def _read(self, conn) -> None:
        try:
            data = conn.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn)
            return
        state = self.clients[conn]
        state[0] += data
        if b"\r\n\r\n" not in state[0] and b"\n\n" not in state[0]:
            if len(state[0]) > MAX_REQUEST:
                self._close(conn)
            return
        self._answer(conn, state[0])

    def _answer(self, conn, request: bytes) -> None:
        line = request.split(b"\n", 1)[0].decode("latin-1").strip().split()
        if len(line) < 2 or line[0] not in ("GET", "HEAD"):
            status, ctype, body = "405 Method Not Allowed", "text/plain", b"GET only\n"
        else:
            handler = self.routes.get(line[1].split("?", 1)[0])
            if handler is None:
                status, ctype, body = "404 Not Found", "text/plain", ("try %s\n" % " ".join(sorted(self.routes))).encode()
            else:
                status = "200 OK"
                ctype, body = handler()
        head = ("HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                % (status, ctype, len(body))).encode()
        # Only a HEAD request goes without the body its Content-Length announces.
        payload = head + (b"" if status == "200 OK" and line[0] == "HEAD" else body)
        try:
            conn.setblocking(True)
            conn.settimeout(0.05)  # bounded: a client that does not read loses its answer
            conn.sendall(payload)
        except OSError:
            pass
        self._close(conn)

    def expire(self, now: int) -> None:
        """Drop clients that did not send a request in time."""
        for conn, (_buf, deadline) in list(self.clients.items()):
            if now > deadline:
                self._close(conn)

    def _close(self, conn) -> None:
        self.clients.pop(conn, None)
        try:
            self.selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()

    def close(self) -> None:
        for conn in list(self.clients):
            self._close(conn)
        try:
            self.selector.unregister(self.sock)
        except (KeyError, ValueError):
            pass
        self.sock.close()
