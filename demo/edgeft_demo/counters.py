"""NIC byte counters of every host's plane NICs and each host's TCP retransmissions, sampled
in the background: what each plane carried, per host, over the run (the timeline's
throughput rows), and when the job's connections lost segments."""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack

from edgeft_lab import Lab
from edgeft_lab.netns import run_in

from .workloads.steplog import retransmitted_segments


class CounterSampler:
    """Samples tx/rx bytes of each host's plane NICs and its RetransSegs every `sample_ms`.

    One netlink socket and one /proc/net/snmp file per host namespace, opened once inside it
    (a proc net file stays bound to the namespace it was opened in): a sample is one
    RTM_GETLINK dump and one read each.
    """

    def __init__(self, lab: Lab, hosts: list[str], planes: list[str], sample_ms: float = 100.0) -> None:
        self.lab, self.hosts, self.planes, self.sample_ms = lab, hosts, planes, sample_ms
        self.ifnames = {h: {p: lab.plan.host(h).port(p).ifname for p in planes} for h in hosts}
        self.samples: dict[str, dict[str, list[list[int]]]] = {h: {p: [] for p in planes} for h in hosts}
        self.retrans: dict[str, list[list[int]]] = {h: [] for h in hosts}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stack = ExitStack()
        self.error: BaseException | None = None

    def start(self) -> CounterSampler:
        self._sockets = {h: self._stack.enter_context(self.lab.ipr(h)) for h in self.hosts}
        self._snmp = {h: self._stack.enter_context(run_in(self.lab.netns(h), lambda: open("/proc/thread-self/net/snmp")))
                      for h in self.hosts}
        self._thread = threading.Thread(target=self._loop, name="counter-sampler", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        period = self.sample_ms / 1000
        next_at = time.monotonic()
        try:
            while not self._stop.is_set():
                self.sample()
                next_at += period
                self._stop.wait(max(0.0, next_at - time.monotonic()))
        except BaseException as e:  # reported by stop(): a silent sampler would draw flat lines
            self.error = e

    def sample(self) -> None:
        for host, ipr in self._sockets.items():
            stamp = time.monotonic_ns()
            by_name = {}
            for link in ipr.get_links():
                stats = link.get_attr("IFLA_STATS64") or {}
                by_name[link.get_attr("IFLA_IFNAME")] = (stats.get("tx_bytes", 0), stats.get("rx_bytes", 0))
            for plane, ifname in self.ifnames[host].items():
                if ifname in by_name:  # a NIC the fault took away leaves a hole, not a zero
                    self.samples[host][plane].append([stamp, *by_name[ifname]])
            segments = self._retransmitted(host)
            if segments is not None:
                self.retrans[host].append([stamp, segments])

    def _retransmitted(self, host: str) -> int | None:
        snmp = self._snmp[host]
        snmp.seek(0)
        return retransmitted_segments(snmp)

    def stop(self) -> dict[str, dict[str, list[list[int]]]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._stack.close()
        if self.error is not None:
            raise RuntimeError(f"sampling the NIC counters failed: {self.error}") from self.error
        return self.samples
