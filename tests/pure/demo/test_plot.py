"""The timeline PNG: written whole, for one run or two."""

from __future__ import annotations

import pytest

from edgeft_demo.analysis import analyze_run
from edgeft_demo.plot import column_title, plane_colours, plot_timeline

pytest.importorskip("matplotlib")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_png(path):
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > 10_000
    assert not path.with_suffix(".tmp.png").exists()
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_one_run(tmp_path, edgeft_run):
    path = tmp_path / "timeline.png"
    plot_timeline([edgeft_run], [analyze_run(edgeft_run)], path)
    assert_png(path)


def test_two_runs(tmp_path, edgeft_run, without_run):
    path = tmp_path / "timeline.png"
    runs = [edgeft_run, without_run]
    plot_timeline(runs, [analyze_run(run) for run in runs], path)
    assert_png(path)


def test_dead_and_hung_runs_replace_an_old_picture(tmp_path, reset_run, hung_run):
    path = tmp_path / "timeline.png"
    path.write_bytes(b"old")
    runs = [reset_run, hung_run]
    plot_timeline(runs, [analyze_run(run) for run in runs], path)
    assert_png(path)


def test_column_titles(edgeft_run, without_run, reset_run, hung_run):
    assert column_title(analyze_run(edgeft_run)) == "edgeft \N{EM DASH} finished, largest step 150 ms"
    assert column_title(analyze_run(without_run)) == "without-edgeft \N{EM DASH} stalled 8.0 s from 'silent'"
    assert column_title(analyze_run(reset_run)) == "without-edgeft \N{EM DASH} died at step 41 (r2h1: reset)"
    assert column_title(analyze_run(hung_run)) == "without-edgeft \N{EM DASH} hung, 40/100 steps when the run ended"


def test_plane_colours_are_fixed():
    assert plane_colours(["b", "a", "c"]) == {"b": "tab:orange", "a": "tab:blue", "c": "tab:green"}
