"""Reachability: ping from every host to every other host on every plane, IPv4 and IPv6."""

from __future__ import annotations

import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from ipaddress import ip_address

from . import netns
from .plan import FabricPlan

SUMMARY_RE = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received")


@dataclass(frozen=True)
class PingResult:
    src: str
    dst: str
    plane: str
    family: int
    address: str
    sent: int
    received: int

    @property
    def ok(self) -> bool:
        return self.received > 0

    @property
    def loss(self) -> float:
        return 1.0 - self.received / self.sent if self.sent else 1.0

    def describe(self) -> str:
        return f"{self.src} -> {self.dst} plane {self.plane} IPv{self.family} {self.address}: {self.received}/{self.sent}"


@dataclass(frozen=True)
class PingMatrix:
    hosts: tuple[str, ...]
    planes: tuple[str, ...]
    results: tuple[PingResult, ...]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def failures(self) -> list[PingResult]:
        return [r for r in self.results if not r.ok]

    def select(self, plane: str | None = None, family: int | None = None) -> list[PingResult]:
        return [
            r for r in self.results
            if (plane is None or r.plane == plane) and (family is None or r.family == family)
        ]

    def format(self) -> str:
        """Rows are sources, columns destinations; a cell shows per plane which families
        answered, e.g. `a:46 b:46`, with `-` for a family that did not."""
        cell: dict[tuple[str, str], dict[tuple[str, int], bool]] = {}
        for r in self.results:
            cell.setdefault((r.src, r.dst), {})[(r.plane, r.family)] = r.ok

        def text(src: str, dst: str) -> str:
            if src == dst:
                return "."
            got = cell.get((src, dst), {})
            return " ".join(
                f"{p}:" + "".join(str(f) if got.get((p, f)) else "-" for f in (4, 6)) for p in self.planes
            )

        legend = "each cell: per plane, the IP versions that answered (4, 6); '-' = no reply"
        rows = [["src\\dst", *self.hosts]] + [[s, *(text(s, d) for d in self.hosts)] for s in self.hosts]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = [legend] + ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
        failed = self.failures
        lines.append(f"{len(self.results) - len(failed)}/{len(self.results)} reachable")
        lines += [f"  FAILED {r.describe()}" for r in failed[:20]]
        if len(failed) > 20:
            lines.append(f"  ... and {len(failed) - 20} more")
        return "\n".join(lines)


def ping(ns: str, address: str, count: int = 1, timeout: float = 1.0, interval: float = 0.2) -> tuple[int, int]:
    """Ping `address` from namespace `ns`; returns (sent, received)."""
    family = ip_address(address).version
    # No -w: with -c it would keep sending until `count` replies arrive.
    argv = ["ping", f"-{family}", "-n", "-q", "-c", str(count), "-i", f"{interval:g}", "-W", f"{timeout:g}", address]
    result = subprocess.run(netns.exec_argv(ns, argv), capture_output=True, text=True, check=False)
    match = SUMMARY_RE.search(result.stdout)
    if match:
        return int(match.group(1)), int(match.group(2))
    return count, count if result.returncode == 0 else 0


def ping_matrix(plan: FabricPlan, count: int = 1, timeout: float = 1.0, workers: int = 32) -> PingMatrix:
    jobs = []
    for src in plan.hosts:
        for dst in plan.hosts:
            if dst.name == src.name:
                continue
            for port in dst.ports:
                for family, iface in ((4, port.ipv4), (6, port.ipv6)):
                    jobs.append((src, dst, port.plane, family, str(iface.ip)))

    def run(job: tuple) -> PingResult:
        src, dst, plane, family, address = job
        sent, received = ping(src.netns, address, count=count, timeout=timeout, interval=0.05)
        return PingResult(src.name, dst.name, plane, family, address, sent, received)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = tuple(pool.map(run, jobs))
    planes = tuple(p.name for p in plan.topology.planes)
    return PingMatrix(tuple(h.name for h in plan.hosts), planes, results)
