"""The main job end to end: bin/edgeft-demo on a lab of its own (unique name), as the README's
first command runs it, with a shorter job and schedule. It must show what the README says:
without edgeft the job stalls until the switch is repaired; with edgeft it finishes every
step with no stall and no reset. Also the PyTorch DDP job through the same faults."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from edgeft_lab import Lab
from lab_helpers import assert_nothing_left, needs_root, unique_name
from repo import REPO

SILENT_S = OFF_S = 4.0
PHASES = ["silent", "power-off", "power-on"]


def run_demo(out: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict, str]:
    name = unique_name()
    try:
        proc = subprocess.run(
            [str(REPO / "bin" / "edgeft-demo"), "--name", name, "--out", str(out), "--silent-s", str(SILENT_S),
             "--off-s", str(OFF_S), "--tail-s", "40", *extra],
            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600, check=False,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        print(proc.stdout[-6000:], proc.stderr[-3000:])
        assert proc.returncode == 0, proc.stderr
        report = json.loads((out / "report.json").read_text())
        return proc, {run["mode"]: run for run in report["runs"]}, (out / "report.txt").read_text()
    finally:
        assert_nothing_left(name)


@needs_root
@pytest.mark.slow
def test_the_ring_job_stalls_without_edgeft_and_rides_through_with_it(tmp_path):
    proc, runs, text = run_demo(tmp_path, "--steps", "300")
    without, edgeft = runs["without-edgeft"], runs["edgeft"]
    assert [p["name"] for p in edgeft["phases"]] == PHASES == [p["name"] for p in without["phases"]]

    # Without edgeft the job stops for the whole fault (silent + powered off), or dies.
    assert without["job"]["verdict"] in ("stalled", "died", "hung")
    assert without["job"]["longest_stall_s"] >= 0.9 * (SILENT_S + OFF_S)
    assert without["phases"][0]["outage_ms"] >= 0.9 * SILENT_S * 1000

    # With edgeft: every step, no stall, no reset; the silent ToR costs a detection, not seconds.
    job = edgeft["job"]
    assert job["verdict"] == "finished" and job["steps_done"] == job["steps_total"] == 300
    assert job["longest_stall_s"] < 1.0 and job["largest_step_ms"] < 1000
    assert all(p["resets"] == 0 and not p["stalled"] for p in edgeft["phases"])
    silent = edgeft["phases"][0]
    assert silent["outage_ms"] is not None and silent["outage_ms"] < 200
    assert silent["lost"] < 0.2 * without["phases"][0]["lost"]

    assert "edgeft: finished 300/300 steps" in text and "without-edgeft:" in text
    png = (tmp_path / "timeline.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 50_000
    assert "timeline:" in proc.stdout and "step " in proc.stdout  # progress was shown


@needs_root
@pytest.mark.slow
def test_the_pytorch_ddp_job_completes_every_step_through_the_faults_with_edgeft(tmp_path):
    proc, runs, text = run_demo(tmp_path, "--workload", "ddp", "--edgeft-only", "--steps", "200")
    assert [p["name"] for p in runs["edgeft"]["phases"]] == PHASES  # the job outlived the whole schedule
    job = runs["edgeft"]["job"]
    assert job["verdict"] == "finished" and job["steps_done"] == 200
    assert job["longest_stall_s"] < 1.0
    assert all(p["resets"] == 0 for p in runs["edgeft"]["phases"])
    assert f"largest step {job['largest_step_ms']:.0f} ms" in text  # the largest step-time stall, printed


@needs_root
@pytest.mark.parametrize("args, option", [
    (["--steps", "40"], "--steps"),
    (["--switch", "tor-r9-z"], "--switch"),
    (["--name", "Not A Name!"], "--name"),
    (["--silent-s", "0"], "--silent-s"),
    (["--workload", "mpi"], "--workload"),
    (["--without-edgeft", "--edgeft-only"], "--edgeft-only"),
])
def test_bad_options_are_refused_before_any_lab_exists(tmp_path, args, option):
    out = tmp_path / "out"
    proc = subprocess.run([str(REPO / "bin" / "edgeft-demo"), "--name", unique_name(), "--out", str(out), *args],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert option in proc.stderr
    assert not out.exists()


@needs_root
def test_a_lab_of_that_name_already_up_is_left_alone(tmp_path):
    name = unique_name()
    lab = Lab("default", name=name)
    lab.up()
    try:
        proc = subprocess.run([str(REPO / "bin" / "edgeft-demo"), "--name", name, "--out", str(tmp_path / "out")],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60, check=False)
        assert proc.returncode == 2 and "already up" in proc.stderr
        assert lab.is_up()  # not taken down by the refused demo
    finally:
        lab.down()
    assert_nothing_left(name)
