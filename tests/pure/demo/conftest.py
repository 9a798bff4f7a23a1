"""Synthetic demo runs with figures that can be worked out by hand.

Four ranks on four hosts; the schedule is silent [2 s, 6 s), power-off [6 s, 10 s), power-on
(a repair) [10 s, end). Times below are ms from t0. Step n of the job finishes at the sum of
the first n durations; on every step one rank (n % 4) is the slowest and finishes exactly then
with exactly the duration, the others a few tenths of a ms earlier and faster, so job-level
figures are the round numbers of the durations list.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import pytest

from edgeft_demo.record import Fault, Heartbeat, Rank, Run, Step

T0_NS = 5_000_000_000_000
MS = 1_000_000
HOSTS = ["r1h1", "r1h2", "r2h1", "r2h2"]
PLANES = ["a", "b"]
SAMPLE_MS = 100
RATE_BYTES_PER_SAMPLE = 10_000_000  # 800 Mbit/s at 100 ms samples

RetransFn = Callable[[int, float], "int | None"]


def at(ms: float) -> int:
    return T0_NS + round(ms * MS)


def schedule(end_ms: float) -> list[Fault]:
    return [
        Fault("silent", "fault", "switch drops everything, links stay up", at(2000), at(6000)),
        Fault("power-off", "fault", "switch off, links down", at(6000), at(10000)),
        Fault("power-on", "repair", "switch back on", at(10000), at(end_ms)),
    ]


def finish_times_ms(durations_ms: Sequence[float]) -> list[float]:
    times, t = [], 0.0
    for duration in durations_ms:
        t += duration
        times.append(t)
    return times


def rank_steps(rank: int, durations_ms: Sequence[float], last_step: int, retrans: RetransFn | None) -> list[Step]:
    steps = []
    for index, (duration, finish) in enumerate(zip(durations_ms, finish_times_ms(durations_ms))):
        number = index + 1
        if number > last_step:
            break
        behind = (rank - number) % 4  # 0: the slowest rank of this step
        t_ms = finish - behind * 0.1
        steps.append(Step(number, at(t_ms), duration - behind * 0.1, retrans(rank, t_ms) if retrans else None))
    return steps


def counters(end_ms: float, plane_at: Callable[[float], "str | None"]) -> dict[str, dict[str, list[list[int]]]]:
    """Every host sends and receives RATE on the plane plane_at(t) names (None: nothing)."""
    result: dict[str, dict[str, list[list[int]]]] = {}
    for host in HOSTS:
        totals = {plane: 0 for plane in PLANES}
        samples: dict[str, list[list[int]]] = {plane: [] for plane in PLANES}
        for t_ms in range(0, int(end_ms) + 1, SAMPLE_MS):
            busy = plane_at(t_ms)
            if busy is not None and t_ms > 0:
                totals[busy] += RATE_BYTES_PER_SAMPLE
            for plane in PLANES:
                samples[plane].append([at(t_ms), totals[plane], totals[plane]])
        result[host] = samples
    return result


def heartbeat(src: str, dst: str, gaps: list[list[float]], loss_runs: list[list[float]]) -> Heartbeat:
    # Heartbeats start half a second before the job: their ms are from their own start.
    lost = int(sum(run[1] for run in loss_runs))
    return Heartbeat(src, dst, 100, at(-500), 1500, lost, 5.0, gaps, loss_runs)


def build_run(
    mode: str,
    durations_ms: Sequence[float],
    *,
    steps_total: int | None = None,
    end_ms: float = 14000,
    last_steps: dict[int, int] | None = None,
    ends: dict[int, dict[str, Any] | None] | None = None,
    retrans: RetransFn | None = None,
    heartbeats: list[Heartbeat] | None = None,
    plane_at: Callable[[float], "str | None"] = lambda t_ms: "a",
    faults: list[Fault] | None = None,
) -> Run:
    """A run of len(durations_ms) steps (unless a rank stops at last_steps[rank]); every rank
    ends "done" unless ends says otherwise."""
    last_steps = last_steps or {}
    ranks = []
    for rank, host in enumerate(HOSTS):
        steps = rank_steps(rank, durations_ms, last_steps.get(rank, len(durations_ms)), retrans)
        done = {"event": "done", "rank": rank, "steps": len(steps), "t_ns": steps[-1].t_ns if steps else T0_NS}
        end = ends[rank] if ends is not None and rank in ends else done
        ranks.append(Rank(rank, host, f"10.0.{rank}.1", steps, end, None if end is None else 0))
    return Run(
        mode=mode,
        workload="ring",
        steps_total=steps_total if steps_total is not None else len(durations_ms),
        t0_ns=T0_NS,
        end_ns=at(end_ms),
        hosts=list(HOSTS),
        planes=list(PLANES),
        ranks=ranks,
        faults=schedule(end_ms) if faults is None else faults,
        heartbeats=[] if heartbeats is None else heartbeats,
        counters=counters(end_ms, plane_at),
        sample_ms=SAMPLE_MS,
    )


def error_end(rank: int, kind: str, error: str, step: int, t_ms: float) -> dict[str, Any]:
    return {"event": "error", "rank": rank, "step": step, "kind": kind, "error": error, "t_ns": at(t_ms)}


# Without edgeft: step 34 hangs 8 s through silent into power-off (finishes at 9980 ms); the
# connections retransmit 7 + rank segments then. 100 steps, last at 13940 ms.
WITHOUT_DURATIONS = [60.0] * 33 + [8000.0] + [60.0] * 66


def without_retrans(rank: int, t_ms: float) -> int:
    return 7 + rank if t_ms > 9000 else 0


def without_heartbeats() -> list[Heartbeat]:
    # at -500 ms: gap begins 2100 and 2050 (silent), 6000 (power-off: its first instant);
    # loss runs at 2090, 5990 (silent: its last ms), 2040 (silent), 6050 (power-off).
    return [
        heartbeat("r1h1", "r1h2", [[2600, 3900], [6500, 120]], [[2590, 39], [6490, 12]]),
        heartbeat("r1h2", "r2h1", [[2550, 4100]], [[2540, 41], [6550, 5]]),
    ]


# With edgeft: a 150 ms step while the planes switch (step 34 at 2130 ms), then 90 ms steps on
# the backup plane until 9870 ms (step 120; step 77 finishes at exactly 6000 ms), then 60 ms.
# 200 steps, last at 14670 ms.
EDGEFT_DURATIONS = [60.0] * 33 + [150.0] + [90.0] * 86 + [60.0] * 80


def edgeft_heartbeats() -> list[Heartbeat]:
    # gaps begin 2010 (silent) and 5500 (silent), nothing in power-off or power-on.
    return [
        heartbeat("r1h1", "r1h2", [[2510, 130]], [[2505, 13]]),
        heartbeat("r1h2", "r2h1", [[6000, 60]], [[5995, 6]]),
    ]


def edgeft_plane(t_ms: float) -> str:
    return "b" if 2000 <= t_ms < 10000 else "a"


def without_plane(t_ms: float) -> str | None:
    return None if 2000 <= t_ms < 10000 else "a"


@pytest.fixture
def make_run() -> Callable[..., Run]:
    return build_run


@pytest.fixture
def ms_from_t0() -> Callable[[float], int]:
    return at


@pytest.fixture
def without_run() -> Run:
    return build_run(
        "without-edgeft", WITHOUT_DURATIONS, retrans=without_retrans,
        heartbeats=without_heartbeats(), plane_at=without_plane,
    )


@pytest.fixture
def edgeft_run() -> Run:
    return build_run(
        "edgeft", EDGEFT_DURATIONS, end_ms=15000, retrans=lambda rank, t_ms: 2 if t_ms > 2100 else 0,
        heartbeats=edgeft_heartbeats(), plane_at=edgeft_plane,
    )


@pytest.fixture
def reset_run() -> Run:
    """r2h1 (rank 2) has its connection reset at 3 s on step 41; ranks 0 and 1 time out at
    8 s (rank 0 got to step 45 first); rank 3 never writes an end (killed at the deadline)."""
    return build_run(
        "without-edgeft", [60.0] * 45, steps_total=100,
        last_steps={1: 40, 2: 40, 3: 40},
        ends={
            0: error_end(0, "timeout", "step waited 5 s", 46, 8000),
            1: error_end(1, "timeout", "step waited 5 s", 41, 8000),
            2: error_end(2, "reset", "connection reset by peer", 41, 3000),
            3: None,
        },
        heartbeats=without_heartbeats(), plane_at=without_plane,
    )


@pytest.fixture
def hung_run() -> Run:
    """40 steps of 100, then nothing: no rank ever writes an end."""
    return build_run(
        "without-edgeft", [60.0] * 40, steps_total=100,
        ends={0: None, 1: None, 2: None, 3: None}, plane_at=without_plane,
    )
