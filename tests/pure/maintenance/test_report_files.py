"""The maintenance report's files (maintenance/report_files.py), as the maintenance_report action
writes them on the controller: each switch's line, and the report of every line so far."""

from __future__ import annotations

import json

from ansible_collections.edgeft.failover.plugins.module_utils.maintenance import report_files


def row(switch, started_at, status="done", position=None):
    line = {"switch": switch, "role": "tor", "plane": "a", "hosts": ["r1h1"], "peers": ["r2h1"], "status": status,
            "started_at": started_at, "lost_packets": 0, "failures": [], "hosts_affected": 1, "drained_seconds": None}
    if position is not None:
        line["position"] = position
    return line


def test_lines_and_the_report_in_the_order_the_switches_started(tmp_path):
    assert report_files.write_row(tmp_path, "tor-r2-a", row("tor-r2-a", 20.0))
    assert report_files.write_row(tmp_path, "tor-r1-a", row("tor-r1-a", 10.0))
    lines, table, changed = report_files.write_report(tmp_path)
    assert changed and [r["switch"] for r in lines] == ["tor-r1-a", "tor-r2-a"]
    assert json.loads((tmp_path / "report.json").read_text()) == lines
    assert (tmp_path / "report.txt").read_text() == table + "\n"
    assert "tor-r1-a" in table and "tor-r2-a" in table
    assert json.loads((tmp_path / "switches" / "tor-r1-a.json").read_text()) == row("tor-r1-a", 10.0)


def test_switches_of_one_batch_keep_the_runs_order_whatever_their_start_times(tmp_path):
    # Both start in one batch, each on its own worker: the second one's clock read came first.
    report_files.write_row(tmp_path, "tor-r1-a", row("tor-r1-a", 10.002, position=0))
    report_files.write_row(tmp_path, "tor-r2-a", row("tor-r2-a", 10.001, position=1))
    report_files.write_row(tmp_path, "tor-r1-b", row("tor-r1-b", 20.0, position=2))
    assert [r["switch"] for r in report_files.write_report(tmp_path)[0]] == ["tor-r1-a", "tor-r2-a", "tor-r1-b"]


def test_rewriting_the_same_line_changes_nothing(tmp_path):
    assert report_files.write_row(tmp_path, "tor-r1-a", row("tor-r1-a", 10.0))
    report_files.write_report(tmp_path)
    assert not report_files.write_row(tmp_path, "tor-r1-a", row("tor-r1-a", 10.0))
    assert not report_files.write_report(tmp_path)[2]
    assert report_files.write_row(tmp_path, "tor-r1-a", row("tor-r1-a", 10.0, status="drained"))
    assert report_files.write_report(tmp_path)[0][0]["status"] == "drained"


def test_an_empty_run_has_an_empty_report(tmp_path):
    lines, table, _changed = report_files.write_report(tmp_path)
    assert lines == [] and json.loads((tmp_path / "report.json").read_text()) == []
