"""The step log every workload writes, one JSON object a line, flushed as it goes (the runner
follows it live and reads it after a crash):

    {"event": "start", "rank": 0, "world": 4, "workload": "ring", "pid": 123, "t_ns": ...}
    {"event": "step", "rank": 0, "step": 1, "t_ns": ..., "step_ms": 61.2, "retrans": 0}
    {"event": "done", "rank": 0, "steps": 300, "t_ns": ...}
    {"event": "error", "rank": 0, "step": 57, "kind": "reset", "error": "...", "t_ns": ...}

t_ns is CLOCK_MONOTONIC (the same clock in every namespace). `step` counts from 1 and is the
step that finished at t_ns; an error's `step` is the one that failed. Standard library only:
workloads run with whatever Python the host has.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from typing import Any

# Exit codes of a workload, by how it ended.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_RESET = 3  # a connection of the job was reset or closed by its peer
EXIT_TIMEOUT = 4  # a step waited longer than the job's timeout (a collective's watchdog)

ERROR_KINDS = {"reset": EXIT_RESET, "timeout": EXIT_TIMEOUT, "other": EXIT_ERROR}


class StepLog:
    def __init__(self, path: str, rank: int, world: int, workload: str) -> None:
        self.rank, self.world, self.workload = rank, world, workload
        self.last_step = 0  # the last step logged: a failure is in the one after it
        self._file = open(path, "a", buffering=1)  # line-buffered: every record lands at once

    def _write(self, event: str, **fields: Any) -> None:
        record = {"event": event, "rank": self.rank, **fields, "t_ns": time.monotonic_ns()}
        self._file.write(json.dumps(record) + "\n")

    def start(self) -> None:
        self._write("start", world=self.world, workload=self.workload, pid=os.getpid())

    def step(self, step: int, step_ms: float, retrans: int | None = None) -> None:
        self._write("step", step=step, step_ms=round(step_ms, 3), retrans=retrans)
        self.last_step = step

    def done(self, steps: int) -> None:
        self._write("done", steps=steps)

    def error(self, kind: str, message: str, step: int) -> int:
        """Record how the job failed; returns the exit code for that kind."""
        if kind not in ERROR_KINDS:
            kind = "other"
        self._write("error", step=step, kind=kind, error=message)
        return ERROR_KINDS[kind]

    def close(self) -> None:
        self._file.close()


def tcp_retransmits() -> int | None:
    """TCP segments retransmitted in this network namespace so far (RetransSegs of
    /proc/net/snmp, which is per namespace): in the lab each host runs one rank, so this is
    what the job's connections lost, whatever library owns the sockets."""
    try:
        with open("/proc/net/snmp") as f:
            return retransmitted_segments(f)
    except OSError:
        return None


def retransmitted_segments(snmp_lines: Iterable[str]) -> int | None:
    """RetransSegs from the lines of a /proc/net/snmp file (a "Tcp:" header line, then values)."""
    rows = [line.split() for line in snmp_lines if line.startswith("Tcp:")]
    try:
        return int(rows[1][rows[0].index("RetransSegs")])
    except (IndexError, ValueError):
        return None


def read(path: str) -> list[dict[str, Any]]:
    """The records of a step log; a torn last line (the writer was killed) is left out."""
    records = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    records.append(json.loads(line))
                except ValueError:
                    break
    except FileNotFoundError:
        pass
    return records
