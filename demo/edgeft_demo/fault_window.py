"""What happened inside one phase of the fault schedule (`Fault`, window [start_ns, end_ns)):
heartbeat outages and losses, TCP retransmissions, ranks that failed or were reset. Pure
functions of the `Run` record's parts; analysis.py builds each phase's figures from them."""

from __future__ import annotations

from typing import Any, Sequence

from edgeft_demo.record import NS_PER_MS, Fault, Heartbeat, Rank


def in_window(t_ns: float, fault: Fault) -> bool:
    """Phases are half-open: [start_ns, end_ns)."""
    return fault.start_ns <= t_ns < fault.end_ns


def _heartbeat_time_ns(heartbeat: Heartbeat, ms: float) -> int:
    return heartbeat.start_ns + round(ms * NS_PER_MS)


def outage_ms(heartbeats: Sequence[Heartbeat], fault: Fault) -> float | None:
    """The longest heartbeat gap (of any heartbeat) that began in the phase; None if none did."""
    lengths = [
        float(length)
        for hb in heartbeats
        for began_ms, length in hb.gaps
        if in_window(_heartbeat_time_ns(hb, began_ms), fault)
    ]
    return max(lengths, default=None)


def gap_threshold_ms(heartbeats: Sequence[Heartbeat]) -> float | None:
    """The shortest gap the heartbeats list; no listed gap means the outage was shorter."""
    return max((hb.gap_ms for hb in heartbeats), default=None)


def heartbeats_lost(heartbeats: Sequence[Heartbeat], fault: Fault) -> int:
    """Heartbeat packets lost in runs that began (last packet before the run) in the phase."""
    return sum(
        int(count)
        for hb in heartbeats
        for ms, count in hb.loss_runs
        if in_window(_heartbeat_time_ns(hb, ms), fault)
    )


def _rank_retrans(rank: Rank, fault: Fault) -> int | None:
    """The rank's retransmissions during the phase: its last count reported before the phase
    ends minus its last count reported before the phase starts (its first count when it
    reported none before). None when the rank reports no counts."""
    counts = sorted((s.t_ns, s.retrans) for s in rank.steps if s.retrans is not None)
    if not counts:
        return None
    until_end = [count for t_ns, count in counts if t_ns < fault.end_ns]
    if not until_end:
        return 0
    until_start = [count for t_ns, count in counts if t_ns < fault.start_ns]
    before = until_start[-1] if until_start else counts[0][1]
    # The counter is per network namespace; a recreated namespace starts again from 0.
    return max(0, until_end[-1] - before)


def _sampled_retrans(series: Sequence[Sequence[int]], fault: Fault) -> int:
    """A host's retransmissions in the phase from its sampled [[t_ns, count], ...]."""
    until_end = [count for t_ns, count in series if t_ns < fault.end_ns]
    until_start = [count for t_ns, count in series if t_ns < fault.start_ns]
    if not until_end:
        return 0
    return max(0, until_end[-1] - (until_start[-1] if until_start else series[0][1]))


def retrans_in_phase(ranks: Sequence[Rank], fault: Fault, sampled: dict[str, list[list[int]]] | None = None) -> int | None:
    """TCP retransmissions of all ranks in the phase; None when nothing reports them.

    The runner's samples of each host's counter (`sampled`, every sample_ms) date them
    right; the counts in the step logs are only read when a step finishes, so a job stuck
    through a fault would show its retransmissions in the phase where it resumed."""
    if sampled:
        return sum(_sampled_retrans(series, fault) for series in sampled.values() if series)
    per_rank = [n for n in (_rank_retrans(rank, fault) for rank in ranks) if n is not None]
    return sum(per_rank) if per_rank else None


def error_end(rank: Rank) -> dict[str, Any] | None:
    if rank.end is not None and rank.end.get("event") == "error":
        return rank.end
    return None


def _failure_text(rank: Rank, end: dict[str, Any]) -> str:
    return f"{rank.host}: {end.get('kind', 'other')}: {end.get('error', '')}"


def failures_in_phase(ranks: Sequence[Rank], fault: Fault) -> list[str]:
    """Every rank that ended with an error in the phase, as "host: kind: error"."""
    return [
        _failure_text(rank, end)
        for rank in ranks
        if (end := error_end(rank)) is not None and in_window(end.get("t_ns", -1), fault)
    ]


def resets_in_phase(ranks: Sequence[Rank], fault: Fault) -> int:
    """Ranks that ended with a connection reset ({"event": "error", "kind": "reset"}) in the phase."""
    return sum(
        1
        for rank in ranks
        if (end := error_end(rank)) is not None and end.get("kind") == "reset" and in_window(end.get("t_ns", -1), fault)
    )
