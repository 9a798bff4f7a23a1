# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The maintenance report's files on the controller: each switch's line (switches/NAME.json) and
the report of the run so far (report.json for machines, report.txt for people), each replaced
whole. Written by the maintenance_report action, so a switch's report costs no module run."""

from __future__ import annotations

import glob
import json
import os

from ansible_collections.edgeft.failover.plugins.module_utils import atomicfile
from ansible_collections.edgeft.failover.plugins.module_utils.maintenance import report

SWITCHES = "switches"


def _json(value) -> str:
    return json.dumps(value, indent=4, sort_keys=True, ensure_ascii=False) + "\n"


def _put(path, text) -> bool:
    """Replace the file with text unless it holds it already; whether it changed."""
    data = text.encode("utf-8")
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    except FileNotFoundError:
        pass
    atomicfile.replace(path, data, mode=0o644)
    return True


def write_row(directory, switch, row) -> bool:
    """The switch's line; whether it changed."""
    os.makedirs(os.path.join(directory, SWITCHES), exist_ok=True)
    return _put(os.path.join(directory, SWITCHES, "%s.json" % switch), _json(row))


def _run_order(row):
    # The switches of one batch start together, each on its own worker: their start times come
    # in any order, their places in the run do not.
    position = row.get("position")
    return (position if isinstance(position, int) else float("inf"), row.get("started_at") or 0)


def rows(directory) -> list:
    """Every switch's line written so far, in the run's order of the switches."""
    found = []
    for path in glob.glob(os.path.join(glob.escape(directory), SWITCHES, "*.json")):
        with open(path, encoding="utf-8") as f:
            found.append(json.load(f))
    return sorted(found, key=_run_order)


def write_report(directory):
    """(rows, table, changed): report.json and report.txt from every switch's line."""
    lines = rows(directory)
    table = report.render(lines)
    changed = _put(os.path.join(directory, "report.json"), _json(lines))
    changed = _put(os.path.join(directory, "report.txt"), table + "\n") or changed
    return lines, table, changed
