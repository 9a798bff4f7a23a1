"""Traffic streams between lab hosts, measured for failover tests and benchmarks.

    with UdpStream(lab, src="r1h1", dst="r2h1", pps=10000) as stream:   # to r2h1's plane-a IPv4
        stream.mark("fault")
        lab.link_down("r2h1", "a", side="switch")
        ...
    result = stream.result()          # UdpResult: .summary(), .as_dict(), .received_between(...)

TcpStream works the same way (TcpResult). The sender and the receiver are separate processes
in the hosts' namespaces (traffic_proc); figures come from traffic_results. Traffic only goes
to lab addresses (198.18.0.0/15, fc00::/7): anything else is refused before a packet is sent.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from ipaddress import ip_address
from typing import Any

from . import traffic_tcp, traffic_udp
from .errors import LabError
from .lab import Lab
from .traffic_proc import FINISH_TIMEOUT, Control, Worker
from .traffic_results import TcpResult, UdpResult, analyze_tcp, analyze_udp
from .topology import LAB_IPV4_RANGE, LAB_IPV6_RANGE

# Paced workers run at real-time priority (see traffic_proc) up to these rates; above them, or
# unlimited, a worker would take most of a core from everything else, so it keeps the normal one.
REALTIME_MAX_PPS = 20_000
REALTIME_MAX_BPS = 1_000_000_000

__all__ = ["TcpResult", "TcpStream", "UdpResult", "UdpStream", "check_lab_address", "host_address"]


def host_address(lab: Lab, host: str, plane: str | None = None, family: int = 4) -> str:
    """A host's address on a plane (default: the first plane) from the lab's plan."""
    if family not in (4, 6):
        raise LabError(f"family must be 4 or 6, not {family!r}")
    port = lab.plan.host(host).port(plane or lab.topology.planes[0].name)
    return str((port.ipv4 if family == 4 else port.ipv6).ip)


def check_lab_address(address: str) -> str:
    """The address, normalized, if it is inside the lab's ranges; else a LabError."""
    try:
        parsed = ip_address(address)
    except ValueError:
        raise LabError(f"not an IP address: {address!r}") from None
    if parsed not in (LAB_IPV4_RANGE if parsed.version == 4 else LAB_IPV6_RANGE):
        raise LabError(f"{address} is outside the lab ({LAB_IPV4_RANGE}, {LAB_IPV6_RANGE}): no traffic is sent there")
    return str(parsed)


class _Stream:
    """Start/stop and result handling shared by the UDP and TCP streams."""

    kind = ""
    _receiver: Callable[[Control, dict[str, Any]], None]  # worker functions, set by the subclasses
    _sender: Callable[[Control, dict[str, Any]], None]

    def __init__(
        self, lab: Lab, src: str, dst: str, address: str | None, plane: str | None, family: int,
        source: str | None, bind_any: bool, settle: float,
    ) -> None:
        lab.plan.host(src)  # unknown hosts fail here, with the list of known ones
        lab.plan.host(dst)
        self.lab, self.src, self.dst = lab, src, dst
        self.address = check_lab_address(address) if address else host_address(lab, dst, plane, family)
        self.source = check_lab_address(source) if source else None
        self.settle = settle
        # A receiver bound to the address itself proves the packets reached that address;
        # bind_any accepts them on any of dst's addresses (e.g. one that failover moves).
        self._bind = ("::" if ":" in self.address else "0.0.0.0") if bind_any else self.address
        self._marks: dict[str, int] = {}
        self._rx: Worker | None = None
        self._tx: Worker | None = None
        self._result: Any = None
        self._aborted = False

    def mark(self, label: str) -> None:
        """Record a moment (e.g. "fault", "repair"); the result lists it in ms from the start."""
        key, suffix = label, 2
        while key in self._marks:
            key, suffix = f"{label}#{suffix}", suffix + 1
        self._marks[key] = time.monotonic_ns()

    def start(self) -> Any:
        if self._rx is not None:
            raise LabError(f"{self.kind} stream already started")
        config = self._config()
        self._rx = Worker(f"{self.kind} receiver in {self.dst}", self.lab.netns(self.dst), self._receiver, config,
                          self.lab.cgroup(self.dst))
        self._tx = Worker(f"{self.kind} sender in {self.src}", self.lab.netns(self.src), self._sender, config,
                          self.lab.cgroup(self.src))
        try:
            # Both interpreters start at once; the sender then waits for the receiver's port.
            self._rx.launch()
            self._tx.launch()
            self._tx.command(self._rx.wait_ready()["port"])
            self._on_ready(self._tx.wait_ready())
        except BaseException:
            self._aborted = True
            self._kill()
            raise
        return self

    def stop(self) -> Any:
        """Stop sending, let in-flight traffic settle, collect and analyze (idempotent)."""
        if self._result is None:
            if self._rx is None or self._tx is None:
                raise LabError(f"{self.kind} stream was never started")
            if self._aborted:
                raise LabError(f"{self.kind} stream was ended by an error: no result")
            try:
                self._result = self._collect(self._tx, self._rx)
            finally:
                self._kill()
        return self._result

    def result(self) -> Any:
        return self.stop()

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, exc_type: object, exc: object, traceback: object) -> None:
        if exc_type is None:
            self.stop()
        else:
            self._aborted = True
            self._kill()  # the error matters, not the figures

    def _kill(self) -> None:
        for worker in (self._tx, self._rx):
            if worker is not None:
                worker.kill()

    def _config(self) -> dict[str, Any]:
        return {"address": self.address, "bind": self._bind, "source": self.source, "port": 0}

    def _on_ready(self, info: dict[str, Any]) -> None:
        pass

    def _collect(self, tx: Worker, rx: Worker) -> Any:
        raise NotImplementedError


