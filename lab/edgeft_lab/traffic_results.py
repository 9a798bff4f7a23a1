"""Results of the traffic streams and the pure analysis behind them.

The workers only record raw observations (sequence numbers, timestamps, byte counts); every
figure is derived here, from plain numbers, so the arithmetic is unit-tested without namespaces.
All times are CLOCK_MONOTONIC nanoseconds, the same clock in every namespace and process.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

BIN_NS = 10_000_000  # timeline resolution: 10 ms
NS_PER_MS = 1_000_000
GAP_LIST_NS = 20 * NS_PER_MS  # gaps this long are listed one by one (10 kpps: 200 packets)
GAP_LIST_MAX = 100
_ZERO_RUN = re.compile(b"\x00+")


def _ms(ns: float) -> float:
    return round(ns / NS_PER_MS, 3)


def max_gap(times: Sequence[int], start: int, end: int) -> tuple[int, int]:
    """(longest interval without an event, when it began) over [start, end] and the events.

    The bounds count as events, so a stream that stops arriving for good still shows a gap up
    to `end`, and one that never started shows `end - start`. Events past `end` are kept (late
    arrivals close the gap they end)."""
    best, at = 0, start
    for before, length in _intervals(times, start, end):
        if length > best:
            best, at = length, before
    return best, at


def gaps_over(times: Sequence[int], start: int, end: int, threshold: int = GAP_LIST_NS) -> list[list[float]]:
    """Every gap of at least `threshold` (same bounds as max_gap) as [began ms, length ms] from
    `start`, in time order, at most GAP_LIST_MAX: one fault may cause several (a flapping link)."""
    found = [[_ms(before - start), _ms(length)] for before, length in _intervals(times, start, end) if length >= threshold]
    return found[:GAP_LIST_MAX]


def _intervals(times: Sequence[int], start: int, end: int) -> Iterator[tuple[int, int]]:
    points = sorted([start, *times, end])
    for before, after in zip(points, points[1:]):
        yield before, after - before


def timeline(times: Sequence[int], start: int, end: int, weights: Sequence[int] | None = None) -> list[int]:
    """Events (or their weights, e.g. bytes) per BIN_NS bin from `start`, covering up to `end`."""
    last = max([end, *times]) if times else end
    bins = [0] * ((max(last, start) - start) // BIN_NS + 1)
    for index, stamp in enumerate(times):
        slot = (stamp - start) // BIN_NS
        if slot >= 0:  # an event before the start cannot happen with one clock; ignore it
            bins[slot] += weights[index] if weights is not None else 1
    return bins


def percentile(sorted_values: Sequence[int], fraction: float) -> int:
    if not sorted_values:
        return 0
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]


@dataclass
class UdpCounts:
    received: int  # unique sequence numbers that arrived
    duplicates: int
    reordered: int  # arrived after a higher sequence number
    strays: int  # carried a sequence number never sent
    longest_loss_run: int
    longest_loss_run_first_seq: int | None


def count_sequences(sent: int, seqs: Sequence[int]) -> UdpCounts:
    """Loss, duplicates and reordering from the sequence numbers in arrival order (0..sent-1 sent)."""
    seen = bytearray(sent)
    duplicates = reordered = strays = 0
    highest = -1
    for seq in seqs:
        if seq >= sent:
            strays += 1
            continue
        if seen[seq]:
            duplicates += 1
            continue
        seen[seq] = 1
        if seq < highest:
            reordered += 1
        else:
            highest = seq
    run, first = 0, None
    for match in _ZERO_RUN.finditer(seen):  # runs of never-received sequence numbers
        if match.end() - match.start() > run:
            run, first = match.end() - match.start(), match.start()
    return UdpCounts(sum(seen), duplicates, reordered, strays, run, first)


def _holes(sent: int, seqs: Sequence[int], sends: Sequence[int], first_ns: int, last_ns: int) -> Iterator[tuple[int, int, int]]:
    """Each run of lost sequence numbers as (send time of the last packet received before it,
    send time of the first received after it, packets lost), in sequence order. A run before
    the first arrival starts at first_ns; one after the last arrival ends at last_ns."""
    sent_at = dict(zip(seqs, sends))  # a duplicate carries the same send time
    previous, previous_ns = -1, first_ns
    for seq in sorted(s for s in sent_at if 0 <= s < sent):
        if seq > previous + 1:
            yield previous_ns, sent_at[seq], seq - previous - 1
        previous, previous_ns = seq, sent_at[seq]
    if previous < sent - 1:
        yield previous_ns, last_ns, sent - 1 - previous


def loss_runs(sent: int, seqs: Sequence[int], sends: Sequence[int], first_ns: int) -> list[list[float]]:
    """Each run of lost sequence numbers as [ms from first_ns of the last packet sent before
    the run, packets lost], in sequence order: when a fault began, and what it cost.
    A run before the first arrival is dated first_ns. `sends` are the send times of `seqs`."""
    return [[_ms(before - first_ns), lost] for before, _after, lost in _holes(sent, seqs, sends, first_ns, first_ns)]


def max_outage(sent: int, seqs: Sequence[int], sends: Sequence[int], first_ns: int, last_ns: int) -> int:
    """The network's longest outage: the longest span of send times in which every packet was
    lost. Unlike max_gap (arrival times) it is blind to the sender's own pauses, which lose
    nothing: on a loaded machine a descheduled sender makes an arrival gap, not an outage."""
    return max((after - before for before, after, _lost in _holes(sent, seqs, sends, first_ns, last_ns)), default=0)


def _relative_marks(marks: dict[str, int], start: int) -> dict[str, float]:
    return {label: _ms(stamp - start) for label, stamp in marks.items()}


def _count_between(bins: list[int], from_ms: float | None, to_ms: float | None) -> int:
    first = 0 if from_ms is None else max(0, int(from_ms * NS_PER_MS // BIN_NS))
    last = len(bins) if to_ms is None else max(0, int(to_ms * NS_PER_MS // BIN_NS))
    return sum(bins[first:last])


@dataclass
class UdpResult:
    """One UDP stream. Times in ms are relative to the first send (`start_ns`)."""

    src: str
    dst: str
    address: str
    target_pps: int
    size: int
    start_ns: int
    duration_s: float  # first to last send
    sent: int
    received: int  # unique
    lost: int  # sent - received
    duplicates: int
    reordered: int
    strays: int
    achieved_pps: float
    send_errors: dict[str, int]  # errno name -> count; those packets count as sent (and lost)
    sender_max_gap_ms: float  # longest pause of the sender itself: a gap above it is the network's
    sender_stalls: int  # times the sender fell > 5 ms behind and skipped the backlog
    socket_drops: int  # dropped by the receiving socket (receiver too slow), not by the network
    max_gap_ms: float  # longest time without an arrival, within [first send, last send]
    max_gap_at_ms: float
    max_outage_ms: float  # longest span of send times that lost every packet: see max_outage()
    gaps: list[list[float]]  # every gap >= gap_list_ms (20 ms): [began ms, length ms]
    longest_loss_run: int  # consecutive sequence numbers lost
    longest_loss_run_first_seq: int | None
    latency_ms: dict[str, float]  # one-way: arrival - send timestamp
    rx_timestamps: str  # "kernel" (SO_TIMESTAMPNS, immune to receiver scheduling) or "user"
    timeline: list[int]  # packets received per bin
    bin_ms: float = BIN_NS / NS_PER_MS
    marks: dict[str, float] = field(default_factory=dict)
    loss_runs: list[list[float]] = field(default_factory=list)  # see loss_runs()
    gap_list_ms: float = GAP_LIST_NS / NS_PER_MS

    @property
    def loss_ratio(self) -> float:
        return self.lost / self.sent if self.sent else 0.0

    def received_between(self, from_ms: float | None = None, to_ms: float | None = None) -> int:
        """Packets received in [from_ms, to_ms) (bin resolution), e.g. after a repair mark."""
        return _count_between(self.timeline, from_ms, to_ms)

    def summary(self) -> str:
        return (
            f"udp {self.src} -> {self.dst} {self.address}: sent {self.sent} in {self.duration_s:.2f} s "
            f"({self.achieved_pps:.0f} pps, target {self.target_pps}), received {self.received}, "
            f"lost {self.lost} ({100 * self.loss_ratio:.3f}%), dup {self.duplicates}, reordered {self.reordered}, "
            f"max gap {self.max_gap_ms:.1f} ms at {self.max_gap_at_ms:.0f} ms, outage {self.max_outage_ms:.1f} ms, "
            f"sender pause {self.sender_max_gap_ms:.1f} ms, "
            f"longest loss run {self.longest_loss_run}, latency p99 {self.latency_ms['p99']:.3f} ms"
            + (f", send errors {self.send_errors}" if self.send_errors else "")
            + (f", socket drops {self.socket_drops}" if self.socket_drops else "")
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def analyze_udp(
    *, src: str, dst: str, address: str, target_pps: int, size: int, sender: dict[str, Any],
    receiver: dict[str, Any], marks: dict[str, int], gap_list_ns: int = GAP_LIST_NS,
) -> UdpResult:
    """Combine the sender's and receiver's raw records into a UdpResult; gaps of at least
    gap_list_ns are listed one by one."""
    sent, first, last = sender["sent"], sender["first_ns"], sender["last_ns"]
    seqs, sends, arrivals = receiver["seqs"], receiver["sends"], receiver["arrivals"]
    counts = count_sequences(sent, seqs)
    gap, gap_at = max_gap(arrivals, first, last)
    delays = sorted(a - s for a, s in zip(arrivals, sends))
    span = last - first
    return UdpResult(
        src=src, dst=dst, address=address, target_pps=target_pps, size=size,
        start_ns=first,
        duration_s=round(span / 1e9, 4),
        sent=sent,
        received=counts.received,
        lost=sent - counts.received,
        duplicates=counts.duplicates,
        reordered=counts.reordered,
        strays=counts.strays + receiver["foreign"],
        achieved_pps=round((sent - 1) * 1e9 / span, 1) if span > 0 else 0.0,
        send_errors=dict(sender["errors"]),
        sender_max_gap_ms=_ms(sender["max_gap_ns"]),
        sender_stalls=sender["stalls"],
        socket_drops=receiver["socket_drops"],
        max_gap_ms=_ms(gap),
        max_gap_at_ms=_ms(gap_at - first),
        max_outage_ms=_ms(max_outage(sent, seqs, sends, first, last)),
        gaps=gaps_over(arrivals, first, last, gap_list_ns),
        longest_loss_run=counts.longest_loss_run,
        longest_loss_run_first_seq=counts.longest_loss_run_first_seq,
        latency_ms={
            "p50": _ms(percentile(delays, 0.5)),
            "p99": _ms(percentile(delays, 0.99)),
            "max": _ms(delays[-1] if delays else 0),
        },
        rx_timestamps=receiver["timestamps"],
        timeline=timeline(arrivals, first, last),
        marks=_relative_marks(marks, first),
        loss_runs=loss_runs(sent, seqs, sends, first),
        gap_list_ms=_ms(gap_list_ns),
    )


@dataclass
class TcpResult:
    """One TCP stream. Times in ms are relative to the first connection (`start_ns`)."""

    src: str
    dst: str
    address: str
    target_bps: int | None  # None: as fast as it goes
    start_ns: int
    duration_s: float  # first connection to the end of sending
    bytes_sent: int  # accepted by the sending socket
    bytes_received: int
    goodput_mbps: float  # received over duration_s
    max_stall_ms: float  # longest time with no byte received, within [start, end of sending]
    max_stall_at_ms: float
    stalls: list[list[float]]  # every stall >= 20 ms: [began ms, length ms]
    connections: int  # established (more than 1 only with reconnect)
    resets: int  # ECONNRESET / EPIPE on an established connection
    timeouts: int  # ETIMEDOUT: TCP_USER_TIMEOUT expired
    connect_failures: int
    other_errors: int
    errors: list[str]  # what went wrong and when, in order
    graceful_close: bool  # the closing FIN exchange completed
    survived: bool  # one connection, no error, every byte delivered, closed gracefully
    retransmits: int  # segments the sender retransmitted (tcpi_total_retrans, every connection)
    rto_ms: float | None  # the sender's retransmission timeout as the connection closed
    timeline: list[int]  # bytes received per bin
    bin_ms: float = BIN_NS / NS_PER_MS
    marks: dict[str, float] = field(default_factory=dict)

    def received_between(self, from_ms: float | None = None, to_ms: float | None = None) -> int:
        """Bytes received in [from_ms, to_ms) (bin resolution)."""
        return _count_between(self.timeline, from_ms, to_ms)

    def goodput_timeline_mbps(self) -> list[float]:
        return [round(b * 8 / (self.bin_ms * 1000), 3) for b in self.timeline]

    def summary(self) -> str:
        target = f"{self.target_bps / 1e6:g} Mbit/s" if self.target_bps else "unlimited"
        return (
            f"tcp {self.src} -> {self.dst} {self.address}: {self.bytes_received} B received of {self.bytes_sent} sent "
            f"in {self.duration_s:.2f} s ({self.goodput_mbps:.1f} Mbit/s, target {target}), "
            f"max stall {self.max_stall_ms:.1f} ms at {self.max_stall_at_ms:.0f} ms, connections {self.connections}, "
            f"resets {self.resets}, timeouts {self.timeouts}, connect failures {self.connect_failures}, "
            f"survived {'yes' if self.survived else 'no'}"
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def analyze_tcp(
    *, src: str, dst: str, address: str, target_bps: int | None, sender: dict[str, Any],
    receiver: dict[str, Any], marks: dict[str, int],
) -> TcpResult:
    start, end = sender["start_ns"], sender["end_ns"]
    stamps, sizes = receiver["stamps"], receiver["sizes"]
    stall, stall_at = max_gap(stamps, start, end)
    received = sum(sizes)
    counts = sender["counts"]
    survived = (
        counts["connections"] == 1
        and not sender["errors"]
        and sender["graceful"]
        and received == sender["bytes"]
    )
    return TcpResult(
        src=src, dst=dst, address=address, target_bps=target_bps,
        start_ns=start,
        duration_s=round((end - start) / 1e9, 4),
        bytes_sent=sender["bytes"],
        bytes_received=received,
        goodput_mbps=round(received * 8e3 / (end - start), 3) if end > start else 0.0,
        max_stall_ms=_ms(stall),
        max_stall_at_ms=_ms(stall_at - start),
        stalls=gaps_over(stamps, start, end),
        connections=counts["connections"],
        resets=counts["resets"],
        timeouts=counts["timeouts"],
        connect_failures=counts["connect_failures"],
        other_errors=counts["other_errors"],
        errors=[f"{_ms(stamp - start):.1f} ms: {text}" for stamp, text in sender["errors"]],
        graceful_close=sender["graceful"],
        survived=survived,
        retransmits=sender.get("retransmits", 0),
        rto_ms=None if sender.get("rto_us") is None else sender["rto_us"] / 1000,
        timeline=timeline(stamps, start, end, sizes),
        marks=_relative_marks(marks, start),
    )
