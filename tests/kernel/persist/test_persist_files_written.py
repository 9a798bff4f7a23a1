"""persist/write.py writing for real: root-owned files with their modes, 0755 directories,
stale files removed, and on a failure half-way everything put back as it was."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import subprocess

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.persist import write
from ansible_collections.edgeft.failover.plugins.module_utils.persist.plan import PlanError

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="writes root-owned files")

NETWORK = "etc/systemd/network/60-edgeft-fab0.network"
NMCONNECTION = "etc/NetworkManager/system-connections/60-edgeft-fab0.nmconnection"
SYSCTL = "etc/sysctl.d/60-edgeft.conf"


def test_apply_writes_exactly_the_set_and_a_second_pass_changes_nothing(tmp_path):
    (tmp_path / "etc/sysctl.d").mkdir(parents=True)
    (tmp_path / SYSCTL).write_text("old\n")
    os.chmod(tmp_path / SYSCTL, 0o600)
    stale = tmp_path / "etc/systemd/network/60-edgeft-fab9.network"
    wanted = [{"path": NETWORK, "content": "[Match]\nName=fab0\n", "mode": "0644"},
              {"path": NMCONNECTION, "content": "[connection]\n", "mode": "0600"},
              {"path": SYSCTL, "content": "net.ipv4.conf.fab0.rp_filter = 2\n", "mode": "0644"}]
    old = os.umask(0o077)
    try:
        write.apply(str(tmp_path), write.changes(str(tmp_path), "60-edgeft", wanted[:1]))
        stale.write_text("[Match]\n")
        plan = write.changes(str(tmp_path), "60-edgeft", wanted)
        write.apply(str(tmp_path), plan)
    finally:
        os.umask(old)
    assert plan["remove"] == [str(stale)] and not stale.exists()
    for item in wanted:
        status = (tmp_path / item["path"]).stat()
        assert (tmp_path / item["path"]).read_text() == item["content"]
        assert "%04o" % stat.S_IMODE(status.st_mode) == item["mode"] and (status.st_uid, status.st_gid) == (0, 0)
    for directory in ("etc/systemd", "etc/systemd/network", "etc/NetworkManager", "etc/NetworkManager/system-connections"):
        assert stat.S_IMODE((tmp_path / directory).stat().st_mode) == 0o755, directory
    assert write.changes(str(tmp_path), "60-edgeft", wanted) == {"directories": [], "write": [], "remove": [], "rmdirs": []}


def run(root, state, files, check_mode=False, prefix="60-edgeft"):
    return write.run({"root": str(root), "prefix": prefix, "state_dir": str(state), "files": files}, check_mode)[0]


def test_the_directories_it_created_go_with_the_last_file_and_others_stay(tmp_path):
    """A renderer's directory missing on the host is created, recorded in the state directory and
    removed by the run that empties it; a directory that was there, or that holds something else,
    stays; check mode and a second run change nothing."""
    root, state = tmp_path / "root", tmp_path / "state"
    (root / "etc/sysctl.d").mkdir(parents=True)  # the distribution's
    wanted = [{"path": NETWORK, "content": "[Match]\nName=fab0\n", "mode": "0644"},
              {"path": SYSCTL, "content": "net.ipv4.conf.fab0.rp_filter = 2\n", "mode": "0644"},
              {"path": "etc/systemd/network/61-edgeft-bond-bond0.netdev", "content": "[NetDev]\n", "mode": "0644"}]
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    assert run(root, state, wanted[:2])["directories"] == ["etc/systemd/network"]
    run(root, state, wanted[2:], prefix="61-edgeft-bond")  # a second prefix into the same directory
    record = json.loads((state / write.RECORD).read_text())
    assert record == {"version": write.RECORD_VERSION, "roots": {str(root): ["etc/systemd", "etc/systemd/network"]}}
    # Removing the first prefix's files leaves the second's: the directory stays.
    result = run(root, state, [])
    assert result["removed_directories"] == [] and (root / "etc/systemd/network").is_dir()
    preview = run(root, state, [], check_mode=True, prefix="61-edgeft-bond")
    assert preview["changed"] and preview["removed_directories"] == [str(root / "etc/systemd/network"), str(root / "etc/systemd")]
    assert (root / "etc/systemd/network").is_dir()  # check mode changed nothing
    result = run(root, state, [], prefix="61-edgeft-bond")
    assert result["removed_directories"] == preview["removed_directories"]
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == before
    assert json.loads((state / write.RECORD).read_text())["roots"] == {}
    assert not run(root, state, [], prefix="61-edgeft-bond")["changed"]
    # A created directory that holds something else by then stays, and stays recorded.
    run(root, state, wanted[:1])
    (root / "etc/systemd/network/10-mgmt.network").write_text("[Match]\n")
    assert run(root, state, [])["removed_directories"] == []
    assert (root / "etc/systemd/network/10-mgmt.network").exists()
    assert json.loads((state / write.RECORD).read_text())["roots"][str(root)] == ["etc/systemd", "etc/systemd/network"]


@contextlib.contextmanager
def small_filesystem(path, size):
    """A tmpfs of `size` at path, so that a write runs out of space for real."""
    path.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%s,mode=0755" % size, "edgeft-test", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_failure_half_way_puts_everything_back(tmp_path):
    with small_filesystem(tmp_path / "root", "16k") as root:
        (root / "etc/sysctl.d").mkdir(parents=True)
        (root / SYSCTL).write_text("old\n")
        os.chmod(root / SYSCTL, 0o644)
        before = {str(p): p.read_text() if p.is_file() else None for p in root.rglob("*")}
        # Four pages: the first two files fit, the third (three pages) does not.
        plan = write.changes(str(root), "60-edgeft", [
            {"path": NMCONNECTION, "content": "[connection]\n", "mode": "0600"},
            {"path": SYSCTL, "content": "new\n", "mode": "0644"},
            {"path": NETWORK, "content": "#" * 12288, "mode": "0644"},
        ])
        with pytest.raises(OSError) as err:
            write.apply(str(root), plan)
        assert err.value.errno == errno.ENOSPC
        assert {str(p): p.read_text() if p.is_file() else None for p in root.rglob("*")} == before


def test_a_directory_in_the_way_is_refused_before_any_change(tmp_path):
    (tmp_path / NETWORK).mkdir(parents=True)
    with pytest.raises(PlanError, match=r"files\[0\].path: .*60-edgeft-fab0.network is a directory on the host"):
        write.changes(str(tmp_path), "60-edgeft", [{"path": NETWORK, "content": "", "mode": "0644"}])
