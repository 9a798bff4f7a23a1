"""host_files writing for real (root): files, directories and links root-owned with their
modes, a second plan empty; a mode-only change without content; a link at a file's place
replaced; and a failure half-way putting back everything already changed."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import threading

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils import atomicfile, host_files

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="writes root-owned files")


def entry(dest, data, mode="0644"):
    return {"dest": str(dest), "mode": mode, "sha256": hashlib.sha256(data).hexdigest(),
            "content_base64": base64.b64encode(data).decode()}


def owner_mode(path):
    status = os.lstat(path)
    return stat.S_IMODE(status.st_mode), status.st_uid, status.st_gid


def test_apply_installs_everything_root_owned_and_a_second_plan_is_empty(tmp_path):
    agent, conf = tmp_path / "lib/edgeft/agent", tmp_path / "etc/edgeft"
    wanted = dict(
        directories=[{"path": str(agent), "mode": "0755"}, {"path": str(conf), "mode": "0750"}],
        files=[entry(agent / "edgeft-agent", b"#!/usr/bin/python3\n", "0755"),
               entry(agent / "pkg/sub/module.py", b"x = 1\n"),
               entry(agent / "tcp.bpf.o", b"\x7fELF\0binary"),
               entry(conf / "agent.json", b"{}\n", "0600")],
        links=[{"dest": str(tmp_path / "sbin/edgeft-agent"), "src": str(agent / "edgeft-agent")}])
    old = os.umask(0o077)
    try:
        result = host_files.run(wanted, check_mode=False)[0]
    finally:
        os.umask(old)
    assert result["changed"] and result["need_content"] == []
    assert result["changed_paths"][:2] == [str(agent), str(conf)] and result["changed_paths"][-1] == str(tmp_path / "sbin/edgeft-agent")
    assert owner_mode(agent) == (0o755, 0, 0) and owner_mode(conf) == (0o750, 0, 0)
    for parent in (tmp_path / "lib", tmp_path / "lib/edgeft", agent / "pkg", agent / "pkg/sub", tmp_path / "sbin"):
        assert owner_mode(parent) == (0o755, 0, 0), parent  # missing parents: 0755 whatever the umask
    assert owner_mode(agent / "edgeft-agent") == (0o755, 0, 0) and owner_mode(conf / "agent.json") == (0o600, 0, 0)
    assert (agent / "tcp.bpf.o").read_bytes() == b"\x7fELF\0binary" and (agent / "pkg/sub/module.py").read_text() == "x = 1\n"
    assert os.readlink(tmp_path / "sbin/edgeft-agent") == str(agent / "edgeft-agent")
    again = host_files.run(wanted, check_mode=False)[0]
    assert not again["changed"] and again["changed_paths"] == []


def test_check_mode_and_unsent_content_change_nothing(tmp_path):
    target = tmp_path / "file"
    target.write_bytes(b"old\n")
    unsent = {"dest": str(target), "mode": "0644", "sha256": hashlib.sha256(b"new\n").hexdigest()}
    for params, check_mode in (({"files": [entry(target, b"new\n")], "directories": [{"path": str(tmp_path / "d")}]}, True),
                               ({"files": [unsent], "directories": [{"path": str(tmp_path / "d")}]}, False)):
        result = host_files.run(params, check_mode=check_mode)[0]
        assert result["changed"] and str(target) in result["changed_paths"]
        assert target.read_bytes() == b"old\n" and not (tmp_path / "d").exists()
    assert result["need_content"] == [str(target)]


def test_a_mode_change_needs_no_content_and_a_link_is_replaced_by_the_file(tmp_path):
    kept, linked = tmp_path / "kept", tmp_path / "linked"
    kept.write_bytes(b"same\n")
    os.chmod(kept, 0o600)
    (tmp_path / "elsewhere").write_bytes(b"not edgeft's\n")
    os.symlink(tmp_path / "elsewhere", linked)
    unsent = {"dest": str(kept), "mode": "0644", "sha256": hashlib.sha256(b"same\n").hexdigest()}
    result = host_files.run({"files": [unsent, entry(linked, b"mine\n")]}, check_mode=False)[0]
    assert result["need_content"] == [] and result["changed_paths"] == [str(kept), str(linked)]
    assert owner_mode(kept) == (0o644, 0, 0) and kept.read_bytes() == b"same\n"
    assert not linked.is_symlink() and linked.read_bytes() == b"mine\n"
    assert (tmp_path / "elsewhere").read_bytes() == b"not edgeft's\n"  # the link was replaced, not followed


def test_a_failure_half_way_puts_back_what_was_changed(tmp_path, monkeypatch):
    """The last step (the link) fails, as a full disk or a read-only file system would make it
    (an I/O failure cannot be had on demand here): the files, modes and directories already
    changed go back."""
    existing, mode_only = tmp_path / "existing", tmp_path / "mode_only"
    existing.write_bytes(b"old\n")
    mode_only.write_bytes(b"same\n")
    os.chmod(mode_only, 0o600)
    os.symlink("/old/target", tmp_path / "link")
    before = {p: (p.read_bytes(), owner_mode(p)) for p in (existing, mode_only)}

    def fail(path, target):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(atomicfile, "replace_link", fail)
    params = {"directories": [{"path": str(tmp_path / "new/dir")}],
              "files": [entry(existing, b"new\n"), entry(tmp_path / "made/file", b"x\n"),
                        {"dest": str(mode_only), "mode": "0644", "sha256": hashlib.sha256(b"same\n").hexdigest()}],
              "links": [{"dest": str(tmp_path / "link"), "src": "/new/target"}]}
    with pytest.raises(host_files.HostFilesError) as err:
        host_files.run(params, check_mode=False)
    assert "everything was put back as it was" in str(err.value) and "No space left on device" in str(err.value)
    assert err.value.result["changed"] is False
    assert {p: (p.read_bytes(), owner_mode(p)) for p in (existing, mode_only)} == before
    assert not (tmp_path / "new").exists() and not (tmp_path / "made").exists()
    assert os.readlink(tmp_path / "link") == "/old/target"
    assert sorted(os.listdir(tmp_path)) == ["existing", "link", "mode_only"]


def makedirs_at_once(path, runs=8):
    """atomicfile.makedirs(path) in `runs` threads released together: (their results, errors)."""
    start, results, errors = threading.Barrier(runs), [], []

    def make():
        start.wait()
        try:
            results.append(atomicfile.makedirs(path))
        except OSError as e:
            errors.append(e)
    threads = [threading.Thread(target=make) for _run in range(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


def test_hosts_that_share_a_directory_create_it_at_the_same_time(tmp_path):
    """Lab hosts share one filesystem, and their runs of host_files start together: each creates
    the same missing parents at once. Every run succeeds, and each new directory is claimed, for
    an undo, by exactly the one run that created it (real threads, real mkdir races)."""
    for attempt in range(20):
        base = tmp_path / str(attempt)
        results, errors = makedirs_at_once(str(base / "src" / "host" / "agent"))
        assert errors == []
        assert sorted(d for created in results for d in created) == [
            str(base), str(base / "src"), str(base / "src" / "host"), str(base / "src" / "host" / "agent")]
