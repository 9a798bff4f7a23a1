"""The demo's timeline picture: for each run (without edgeft left, edgeft right) the traffic of
every host's plane NICs and the job's step times, over the fault schedule.

matplotlib is imported inside `plot_timeline` only, so the analysis and the report work
where it is not installed.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from edgeft_demo.analysis import NS_PER_S, RunAnalysis, is_delayed, job_steps, stall_where, throughput
from edgeft_demo.record import MODES, Run

if TYPE_CHECKING:
    from matplotlib.axes import Axes

PLANE_COLOURS = {"a": "tab:blue", "b": "tab:orange"}
SPARE_COLOURS = ("tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")
TX_STYLE, RX_STYLE = "-", "--"
FAULT_SHADE = "tab:red"
REPAIR_LINE = "tab:green"
STEP_COLOUR, DELAYED_COLOUR = "tab:gray", "tab:red"

COLUMN_WIDTH_IN = 7.0
ROW_HEIGHT_IN = 1.6
MARGIN_IN = 1.2  # figure title and the shared legend
DPI = 100


def plane_colours(planes: Sequence[str]) -> dict[str, str]:
    """Fixed colours for the usual planes, so every picture reads the same; others in order."""
    spare = iter(SPARE_COLOURS)
    return {plane: PLANE_COLOURS.get(plane) or next(spare, "black") for plane in planes}


def column_title(analysis: RunAnalysis) -> str:
    """Mode, verdict and the figure that tells the story of that verdict."""
    job = analysis.job
    if job.verdict == "finished":
        outcome = f"finished, largest step {job.largest_step_ms:.0f} ms"
    elif job.verdict == "stalled":
        outcome = f"stalled {job.longest_stall_s:.1f} s {stall_where(job)}"
    elif job.verdict == "died" and job.died is not None:
        outcome = f"died at step {job.died['step']} ({job.died['host']}: {job.died['kind']})"
    else:
        outcome = f"{job.verdict}, {job.steps_done}/{job.steps_total} steps when the run ended"
    return f"{analysis.mode} \N{EM DASH} {outcome}"


def _ordered(runs: Sequence[Run], analyses: Sequence[RunAnalysis]) -> list[tuple[Run, RunAnalysis]]:
    def rank(pair: tuple[Run, RunAnalysis]) -> int:
        return MODES.index(pair[0].mode) if pair[0].mode in MODES else len(MODES)

    return sorted(zip(runs, analyses), key=rank)


def _all_hosts(runs: Sequence[Run]) -> list[str]:
    hosts: list[str] = []
    for run in runs:
        hosts += [h for h in run.hosts if h not in hosts]
    return hosts


def _all_planes(runs: Sequence[Run]) -> list[str]:
    planes: list[str] = []
    for run in runs:
        planes += [p for p in run.planes if p not in planes]
    return planes


def _seconds(run: Run, t_ns: int) -> float:
    return (t_ns - run.t0_ns) / NS_PER_S


def _mark_phases(run: Run, column: Sequence[Axes]) -> None:
    """Shade fault phases and draw a dashed line where a repair phase begins, on every row;
    name them at the top of the first row."""
    for index, fault in enumerate(run.faults):
        start, end = _seconds(run, fault.start_ns), _seconds(run, fault.end_ns)
        for ax in column:
            if fault.kind == "fault":
                # alternate shades tell back-to-back fault phases apart
                ax.axvspan(start, end, color=FAULT_SHADE, alpha=0.06 if index % 2 else 0.12, linewidth=0)
            elif fault.kind == "repair":
                ax.axvline(start, color=REPAIR_LINE, linestyle="--", linewidth=1)
        if fault.kind in ("fault", "repair"):
            column[0].text(
                start, 0.96, f" {fault.name}", transform=column[0].get_xaxis_transform(),
                ha="left", va="top", fontsize=7, color="dimgray",
            )


def _draw_throughput(run: Run, rows: dict[str, Axes], colours: dict[str, str]) -> None:
    for series in throughput(run):
        ax = rows[series.host]
        colour = colours[series.plane]
        ax.plot(series.t_s, series.tx_mbps, TX_STYLE, color=colour, linewidth=0.9)
        ax.plot(series.t_s, series.rx_mbps, RX_STYLE, color=colour, linewidth=0.9)


def _draw_steps(run: Run, analysis: RunAnalysis, ax: Axes) -> None:
    """Job step times on a log scale: a dot at each step's finish time, delayed steps in red,
    and the delay threshold dotted."""
    baseline_ms = analysis.job.baseline_ms
    steps = [s for s in job_steps(run) if s.step_ms > 0]  # a log axis cannot show 0
    x = [_seconds(run, s.t_ns) for s in steps]
    y = [s.step_ms for s in steps]
    # steps-pre: each step's time is drawn across the interval it ran in (steps run back to
    # back), so a step stuck through a fault is a long plateau, not a slope.
    ax.plot(x, y, "-", color=STEP_COLOUR, linewidth=0.6, drawstyle="steps-pre")
    ax.plot(x, y, ".", color=STEP_COLOUR, markersize=2)
    delayed = [(t, ms) for t, ms in zip(x, y) if is_delayed(ms, baseline_ms)]
    if delayed:
        ax.plot(*zip(*delayed), "o", color=DELAYED_COLOUR, markersize=3)
    if baseline_ms > 0:
        ax.axhline(analysis.job.delay_threshold_ms, color=DELAYED_COLOUR, linestyle=":", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("job step ms", fontsize=8)
    ax.set_xlabel("seconds from job start", fontsize=8)


def _legend_handles(colours: dict[str, str]) -> list[Any]:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colour, label=f"plane {plane}") for plane, colour in colours.items()]
    handles += [
        Line2D([], [], color="black", linestyle=TX_STYLE, label="tx Mbit/s"),
        Line2D([], [], color="black", linestyle=RX_STYLE, label="rx Mbit/s"),
        Line2D([], [], color=STEP_COLOUR, marker=".", label="job step ms"),
        Line2D([], [], color=DELAYED_COLOUR, marker="o", linestyle="", label="delayed step"),
        Line2D([], [], color=DELAYED_COLOUR, linestyle=":", label="delay threshold"),
    ]
    return handles


def _save_atomically(figure: Any, path: Path) -> None:
    """Readers never see a half-written picture: write beside it, then rename over it."""
    tmp = path.with_suffix(".tmp.png")
    try:
        figure.savefig(tmp, format="png", dpi=DPI)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def plot_timeline(runs: Sequence[Run], analyses: Sequence[RunAnalysis], path: Path) -> None:
    """Write the timeline of the runs (analyses[i] is the analysis of runs[i]) as a PNG.

    One column per run; one row per host with its plane NICs' tx (solid) and rx (dashed)
    Mbit/s, y shared by all those rows; a last row with the job's step times. x is shared
    within a column. Never opens a window (Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = _ordered(runs, analyses)
    hosts = _all_hosts(runs)
    colours = plane_colours(_all_planes(runs))
    nrows, ncols = len(hosts) + 1, max(1, len(pairs))
    height_in = ROW_HEIGHT_IN * nrows + MARGIN_IN
    figure = plt.figure(figsize=(COLUMN_WIDTH_IN * ncols, height_in), dpi=DPI)
    try:
        # One time axis for every column, so the runs compare at a glance.
        x_range = (min(0.0, *(_seconds(run, f.start_ns) for run in runs for f in run.faults)),
                   max((_seconds(run, run.end_ns) for run in runs), default=1.0))
        first_traffic, first_steps = _draw_columns(figure, pairs, hosts, colours, x_range)
        if first_traffic is not None:
            _set_traffic_limits(first_traffic, runs)
        if first_steps is not None:
            _set_step_limits(first_steps, pairs)
        figure.suptitle(_figure_title(runs))
        handles = _legend_handles(colours)
        per_row = len(handles) if ncols > 1 else math.ceil(len(handles) / 2)
        figure.legend(handles=handles, loc="lower center", ncol=per_row, fontsize=8, frameon=False)
        legend_in = 0.15 + 0.22 * math.ceil(len(handles) / per_row)
        figure.tight_layout(rect=(0, legend_in / height_in, 1, 1))
        _save_atomically(figure, path)
    finally:
        plt.close(figure)


WORKLOAD_TITLES = {"ring": "ring all-reduce over TCP", "ddp": "PyTorch DDP (gloo, CPU)"}


def _figure_title(runs: Sequence[Run]) -> str:
    """What ran where: the workload(s), the hosts, and the faults of the schedule."""
    workloads = ", ".join(WORKLOAD_TITLES.get(w, w) for w in sorted({run.workload for run in runs})) or "demo"
    hosts = max((len(run.hosts) for run in runs), default=0)
    what = next((f.what.split(" ")[0] for run in runs for f in run.faults), None)
    return f"{workloads} on {hosts} hosts" + (f"; {what} fails" if what else "")


def _set_traffic_limits(ax: Axes, runs: Sequence[Run]) -> None:
    """From 0, with headroom above the busiest NIC for the phase names (all throughput rows
    share this y axis)."""
    peak = max((max(s.tx_mbps + s.rx_mbps, default=0.0) for run in runs for s in throughput(run)), default=0.0)
    ax.set_ylim(0, peak * 1.3 if peak > 0 else 1.0)


def _set_step_limits(ax: Axes, pairs: Sequence[tuple[Run, RunAnalysis]]) -> None:
    """Room around every step and the delay threshold (all step rows share this y axis);
    over a narrow range, label 2x and 5x ticks too so the axis still reads in ms."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    values = [s.step_ms for run, _analysis in pairs for s in job_steps(run) if s.step_ms > 0]
    values += [a.job.delay_threshold_ms for _run, a in pairs if a.job.baseline_ms > 0]
    if not values:
        return
    low, high = min(values) / 1.3, max(values) * 1.3
    ax.set_ylim(low, high)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    if high / low < 30:
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: f"{value:g}" if f"{value:g}"[0] in "25" else ""))
    else:
        ax.yaxis.set_minor_formatter(NullFormatter())


def _draw_columns(
    figure: Any, pairs: Sequence[tuple[Run, RunAnalysis]], hosts: Sequence[str], colours: dict[str, str],
    x_range: tuple[float, float],
) -> tuple[Axes | None, Axes | None]:
    """Lay out and draw every column; returns an axis of the shared throughput y and one of
    the shared step time y."""
    grid = figure.add_gridspec(len(hosts) + 1, max(1, len(pairs)))
    first_traffic: Axes | None = None
    first_steps: Axes | None = None
    for col, (run, analysis) in enumerate(pairs):
        top = None
        column: list[Axes] = []
        for row in range(len(hosts) + 1):
            is_steps = row == len(hosts)
            ax = figure.add_subplot(grid[row, col], sharex=top, sharey=first_steps if is_steps else first_traffic)
            top = top or ax
            if is_steps:
                first_steps = first_steps or ax
            else:
                first_traffic = first_traffic or ax
            column.append(ax)
        _draw_column(run, analysis, column, hosts, colours, x_range)
    return first_traffic, first_steps


def _draw_column(
    run: Run, analysis: RunAnalysis, column: Sequence[Axes], hosts: Sequence[str], colours: dict[str, str],
    x_range: tuple[float, float],
) -> None:
    rows = dict(zip(hosts, column))
    _draw_throughput(run, rows, colours)
    for host, ax in rows.items():
        ax.set_ylabel(f"{host}\nMbit/s", fontsize=8)
        ax.tick_params(labelbottom=False, labelsize=7)
    _draw_steps(run, analysis, column[-1])
    column[-1].tick_params(which="both", labelsize=7)
    _mark_phases(run, column)
    column[0].set_xlim(*x_range)
    column[0].set_title(column_title(analysis), fontsize=10)
    for ax in column:
        ax.grid(True, linewidth=0.3, alpha=0.5)
