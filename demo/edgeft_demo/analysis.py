"""Figures of one demo run, computed from its `Run` record: pure functions, no I/O.

The job is only as fast as its slowest rank, so every step figure is job-level: a step counts
once every rank has finished it, at the time the last rank did and with the longest time any
rank took (`job_steps`). A step is "delayed" when it took clearly longer than the healthy
step time, the median of all steps (`baseline_step_ms`, `delay_threshold_ms`).

Each phase of the fault schedule (`Fault`, window [start_ns, end_ns)) gets its own figures
(`PhaseFigures`); the run as a whole gets a summary and a verdict (`JobSummary`). Times in the
results are seconds from the job's start (t0_ns) unless a name says otherwise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from statistics import median
from typing import Any, Iterable, Sequence

from edgeft_demo.fault_window import (
    error_end,
    failures_in_phase,
    gap_threshold_ms,
    heartbeats_lost,
    in_window,
    outage_ms,
    resets_in_phase,
    retrans_in_phase,
)
from edgeft_demo.record import NS_PER_MS, NS_PER_S, Fault, Run

# A step is delayed above max(DELAY_FACTOR x baseline, baseline + DELAY_MARGIN_MS).
DELAY_FACTOR = 2.0
DELAY_MARGIN_MS = 50.0
# No job step finishing for longer than this is a stall.
STALL_S = 1.0

VERDICTS = ("finished", "stalled", "died", "hung")


@dataclass
class JobStep:
    """One step of the whole job: finished at t_ns (its slowest rank), took step_ms (the
    longest any rank took); interval_ms since the job's previous step finished (the first
    step: its step_ms). Ranks run a step apart, so one stall can make two consecutive steps
    long on different ranks: wall-clock figures use the intervals, which never overlap."""

    step: int
    t_ns: int
    step_ms: float
    interval_ms: float = 0.0


@dataclass
class PhaseFigures:
    """What one phase of the fault schedule did to the job and to the heartbeats.

    outage_ms: the longest heartbeat gap beginning in the phase, None when no heartbeat had a
    gap of gap_threshold_ms or more there (gap_threshold_ms is None without heartbeats).
    retrans: TCP retransmissions of all ranks during the phase, None when no rank reports them.
    resets: ranks that ended with a connection reset in the phase; failures: every rank that
    ended with an error in the phase, as "host: kind: error".
    """

    name: str
    kind: str
    what: str
    start_s: float
    end_s: float
    steps: int
    delayed: int
    largest_step_ms: float
    time_lost_s: float
    outage_ms: float | None
    gap_threshold_ms: float | None
    lost: int
    retrans: int | None
    resets: int
    failures: list[str] = field(default_factory=list)
    stalled: bool = False
    longest_stall_s: float = 0.0


@dataclass
class JobSummary:
    """The run as a whole. verdict: "finished", "stalled" (finished, but some phase stalled),
    "died" (a rank ended with an error) or "hung" (not finished and no error: still stuck when
    the run ended)."""

    steps_done: int
    steps_total: int
    finished: bool
    died: dict[str, Any] | None
    unfinished: list[str]
    job_s: float
    healthy_s: float
    delay_s: float | None
    largest_step_ms: float
    time_lost_s: float
    baseline_ms: float
    delay_threshold_ms: float
    longest_stall_s: float
    stall_phase: str | None
    verdict: str


@dataclass
class RunAnalysis:
    """Everything the report needs about one run."""

    mode: str
    workload: str
    hosts: list[str]
    planes: list[str]
    ranks: int
    job: JobSummary
    phases: list[PhaseFigures]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Throughput:
    """Traffic of one host's plane NIC: rates in Mbit/s over each sampling interval, plotted
    at the interval's midpoint (t_s, seconds from t0)."""

    host: str
    plane: str
    t_s: list[float]
    tx_mbps: list[float]
    rx_mbps: list[float]


# --- job-level steps ---------------------------------------------------------------------


def job_steps(run: Run) -> list[JobStep]:
    """The steps every rank finished, in step order: t_ns and step_ms are the maxima over the
    ranks. A step some rank never finished (it died or hung) is not a job step."""
    if not run.ranks:
        return []
    by_rank = [{s.step: s for s in rank.steps} for rank in run.ranks]
    common = set(by_rank[0]).intersection(*by_rank[1:])
    steps: list[JobStep] = []
    for number in sorted(common):
        per_rank = [steps_of_rank[number] for steps_of_rank in by_rank]
        t_ns, step_ms = max(s.t_ns for s in per_rank), max(s.step_ms for s in per_rank)
        interval_ms = (t_ns - steps[-1].t_ns) / NS_PER_MS if steps else step_ms
        steps.append(JobStep(number, t_ns, step_ms, interval_ms))
    return steps


