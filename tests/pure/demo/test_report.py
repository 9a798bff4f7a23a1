"""The text report and its JSON twin."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from edgeft_demo.analysis import analyze_run
from edgeft_demo.report import COLUMNS, MAX_LINE, format_report, report_dict
from repo import REPO

DEMO = REPO / "demo"


def table_row(text: str, phase: str, mode: str) -> list[str]:
    """The cells of the table row for (phase, mode)."""
    rows = [line.split() for line in text.splitlines() if line.split()[:2] == [phase, mode]]
    assert len(rows) == 1, (phase, mode, text)
    return rows[0]


def test_two_runs(without_run, edgeft_run):
    # given edgeft first: the report still puts without-edgeft first
    text = format_report([analyze_run(edgeft_run), analyze_run(without_run)])
    lines = text.splitlines()
    assert lines[0].startswith("without-edgeft: ring, 4 ranks on 4 hosts, 100 steps; baseline step 60.0 ms")
    assert lines[1].startswith("edgeft: ring, 4 ranks on 4 hosts, 200 steps; baseline step 60.0 ms")
    assert all(column.split()[0] in lines[3] for column in COLUMNS)
    # phase, mode, outage, hb lost, retrans, resets, delayed, largest, time lost, stalled
    assert table_row(text, "silent", "without-edgeft") == ["silent", "without-edgeft", "4100", "92", "0", "0", "0/0", "0", "0.0", "4.0", "s"]
    assert table_row(text, "silent", "edgeft") == ["silent", "edgeft", "130", "19", "8", "0", "1/43", "150", "1.4", "no"]
    assert table_row(text, "power-off", "without-edgeft") == [
        "power-off", "without-edgeft", "120", "5", "34", "0", "1/1", "8000", "7.9", "4.0", "s",
    ]
    assert table_row(text, "power-off", "edgeft")[2] == "<5"
    assert table_row(text, "power-on", "edgeft")[2:7] == ["<5", "0", "0", "0", "0/78"]
    # rows grouped by phase, without-edgeft first in each group
    order = [line.split()[:2] for line in lines if line.split()[:1] in (["silent"], ["power-off"], ["power-on"])]
    assert order == [[p, m] for p in ("silent", "power-off", "power-on") for m in ("without-edgeft", "edgeft")]
    assert "without-edgeft: finished 100/100 steps in 13.9 s (healthy 6.0 s, +7.9 s); stalled 8.0 s from 'silent'" in lines
    assert "edgeft: finished 200/200 steps in 14.7 s (healthy 12.0 s, +2.7 s); largest step 150 ms" in lines


def test_columns_are_aligned_and_lines_short(without_run, edgeft_run, reset_run):
    text = format_report([analyze_run(without_run), analyze_run(edgeft_run)])
    assert max(len(line) for line in text.splitlines()) <= MAX_LINE
    header = next(line for line in text.splitlines() if line.startswith("phase"))
    ruler = text.splitlines()[text.splitlines().index(header) + 1]
    assert set(ruler) == {"-", " "}
    # right-aligned numbers end where their header ends
    silent = next(line for line in text.splitlines() if line.startswith("silent"))
    assert silent.index("4100") + 4 == header.index("outage ms") + len("outage ms")
    long_error = analyze_run(reset_run)
    long_error.job.died["error"] = "connection reset by peer " * 10
    assert max(len(line) for line in format_report([long_error]).splitlines()) <= MAX_LINE


def test_legend(edgeft_run):
    text = format_report([analyze_run(edgeft_run)])
    for term in ("outage ms", "hb lost", "delayed", "stalled"):
        assert any(line.startswith(term) for line in text.splitlines()[-12:])


def test_one_run_has_the_mode_column_too(edgeft_run):
    text = format_report([analyze_run(edgeft_run)])
    assert table_row(text, "silent", "edgeft")[6] == "1/43"
    assert "without-edgeft" not in text


def test_died(reset_run):
    text = format_report([analyze_run(reset_run)])
    assert (
        "without-edgeft: died at step 41 after 3.0 s, 40/100 steps done (r2h1: reset: connection reset by peer)"
        in text.splitlines()
    )
    assert table_row(text, "silent", "without-edgeft")[5] == "1"  # resets
    assert table_row(text, "silent", "without-edgeft")[2:5] == ["4100", "92", "-"]  # no retrans counts


def test_hung(hung_run):
    text = format_report([analyze_run(hung_run)])
    assert (
        "without-edgeft: hung: 40/100 steps when the run ended (14.0 s); no end from r1h1, r1h2, r2h1, r2h2"
        in text.splitlines()
    )
    # without heartbeats there is no outage figure at all
    assert table_row(text, "power-on", "without-edgeft")[2:4] == ["-", "-"]


def test_report_dict_is_json(without_run, edgeft_run, reset_run):
    analyses = [analyze_run(edgeft_run), analyze_run(reset_run), analyze_run(without_run)]
    doc = report_dict(analyses)
    assert json.loads(json.dumps(doc)) == doc
    assert [run["mode"] for run in doc["runs"]] == ["without-edgeft", "without-edgeft", "edgeft"]
    assert doc["runs"][2]["job"]["verdict"] == "finished"
    assert doc["runs"][0]["phases"][0]["name"] == "silent"


def test_report_imports_without_matplotlib():
    code = "import sys, edgeft_demo.report, edgeft_demo.analysis; sys.exit('matplotlib' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(DEMO)}
    assert subprocess.run([sys.executable, "-c", code], env=env, check=False).returncode == 0
