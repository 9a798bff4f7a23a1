"""TCP stream workers (run by traffic_proc in a host namespace): a bulk sender and a receiver.

The sender writes a steady stream, paced in user space in ~1 ms quanta when a rate is given
(not by the kernel's SO_MAX_PACING_RATE: its timers run in softirq context, which a busy
machine defers to ksoftirqd, adding stalls of tens of ms that are not the network's); the
receiver records when how many bytes arrived.
A stall is only ever measured, never turned into an error here: the sender's socket waits
as long as TCP_USER_TIMEOUT allows. Errors are counted by kind: a reset (ECONNRESET/EPIPE),
a timeout (ETIMEDOUT), a failed connect.
"""

from __future__ import annotations

import errno
import selectors
import socket
import struct
import time
from array import array
from typing import Any

from .traffic_proc import Control
from .traffic_udp import NS, family_of

CHUNK = 64 << 10  # largest single write
MIN_WRITE = 4096  # smallest paced write
RECV_BYTES = 256 << 10
TICK_NS = 1_000_000
MAX_DEBT_S = 0.1  # after a stall catch up at most 100 ms of the rate: the stream stays steady
RECONNECT_PAUSE_S = 0.05
POLL_S = 0.01


class _Sender:
    """The client side: connection state, pacing and error counts."""

    def __init__(self, ctl: Control, cfg: dict[str, Any]) -> None:
        self.ctl = ctl
        self.cfg = cfg
        self.rate = (cfg["rate_bps"] or 0) // 8  # bytes/s; 0: unlimited
        self.sock: socket.socket | None = None
        self.selector = selectors.DefaultSelector()
        self.counts = {"connections": 0, "resets": 0, "timeouts": 0, "connect_failures": 0, "other_errors": 0}
        self.errors: list[tuple[int, str]] = []
        self.sent = 0
        self.start_ns = 0
        self.end_ns = 0
        self.graceful = False
        self.retransmits = 0  # tcpi_total_retrans of every connection, read as it closes
        self.rto_us: int | None = None  # tcpi_rto of the last connection, as it closed

    def connect(self) -> bool:
        cfg = self.cfg
        sock = socket.socket(family_of(cfg["address"]), socket.SOCK_STREAM)
        try:
            # A stall must not become an error before this (also bounds the SYN retries).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(cfg["user_timeout"] * 1000))
            if cfg.get("source"):
                sock.bind((cfg["source"], 0))
            # Paced writes go out at once; Nagle would hold each write's sub-MSS tail for an ACK.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(cfg["connect_timeout"])
            sock.connect((cfg["address"], cfg["port"]))
        except OSError as exc:
            sock.close()
            self.counts["connect_failures"] += 1
            self._note(f"connect failed: {_describe(exc)}")
            return False
        sock.setblocking(False)
        self.sock = sock
        self.selector.register(sock, selectors.EVENT_WRITE)
        self.counts["connections"] += 1
        if not self.start_ns:
            self.start_ns = time.monotonic_ns()
        return True

    def fail(self, exc: OSError) -> None:
        """The connection is broken: count how, and drop it."""
        if isinstance(exc, (ConnectionResetError, BrokenPipeError)):
            self.counts["resets"] += 1
        elif exc.errno == errno.ETIMEDOUT:
            self.counts["timeouts"] += 1
        else:
            self.counts["other_errors"] += 1
        self._note(_describe(exc))
        self.close()

    def close(self) -> None:
        if self.sock is not None:
            self._read_info()
            self.selector.unregister(self.sock)
            self.sock.close()
            self.sock = None

    def _note(self, text: str) -> None:
        self.errors.append((time.monotonic_ns(), text))

    def _read_info(self) -> None:
        """The connection's retransmissions and RTO (struct tcp_info: tcpi_rto at byte 8,
        tcpi_total_retrans at byte 100, both in the UAPI since Linux 2.6)."""
        try:
            raw = self.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        except OSError:
            return
        if len(raw) >= 104:
            self.rto_us = struct.unpack_from("I", raw, 8)[0]
            self.retransmits += struct.unpack_from("I", raw, 100)[0]

    def run(self) -> None:
        self.cfg["port"] = self.ctl.receive()  # the receiver's, once it listens
        connected = self.connect()
        if not self.start_ns:
            self.start_ns = time.monotonic_ns()  # never connected: the stream still has a start
        self.ctl.ready(connected=connected)
        chunk = memoryview(bytearray(CHUNK))
        base, paced = time.monotonic_ns(), 0  # bytes due by now: rate * (now - base) - paced
        max_debt = max(CHUNK, int(self.rate * MAX_DEBT_S))
        quantum = min(CHUNK, max(MIN_WRITE, self.rate * TICK_NS // NS))  # about 1 ms of the rate
        while True:
            now = time.monotonic_ns()
            if self.ctl.command(now) is not None:
                break
            if self.sock is None:
                if self.cfg["reconnect"]:
                    time.sleep(RECONNECT_PAUSE_S)
                    self.connect()
                else:
                    time.sleep(POLL_S)
                continue
            size = CHUNK
            if self.rate:
                due = (now - base) * self.rate // NS - paced
                if due > max_debt:
                    paced += due - max_debt
                    due = max_debt
                if due < quantum:  # write in quanta: byte-sized writes would keep it busy
                    time.sleep(max(quantum - due, 0) / self.rate)
                    continue
                size = min(due, CHUNK)
            if not self.selector.select(POLL_S):
                continue  # send buffer full: a stall, measured by the receiver
            try:
                written = self.sock.send(chunk[:size])
            except BlockingIOError:
                continue
            except OSError as exc:
                self.fail(exc)
                continue
            self.sent += written
            paced += written
        self.end_ns = time.monotonic_ns()
        self.graceful = self._close_gracefully()

    def _close_gracefully(self) -> bool:
        """Send FIN and wait (up to `settle`) for the receiver's: then every byte was read."""
        if self.sock is None:
            return False
        sock = self.sock
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(self.cfg["settle"])
            while sock.recv(4096):
                pass
        except TimeoutError as exc:
            if exc.errno is None:  # our settle wait, not the connection's
                self._note(f"no FIN from the receiver within {self.cfg['settle']} s")
                self.close()
                return False
            self.fail(exc)
            return False
        except OSError as exc:
            self.fail(exc)
            return False
        self.close()
        return True


def _describe(exc: OSError) -> str:
    name = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    return f"{name} ({exc.strerror or exc})"


def send(ctl: Control, cfg: dict[str, Any]) -> None:
    sender = _Sender(ctl, cfg)
    sender.run()
    ctl.result({
        "bytes": sender.sent, "start_ns": sender.start_ns, "end_ns": sender.end_ns, "graceful": sender.graceful,
        "counts": sender.counts, "errors": sender.errors, "retransmits": sender.retransmits, "rto_us": sender.rto_us,
    })


def receive(ctl: Control, cfg: dict[str, Any]) -> None:
    """Accept connections (more than one with reconnect) and record (time, bytes) per read."""
    listener = socket.socket(family_of(cfg["address"]), socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((cfg["bind"], cfg["port"]))
    listener.listen(8)
    listener.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    ctl.ready(port=listener.getsockname()[1])
    stamps, sizes = array("q"), array("q")
    buffer = bytearray(RECV_BYTES)
    conns: list[socket.socket] = []
    aborted = 0

    def drop(conn: socket.socket, abort: bool = False) -> None:
        if abort:  # SO_LINGER 0: close() sends a RST, as a crashed or killed server would
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        selector.unregister(conn)
        conns.remove(conn)
        conn.close()

    while True:
        for key, _events in selector.select(POLL_S):
            if key.fileobj is listener:
                conn, _peer = listener.accept()
                conn.setblocking(False)
                selector.register(conn, selectors.EVENT_READ)
                conns.append(conn)
                continue
            conn = key.fileobj  # type: ignore[assignment]
            try:
                count = conn.recv_into(buffer)
            except BlockingIOError:
                continue
            except OSError:
                drop(conn)  # the sender counts what broke the connection
                continue
            if count == 0:
                drop(conn)  # the sender's FIN: close ours so it sees every byte was read
                continue
            stamps.append(time.monotonic_ns())
            sizes.append(count)
        command = ctl.command(time.monotonic_ns())
        if command == "abort":
            aborted += len(conns)
            for conn in list(conns):
                drop(conn, abort=True)
        elif command is not None:
            break
    for conn in list(conns):
        drop(conn)
    listener.close()
    ctl.result({"stamps": stamps, "sizes": sizes, "aborted": aborted})