def baseline_step_ms(steps: Sequence[JobStep]) -> float:
    """The healthy step time: the median step_ms of all job steps (0 without steps). A fault
    slows a few steps (with edgeft) or stops the job (without): either way a minority, which
    the median ignores; the first steps alone would include the job's warm-up."""
    return float(median(s.step_ms for s in steps)) if steps else 0.0


def delay_threshold_ms(baseline_ms: float) -> float:
    """Steps longer than this are delayed: max(2 x baseline, baseline + 50 ms), so that a fast
    job is not called delayed for a few ms of jitter."""
    return max(DELAY_FACTOR * baseline_ms, baseline_ms + DELAY_MARGIN_MS)


def is_delayed(step_ms: float, baseline_ms: float) -> bool:
    return step_ms > delay_threshold_ms(baseline_ms)


def time_lost_s(steps: Iterable[JobStep], baseline_ms: float) -> float:
    """Wall-clock seconds the steps took beyond the baseline, from the intervals between job
    steps (faster steps do not make up for slow ones)."""
    return sum(max(0.0, s.interval_ms - baseline_ms) for s in steps) / 1000


# --- per phase ----------------------------------------------------------------------------


def longest_stall_ns(finish_ns: Iterable[int], start_ns: int, bound_ns: int) -> int:
    """The longest stretch in [start_ns, bound_ns] without a step finishing: the window start
    and the bound count as points, so a window without any finished step is one stretch."""
    if bound_ns <= start_ns:
        return 0
    points = [start_ns, *sorted(t for t in finish_ns if start_ns <= t <= bound_ns), bound_ns]
    return max(later - earlier for earlier, later in zip(points, points[1:]))


def training_start_ns(run: Run, steps: Sequence[JobStep]) -> int:
    """When the first job step began (t0 without steps)."""
    if not steps:
        return run.t0_ns
    return int(steps[0].t_ns - steps[0].step_ms * NS_PER_MS)


def longest_stall(steps: Sequence[JobStep], start_ns: int, end_ns: int) -> tuple[int, int]:
    """(length, start) of the job's longest stretch without a step finishing, over the whole
    run [start_ns, end_ns]: a stall that spans several phases is one stall."""
    points = [start_ns, *sorted(s.t_ns for s in steps if start_ns <= s.t_ns <= end_ns), end_ns]
    length, began = max(((later - earlier, earlier) for earlier, later in zip(points, points[1:])), default=(0, start_ns))
    return max(0, length), began


def phase_figures(run: Run, steps: Sequence[JobStep], baseline_ms: float, job_end_ns: int, fault: Fault) -> PhaseFigures:
    """The figures of one phase. A step belongs to the phase it finished in (t_ns), even when
    it began in an earlier one: a step stuck through a whole fault counts, with its full
    length, in the phase where it finally completed.

    Stalls are looked for from the phase start to min(phase end, job_end_ns), where job_end_ns
    is the last job step when the job finished and the end of the run otherwise: time after a
    finished job is no stall, a dead or hung job stalls until the run ends."""
    in_phase = [s for s in steps if in_window(s.t_ns, fault)]
    stall_ns = longest_stall_ns((s.t_ns for s in steps), fault.start_ns, min(fault.end_ns, job_end_ns))
    return PhaseFigures(
        name=fault.name,
        kind=fault.kind,
        what=fault.what,
        start_s=(fault.start_ns - run.t0_ns) / NS_PER_S,
        end_s=(fault.end_ns - run.t0_ns) / NS_PER_S,
        steps=len(in_phase),
        delayed=sum(1 for s in in_phase if is_delayed(s.step_ms, baseline_ms)),
        largest_step_ms=max((s.step_ms for s in in_phase), default=0.0),
        time_lost_s=time_lost_s(in_phase, baseline_ms),
        outage_ms=outage_ms(run.heartbeats, fault),
        gap_threshold_ms=gap_threshold_ms(run.heartbeats),
        lost=heartbeats_lost(run.heartbeats, fault),
        retrans=retrans_in_phase(run.ranks, fault, run.tcp_retrans),
        resets=resets_in_phase(run.ranks, fault),
        failures=failures_in_phase(run.ranks, fault),
        stalled=stall_ns > STALL_S * NS_PER_S,
        longest_stall_s=stall_ns / NS_PER_S,
    )


# --- the whole job ------------------------------------------------------------------------


def all_ranks_done(run: Run) -> bool:
    """Finished: every rank wrote its "done" line."""
    return bool(run.ranks) and all(rank.end is not None and rank.end.get("event") == "done" for rank in run.ranks)


def first_death(run: Run) -> dict[str, Any] | None:
    """The first rank (by time) that ended with an error, or None."""
    errors = [(end.get("t_ns", run.end_ns), rank, end) for rank in run.ranks if (end := error_end(rank)) is not None]
    if not errors:
        return None
    t_ns, rank, end = min(errors, key=lambda error: error[0])
    return {
        "host": rank.host,
        "rank": rank.rank,
        "kind": end.get("kind", "other"),
        "error": end.get("error", ""),
        "step": end.get("step"),
        "at_s": (t_ns - run.t0_ns) / NS_PER_S,
    }


