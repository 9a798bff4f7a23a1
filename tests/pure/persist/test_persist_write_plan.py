"""persist/write.py: which paths are edgeft's to write, and what a run would change.

Writing itself (root-owned files, atomic replace, the rollback) is in
tests/kernel/persist/test_persist_files_written.py, since it needs root.
"""

from __future__ import annotations

import re

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.persist import write
from ansible_collections.edgeft.failover.plugins.module_utils.persist.plan import PlanError

NETWORK = "etc/systemd/network/60-edgeft-fab0.network"
SYSCTL = "etc/sysctl.d/60-edgeft.conf"


def entry(path, content="x\n", mode="0644"):
    return {"path": path, "content": content, "mode": mode}


@pytest.mark.parametrize("path, message", [
    ("etc/passwd", "files[0].path: 'etc/passwd' is not one of edgeft's file names for the prefix '60-edgeft'"),
    ("etc/sysctl.d/99-other.conf", "files[0].path: 'etc/sysctl.d/99-other.conf' is not one of edgeft's file names"),
    ("/etc/sysctl.d/60-edgeft.conf", "files[0].path: '/etc/sysctl.d/60-edgeft.conf' must be a normalised path relative to the root"),
    ("etc/sysctl.d/../60-edgeft.conf", "must be a normalised path relative to the root"),
    ("../etc/sysctl.d/60-edgeft.conf", "must be a normalised path relative to the root"),
])
def test_only_edgeft_paths_are_accepted(tmp_path, path, message):
    with pytest.raises(PlanError, match=re.escape(message)):
        write.changes(str(tmp_path), "60-edgeft", [entry(path)])


@pytest.mark.parametrize("bad, message", [
    ({"path": SYSCTL, "content": 3, "mode": "0644"}, "files[0].content: must be a string"),
    ({"path": SYSCTL, "content": "", "mode": "0777"}, "files[0].mode: '0777' must be one of 0644, 0600"),
    ({"path": SYSCTL, "content": "", "owner": "nobody"}, "files[0]: must be a dict with path, content and mode"),
])
def test_bad_entries_name_the_option(tmp_path, bad, message):
    with pytest.raises(PlanError) as err:
        write.changes(str(tmp_path), "60-edgeft", [bad])
    assert str(err.value) == message


def test_a_path_given_twice_and_a_bad_prefix_are_refused(tmp_path):
    with pytest.raises(PlanError, match=r"files\[1\].path: .* is given twice"):
        write.changes(str(tmp_path), "60-edgeft", [entry(SYSCTL), entry(SYSCTL)])
    with pytest.raises(PlanError, match="prefix: '60 edgeft' must consist of letters"):
        write.changes(str(tmp_path), "60 edgeft", [])


def test_changes_name_new_directories_changed_files_and_stale_ones(tmp_path):
    (tmp_path / "etc/sysctl.d").mkdir(parents=True)
    (tmp_path / SYSCTL).write_text("old\n")
    (tmp_path / "etc/sysctl.d/99-other.conf").write_text("not ours\n")
    stale = tmp_path / "etc/network/interfaces.d/60-edgeft-fab9"
    stale.parent.mkdir(parents=True)
    stale.write_text("auto fab9\n")

    plan = write.changes(str(tmp_path), "60-edgeft", [entry(NETWORK, "[Match]\n"), entry(SYSCTL, "new\n")])
    assert plan["directories"] == ["etc/systemd/network"]
    written = [(w["path"], w["before"]) for w in plan["write"]]
    assert written == [(str(tmp_path / NETWORK), None), (str(tmp_path / SYSCTL), "old\n")]
    assert plan["remove"] == [str(stale)]

    diffs = write.diff(plan)
    assert diffs[1] == {"before_header": str(tmp_path / SYSCTL), "after_header": str(tmp_path / SYSCTL),
                        "before": "old\n", "after": "new\n"}
    assert diffs[2]["before"] == "auto fab9\n" and diffs[2]["after"] == ""
