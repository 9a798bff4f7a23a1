# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A minimal HTTP/1.0 server living in the agent's event loop.

GET /metrics (Prometheus text) and GET /status (JSON for `edgeft-agent
status`). The loop only accepts and reads requests, on non-blocking sockets in
the same selector as the probes: a client gets 1 s to send its request line.
The answers are rendered and written by a forked child (forkrender.py): a
render never runs in the loop, and a client that does not read holds up the
child, not the loop. Errors (404, 405, 503) are a few bytes, written by the loop.

A path may have a shortest time between two renders (`spacing`; /metrics: the agent's
metrics_min_interval_ms): a request that comes sooner waits for the next render, so scrapers at
any rate cost the loop at most one fork per interval.
"""

from __future__ import annotations

import selectors
import socket

from ansible_collections.edgeft.failover.plugins.module_utils.agent.forkrender import ForkedRenders, http_answer

MAX_REQUEST = 8192
MAX_WAITING = 64  # requests waiting for the next render; more get 503
CLIENT_TIMEOUT_NS = 1000000000


class Endpoint:
    def __init__(self, address: tuple, selector, routes: dict, clock, log=None, spacing=None):
        """routes: path -> callable() returning (content type, body bytes), called in the render child.
        spacing: path -> shortest time between two renders of it (ns); paths not in it, none."""
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
        self.clients = {}  # socket -> (buffer, deadline) while its request is read
        self.waiting = []  # [(socket, method, path)]: complete requests for the next render
        self.spacing = dict(spacing or {})
        self.rendered_at = {}  # path -> when its last render was handed to a child (ns)
        self.renders = ForkedRenders(log)
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
        """Queue a request for the next render, or answer an error at once."""
        line = request.split(b"\n", 1)[0].decode("latin-1").strip().split()
        if len(line) < 2 or line[0] not in ("GET", "HEAD"):
            self._reply(conn, "GET", "405 Method Not Allowed", b"GET only\n")
            return
        path = line[1].split("?", 1)[0]
        if path not in self.routes:
            self._reply(conn, line[0], "404 Not Found", ("try %s\n" % " ".join(sorted(self.routes))).encode())
        elif len(self.waiting) >= MAX_WAITING:
            self._reply(conn, line[0], "503 Service Unavailable", b"too many requests waiting\n")
        else:
            self._forget(conn)
            self.waiting.append((conn, line[0], path))

    def _reply(self, conn, method: str, status: str, body: bytes) -> None:
        """A few bytes: one non-blocking send fits in any socket buffer."""
        try:
            conn.setblocking(False)
            conn.send(http_answer(method, status, "text/plain", body))
        except OSError:
            pass
        self._close(conn)

    def expire(self, now: int) -> None:
        """Drop clients that did not send a request in time; hand waiting requests to a render.
        Called at the end of each loop turn, so the probes due in this turn never wait for the
        fork (the loop's whole cost of a scrape)."""
        for conn, (_buf, deadline) in list(self.clients.items()):
            if now > deadline:
                self._close(conn)
        if not self.waiting:
            self.renders.reap()
            return
        due = [w for w in self.waiting if self._due_at(w[2]) <= now]
        if due and self.renders.reap():
            self.waiting = [w for w in self.waiting if w not in due]
            batch = [(conn, method, self.routes[path]) for conn, method, path in due]
            if self.renders.start(batch, [self.sock] + list(self.clients) + [w[0] for w in self.waiting]):
                self.rendered_at.update((path, now) for _conn, _method, path in due)
            else:
                for conn, method, _handler in batch:
                    self._reply(conn, method, "503 Service Unavailable", b"cannot render now\n")

    def next_due(self):
        """When the earliest request that waits only for its path's spacing may be rendered (ns),
        or None: the loop wakes up for it even when no probe is due. None while a render runs: its
        end is seen at the next turn, which a probe timer brings soon enough."""
        if self.renders.busy:
            return None
        return min((self._due_at(path) for _conn, _method, path in self.waiting), default=None)

    def _due_at(self, path) -> int:
        last = self.rendered_at.get(path)
        return 0 if last is None else last + self.spacing.get(path, 0)

    def _forget(self, conn) -> None:
        """Stop reading conn: its request is complete."""
        self.clients.pop(conn, None)
        try:
            self.selector.unregister(conn)
        except (KeyError, ValueError):
            pass

    def _close(self, conn) -> None:
        self._forget(conn)
        conn.close()

    def close(self) -> None:
        self.renders.close()
        for conn in list(self.clients) + [w[0] for w in self.waiting]:
            self._close(conn)
        self.waiting = []
        try:
            self.selector.unregister(self.sock)
        except (KeyError, ValueError):
            pass
        self.sock.close()