def job_end_ns(run: Run, steps: Sequence[JobStep]) -> int:
    """When the job stopped making progress for good: its last step if it finished, else the
    end of the run."""
    if all_ranks_done(run) and steps:
        return max(s.t_ns for s in steps)
    return run.end_ns


def verdict(finished: bool, stalled: bool, died: bool) -> str:
    if finished:
        return "stalled" if stalled else "finished"
    return "died" if died else "hung"


def job_summary(run: Run, steps: Sequence[JobStep], baseline_ms: float, phases: Sequence[PhaseFigures]) -> JobSummary:
    """The run's outcome. job_s runs from the start of the first step (the job's own start-up,
    e.g. DDP's rendezvous, is not training) to the last job step (finished) or to the end of
    the run (not finished); healthy_s is what steps_total steps take at the baseline; time
    lost counts every job step, inside the fault phases or not."""
    finished = all_ranks_done(run)
    died = first_death(run)
    training_ns = training_start_ns(run, steps)
    job_s = (job_end_ns(run, steps) - training_ns) / NS_PER_S
    healthy_s = baseline_ms * run.steps_total / 1000
    end_ns = job_end_ns(run, steps)
    stall_ns, stall_began_ns = longest_stall(steps, training_ns, end_ns)
    # The job usually stops between two faults' steps: name the first phase the stall overlaps.
    stall_phase = next((f.name for f in run.faults
                        if f.start_ns < stall_began_ns + stall_ns and f.end_ns > stall_began_ns), None)
    return JobSummary(
        steps_done=len(steps),
        steps_total=run.steps_total,
        finished=finished,
        died=died,
        unfinished=[rank.host for rank in run.ranks if rank.end is None],
        job_s=job_s,
        healthy_s=healthy_s,
        delay_s=job_s - healthy_s if finished else None,
        largest_step_ms=max((s.step_ms for s in steps), default=0.0),
        time_lost_s=time_lost_s(steps, baseline_ms),
        baseline_ms=baseline_ms,
        delay_threshold_ms=delay_threshold_ms(baseline_ms),
        longest_stall_s=stall_ns / NS_PER_S,
        stall_phase=stall_phase if stall_ns > STALL_S * NS_PER_S else None,
        verdict=verdict(finished, stall_ns > STALL_S * NS_PER_S, died is not None),
    )


def stall_where(job: JobSummary) -> str:
    """Where the job's longest stall began, for people: "from 'silent'"."""
    return f"from '{job.stall_phase}'" if job.stall_phase else "outside the fault phases"


def analyze_run(run: Run) -> RunAnalysis:
    """All figures of one run: the job summary and one PhaseFigures per fault phase."""
    steps = job_steps(run)
    baseline_ms = baseline_step_ms(steps)
    end_ns = job_end_ns(run, steps)
    phases = [phase_figures(run, steps, baseline_ms, end_ns, fault) for fault in run.faults]
    return RunAnalysis(
        mode=run.mode,
        workload=run.workload,
        hosts=list(run.hosts),
        planes=list(run.planes),
        ranks=len(run.ranks),
        job=job_summary(run, steps, baseline_ms, phases),
        phases=phases,
    )


# --- throughput ---------------------------------------------------------------------------


def _rate_mbps(earlier: int, later: int, interval_ns: int) -> float:
    """Mbit/s between two byte counts; a count that went down (the NIC was recreated and its
    counters started again) gives 0 rather than a negative or made-up rate."""
    delta = later - earlier
    if delta <= 0:
        return 0.0
    return delta * 8 * 1000 / interval_ns  # bits per ns x 1e9 / 1e6


def plane_throughput(run: Run, host: str, plane: str) -> Throughput:
    """Rates between consecutive samples of one NIC, at the midpoint of each interval;
    intervals without elapsed time are skipped."""
    samples = sorted(run.counters.get(host, {}).get(plane, []))
    series = Throughput(host, plane, [], [], [])
    for (t_a, tx_a, rx_a), (t_b, tx_b, rx_b) in zip(samples, samples[1:]):
        interval_ns = t_b - t_a
        if interval_ns <= 0:
            continue
        series.t_s.append(((t_a + t_b) / 2 - run.t0_ns) / NS_PER_S)
        series.tx_mbps.append(_rate_mbps(tx_a, tx_b, interval_ns))
        series.rx_mbps.append(_rate_mbps(rx_a, rx_b, interval_ns))
    return series


def throughput(run: Run) -> list[Throughput]:
    """One series per host and plane that has counters, hosts and planes in the run's order."""
    return [
        plane_throughput(run, host, plane)
        for host in run.hosts
        for plane in run.planes
        if run.counters.get(host, {}).get(plane)
    ]
