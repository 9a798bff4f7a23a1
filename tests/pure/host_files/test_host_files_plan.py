"""host_files' plan: every entry checked, and refused naming it, before anything is changed;
only what differs is planned; a file whose content differs and was not sent is named in
need_content. (Reads metadata and digests only: no root needed; tests/kernel/host_files
writes for real.)"""

from __future__ import annotations

import hashlib
import os

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils import host_files
from ansible_collections.edgeft.failover.plugins.module_utils.host_files import HostFilesError


def entry(dest, data=b"text\n", mode="0644", send=False):
    found = {"dest": str(dest), "mode": mode, "sha256": hashlib.sha256(data).hexdigest()}
    if send:
        import base64
        found["content_base64"] = base64.b64encode(data).decode()
    return found


@pytest.mark.parametrize("bad, message", [
    ({"files": [{"dest": "relative/path", "sha256": "0" * 64}]}, "files[0].dest: 'relative/path' must be a normalised absolute path"),
    ({"files": [{"dest": "/a/../b", "sha256": "0" * 64}]}, "files[0].dest: '/a/../b' must be a normalised absolute path"),
    ({"files": [{"dest": "/x", "sha256": "0" * 64, "mode": 420}]}, "files[0].mode: 420 must be an octal mode as a quoted string"),
    ({"files": [{"dest": "/x", "sha256": "0" * 64, "mode": "4755"}]}, "files[0].mode: '4755' must be an octal mode"),
    ({"files": [{"dest": "/x", "sha256": "abc"}]}, "files[0].sha256: 'abc' must be 64 lower-case hex digits"),
    ({"files": [{"dest": "/x", "sha256": "0" * 64, "content_base64": "not base64!"}]}, "files[0].content_base64: must be base64"),
    ({"files": [{"dest": "/x", "sha256": "0" * 64, "content_base64": "dGV4dAo="}]}, "files[0].content_base64: does not match files[0].sha256"),
    ({"directories": [{"path": "/d", "mode": "999"}]}, "directories[0].mode: '999' must be an octal mode"),
    ({"links": [{"dest": "/l", "src": ""}]}, "links[0].src: the link's target is required"),
    ({"directories": [{"path": "/same"}], "links": [{"dest": "/same", "src": "/x"}]}, "links[0].dest: /same is also directories[0]"),
    ({"files": ["/x"]}, "files[0]: must be a dict"),
])
def test_bad_entries_are_refused_naming_the_option(bad, message):
    with pytest.raises(HostFilesError) as err:
        host_files.plan(**bad)
    assert message in str(err.value)


def test_what_the_host_holds_in_the_way_is_refused(tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    cases = [
        ({"files": [entry(tmp_path / "dir")]}, "files[0].dest: %s is a directory on the host" % (tmp_path / "dir")),
        ({"directories": [{"path": str(tmp_path / "file")}]}, "exists on the host and is not a directory"),
        ({"links": [{"dest": str(tmp_path / "file"), "src": "/x"}]}, "exists on the host and is not a link"),
        ({"files": [entry(tmp_path / "file" / "below")]}, "%s is not a directory on the host" % (tmp_path / "file")),
    ]
    os.mkfifo(tmp_path / "fifo")
    cases.append(({"files": [entry(tmp_path / "fifo")]}, "is not a regular file"))
    for args, message in cases:
        with pytest.raises(HostFilesError) as err:
            host_files.plan(**args)
        assert message in str(err.value), args


def test_only_what_differs_is_planned_and_unsent_content_is_asked_for(tmp_path):
    same, other = tmp_path / "same", tmp_path / "other"
    same.write_bytes(b"text\n")
    other.write_bytes(b"old\n")
    os.symlink("/target", tmp_path / "link")
    uid = os.geteuid()
    changes = host_files.plan(
        files=[entry(same), entry(other), entry(tmp_path / "new" / "file", send=True)],
        links=[{"dest": str(tmp_path / "link"), "src": "/target"}, {"dest": str(tmp_path / "link2"), "src": "/t"}])
    planned = host_files.changed_paths(changes)
    # A file with the same bytes differs only if it is not root's with its mode.
    assert (str(same) in planned) == (uid != 0 or (same.stat().st_mode & 0o777) != 0o644)
    assert str(other) in planned and str(tmp_path / "new" / "file") in planned
    assert str(tmp_path / "link") not in planned and str(tmp_path / "link2") in planned
    assert changes["need_content"] == [str(other)]


def test_the_diff_shows_text_and_summarises_binary(tmp_path):
    old = tmp_path / "old"
    old.write_bytes(b"before\n")
    diff = host_files.diff(host_files.plan(files=[entry(old, b"after\n")],
                                           links=[{"dest": str(tmp_path / "l"), "src": "/t"}],
                                           directories=[{"path": str(tmp_path / "d")}]))
    assert {"before_header": str(tmp_path / "d") + "/", "after_header": str(tmp_path / "d") + "/",
            "before": "", "after": "directory, mode 0755, owner root\n"} in diff
    assert {"before_header": str(old), "after_header": str(old), "before": "before\n", "after": None} in diff
    assert {"before_header": str(tmp_path / "l"), "after_header": str(tmp_path / "l"), "before": "", "after": "-> /t\n"} in diff
    assert host_files.describe(b"\x7fELF\0\1") == "(6 bytes, sha256 %s)\n" % hashlib.sha256(b"\x7fELF\0\1").hexdigest()
    assert host_files.describe(b"x" * (host_files.DIFF_TEXT_LIMIT + 1)).startswith("(%d bytes" % (host_files.DIFF_TEXT_LIMIT + 1))
    assert host_files.describe(None) == ""
