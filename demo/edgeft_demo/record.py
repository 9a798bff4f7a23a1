"""What one demo run observed: the one definition the runner writes and the analysis, the
report and the plot read (as `run.json` next to the report).

Every time is CLOCK_MONOTONIC nanoseconds: the same clock in every namespace and process, so
the workload's step logs, the NIC counters and the fault marks line up without conversion.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FORMAT = 1
MODES = ("without-edgeft", "edgeft")
NS_PER_S = 1_000_000_000
NS_PER_MS = 1_000_000


@dataclass
class Step:
    """One training step as one rank saw it: finished at t_ns, took step_ms.
    retrans: TCP segments this rank's connections retransmitted so far (None: not known)."""

    step: int
    t_ns: int
    step_ms: float
    retrans: int | None = None


@dataclass
class Rank:
    """One process of the job. end: its last log line ({"event": "done"|"error", ...}), or
    None when it never wrote one (killed, still running at the deadline)."""

    rank: int
    host: str
    address: str
    steps: list[Step] = field(default_factory=list)
    end: dict[str, Any] | None = None
    exit_code: int | None = None


@dataclass
class Fault:
    """One phase of the fault schedule: `name` from start_ns until end_ns (the next phase or
    the end of the observation). kind: "fault" (something broken) or "repair" (the phase after
    a repair, when traffic returns)."""

    name: str
    kind: str
    what: str
    start_ns: int
    end_ns: int


@dataclass
class Heartbeat:
    """A UDP stream along one edge of the ring at `pps`, for packet loss and outage figures.
    loss_runs: [ms from start_ns of the last packet sent before a run of losses, packets lost].
    gaps: every stretch of at least gap_ms without an arrival: [began ms from start_ns, length ms]."""

    src: str
    dst: str
    pps: int
    start_ns: int
    sent: int
    lost: int
    gap_ms: float
    gaps: list[list[float]] = field(default_factory=list)
    loss_runs: list[list[float]] = field(default_factory=list)


@dataclass
class Run:
    """One run of the job under the fault schedule, in one mode.

    counters[host][plane]: [[t_ns, tx_bytes, rx_bytes], ...] of the host's plane NIC, sampled
    every sample_ms; tcp_retrans[host]: [[t_ns, segments retransmitted], ...] of the host's
    namespace, sampled with them. steps_total: the steps the job was asked for. t0_ns: the
    job's start."""

    mode: str
    workload: str
    steps_total: int
    t0_ns: int
    end_ns: int
    hosts: list[str]
    planes: list[str]
    ranks: list[Rank]
    faults: list[Fault]
    heartbeats: list[Heartbeat]
    counters: dict[str, dict[str, list[list[int]]]]
    sample_ms: float
    settings: dict[str, Any] = field(default_factory=dict)
    tcp_retrans: dict[str, list[list[int]]] = field(default_factory=dict)
    format: int = FORMAT

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Run:
        if doc.get("format") != FORMAT:
            raise ValueError(f"run record format {doc.get('format')!r}, this code reads format {FORMAT}")
        ranks = [
            Rank(**{**r, "steps": [Step(**s) for s in r["steps"]]}) for r in doc["ranks"]
        ]
        return cls(**{
            **doc,
            "ranks": ranks,
            "faults": [Fault(**f) for f in doc["faults"]],
            "heartbeats": [Heartbeat(**h) for h in doc["heartbeats"]],
        })

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> Run:
        return cls.from_dict(json.loads(path.read_text()))
