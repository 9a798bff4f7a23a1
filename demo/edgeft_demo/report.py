"""The demo's report: a plain-text comparison of one or two analysed runs (without edgeft,
with edgeft), and the same figures as a JSON-able dict."""

from __future__ import annotations

from typing import Any, Sequence

from edgeft_demo.analysis import PhaseFigures, RunAnalysis, stall_where
from edgeft_demo.record import MODES

REPORT_FORMAT = 1
MAX_LINE = 110

COLUMNS = ("phase", "mode", "outage ms", "hb lost", "TCP retrans", "resets", "delayed", "largest ms", "time lost s", "stalled")
LEFT_ALIGNED = {"phase", "mode"}

LEGEND = """\
outage ms    longest gap in any heartbeat stream (UDP along each ring edge) that began in the phase;
             "<N": no gap of N ms (the heartbeats' gap threshold) or more at all
hb lost      heartbeat packets lost in the phase
TCP retrans  segments the job's TCP connections retransmitted during the phase (all ranks)
resets       ranks whose connection was reset in the phase (the rank died)
delayed      job steps finishing in the phase slower than max(2 x baseline, baseline + 50 ms) / all
             job steps finishing there (a job step is as slow as its slowest rank)
largest ms   the slowest job step finishing in the phase
time lost s  wall-clock time between the job steps finishing in the phase, beyond the baseline
stalled      longest stretch without any job step finishing, when over 1 s\
"""


def ordered_by_mode(analyses: Sequence[RunAnalysis]) -> list[RunAnalysis]:
    """Without edgeft first, then edgeft; unknown modes after them, in the given order."""
    def rank(analysis: RunAnalysis) -> int:
        return MODES.index(analysis.mode) if analysis.mode in MODES else len(MODES)

    return sorted(analyses, key=rank)


def header_line(analysis: RunAnalysis) -> str:
    job = analysis.job
    return (
        f"{analysis.mode}: {analysis.workload}, {analysis.ranks} ranks on {len(analysis.hosts)} hosts, "
        f"{job.steps_total} steps; baseline step {job.baseline_ms:.1f} ms (delayed above {job.delay_threshold_ms:.0f} ms)"
    )


def _outage_cell(phase: PhaseFigures) -> str:
    if phase.outage_ms is not None:
        return f"{phase.outage_ms:.0f}"
    if phase.gap_threshold_ms is not None:
        return f"<{phase.gap_threshold_ms:g}"
    return "-"  # no heartbeats in this run


def phase_cells(phase: PhaseFigures, mode: str) -> tuple[str, ...]:
    """One table row, in COLUMNS order."""
    return (
        phase.name,
        mode,
        _outage_cell(phase),
        "-" if phase.gap_threshold_ms is None else str(phase.lost),
        "-" if phase.retrans is None else str(phase.retrans),
        str(phase.resets),
        f"{phase.delayed}/{phase.steps}",
        f"{phase.largest_step_ms:.0f}",
        f"{phase.time_lost_s:.1f}",
        f"{phase.longest_stall_s:.1f} s" if phase.stalled else "no",
    )


def _phase_names(analyses: Sequence[RunAnalysis]) -> list[str]:
    """Every phase name once, in schedule order (the runs share one schedule)."""
    names: list[str] = []
    for analysis in analyses:
        names += [p.name for p in analysis.phases if p.name not in names]
    return names


def table_rows(analyses: Sequence[RunAnalysis]) -> list[tuple[str, ...]]:
    """Rows grouped by phase, one per run in the given order."""
    rows = []
    for name in _phase_names(analyses):
        for analysis in analyses:
            rows += [phase_cells(p, analysis.mode) for p in analysis.phases if p.name == name]
    return rows


def format_table(rows: Sequence[Sequence[str]], columns: Sequence[str] = COLUMNS) -> list[str]:
    widths = [max(len(cell) for cell in column) for column in zip(columns, *rows)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.ljust(width) if name in LEFT_ALIGNED else cell.rjust(width)
            for name, cell, width in zip(columns, cells, widths)
        ).rstrip()

    return [line(columns), line(["-" * width for width in widths]), *(line(row) for row in rows)]


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."


def result_line(analysis: RunAnalysis) -> str:
    """One line: how the job ended and its key figure."""
    job, mode = analysis.job, analysis.mode
    steps = f"{job.steps_done}/{job.steps_total} steps"
    if job.verdict in ("finished", "stalled"):
        delay = "" if job.delay_s is None else f", {job.delay_s:+.1f} s"
        line = f"{mode}: finished {steps} in {job.job_s:.1f} s (healthy {job.healthy_s:.1f} s{delay}); "
        if job.verdict == "stalled":
            return line + f"stalled {job.longest_stall_s:.1f} s {stall_where(job)}"
        return line + f"largest step {job.largest_step_ms:.0f} ms"
    if job.verdict == "died" and job.died is not None:
        died = job.died
        line = f"{mode}: died at step {died['step']} after {died['at_s']:.1f} s, {steps} done "
        cause = f"{died['host']}: {died['kind']}: {died['error']}"
        return line + "(" + _shorten(cause, MAX_LINE - len(line) - 2) + ")"
    line = f"{mode}: hung: {steps} when the run ended ({job.job_s:.1f} s)"
    if job.unfinished:
        line += "; no end from " + ", ".join(job.unfinished)
    return _shorten(line, MAX_LINE)


def format_report(analyses: Sequence[RunAnalysis]) -> str:
    """The text report: a header line per run, the phase table, a result line per run and
    the legend. Plain text, no wider than about MAX_LINE columns."""
    runs = ordered_by_mode(analyses)
    lines = [header_line(a) for a in runs]
    lines += ["", *format_table(table_rows(runs)), ""]
    lines += [result_line(a) for a in runs]
    lines += ["", LEGEND]
    return "\n".join(lines) + "\n"


def report_dict(analyses: Sequence[RunAnalysis]) -> dict[str, Any]:
    """The analyses as JSON-able data, runs in mode order."""
    return {"format": REPORT_FORMAT, "runs": [a.to_dict() for a in ordered_by_mode(analyses)]}