class UdpStream(_Stream):
    """A fixed-rate UDP stream from src to an address of dst (default: dst's first-plane IPv4)."""

    kind = "udp"
    _receiver = staticmethod(traffic_udp.receive)
    _sender = staticmethod(traffic_udp.send)

    def __init__(
        self, lab: Lab, src: str, dst: str, address: str | None = None, *, plane: str | None = None,
        family: int = 4, pps: int = 10_000, size: int = 64, source: str | None = None,
        bind_any: bool = False, settle: float = 0.3, gap_list_ms: float = 20.0,
    ) -> None:
        if pps < 1 or not traffic_udp.HEADER.size <= size <= 8192:
            raise LabError(f"need pps >= 1 and {traffic_udp.HEADER.size} <= size <= 8192 (got {pps}, {size})")
        if gap_list_ms <= 0:
            raise LabError(f"gap_list_ms must be positive, not {gap_list_ms}")
        super().__init__(lab, src, dst, address, plane, family, source, bind_any, settle)
        self.pps, self.size = pps, size
        self.gap_list_ns = int(gap_list_ms * 1e6)

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "pps": self.pps, "size": self.size, "stream_id": os.urandom(8),
                "realtime": self.pps <= REALTIME_MAX_PPS}

    def start(self) -> UdpStream:
        return super().start()

    def stop(self) -> UdpResult:
        return super().stop()

    def result(self) -> UdpResult:
        return super().result()

    def _collect(self, tx: Worker, rx: Worker) -> UdpResult:
        sender = tx.finish()
        # In-flight packets: wait `settle` after the last send before the receiver stops.
        time.sleep(max(0, sender["last_ns"] + int(self.settle * 1e9) - time.monotonic_ns()) / 1e9)
        receiver = rx.finish()
        return analyze_udp(
            src=self.src, dst=self.dst, address=self.address, target_pps=self.pps, size=self.size,
            sender=sender, receiver=receiver, marks=self._marks, gap_list_ns=self.gap_list_ns,
        )


class TcpStream(_Stream):
    """A bulk TCP stream from src to a receiver at an address of dst, rate-limited by default.

    `rate_bps` None means as fast as it goes. `reconnect` makes the sender reconnect after a
    broken connection (each break is counted); without it the stream stays down. `settle` is
    how long the closing handshake may take at the end before the stream counts as unfinished.
    """

    kind = "tcp"
    _receiver = staticmethod(traffic_tcp.receive)
    _sender = staticmethod(traffic_tcp.send)

    def __init__(
        self, lab: Lab, src: str, dst: str, address: str | None = None, *, plane: str | None = None,
        family: int = 4, rate_bps: float | None = 50e6, source: str | None = None, bind_any: bool = False,
        reconnect: bool = False, user_timeout: float = 30.0, connect_timeout: float = 3.0, settle: float = 1.0,
    ) -> None:
        if rate_bps is not None and rate_bps < 8_000:
            raise LabError(f"rate_bps must be at least 8000 (or None for unlimited), not {rate_bps}")
        super().__init__(lab, src, dst, address, plane, family, source, bind_any, settle)
        self.rate_bps = int(rate_bps) if rate_bps else None
        self.reconnect, self.user_timeout, self.connect_timeout = reconnect, user_timeout, connect_timeout
        self.connected = False

    def _config(self) -> dict[str, Any]:
        return {
            **super()._config(), "rate_bps": self.rate_bps, "reconnect": self.reconnect,
            "user_timeout": self.user_timeout, "connect_timeout": self.connect_timeout, "settle": self.settle,
            "realtime": bool(self.rate_bps) and self.rate_bps <= REALTIME_MAX_BPS,
        }

    def _on_ready(self, info: dict[str, Any]) -> None:
        self.connected = info["connected"]

    def abort_receiver(self) -> None:
        """Close the receiver's connections with SO_LINGER 0 (a RST), as a killed server would."""
        if self._rx is None or self._result is not None:
            raise LabError("tcp stream is not running")
        self._rx.command("abort")

    def start(self) -> TcpStream:
        return super().start()

    def stop(self) -> TcpResult:
        return super().stop()

    def result(self) -> TcpResult:
        return super().result()

    def _collect(self, tx: Worker, rx: Worker) -> TcpResult:
        sender = tx.finish(FINISH_TIMEOUT + self.settle)
        receiver = rx.finish()
        return analyze_tcp(
            src=self.src, dst=self.dst, address=self.address, target_bps=self.rate_bps,
            sender=sender, receiver=receiver, marks=self._marks,
        )
