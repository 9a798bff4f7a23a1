"""uninstall/paths.py (the remove_paths module): edgeft's paths go with their contents, a link only
when it points where edgeft made it point, then the directories that leaves empty; bad options are
refused before anything is removed; check mode removes nothing. In a temporary directory, no root."""

from __future__ import annotations

import os

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.uninstall import paths


def run(params, check_mode=False):
    return paths.run(dict({"paths": [], "links": [], "empty_dirs": []}, **params), check_mode)[0]


def tree(root):
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, dirs, files in os.walk(root) for n in dirs + files)


@pytest.fixture
def host(tmp_path):
    """/usr/local/lib/edgeft/{agent,bpf}, /etc/edgeft/agent.json, a state directory and the agent's
    link, as a deployment leaves them, under tmp_path."""
    for rel in ("usr/local/lib/edgeft/agent/edgeft_agent", "usr/local/lib/edgeft/bpf", "etc/edgeft", "var/lib/edgeft",
                "usr/local/sbin"):
        (tmp_path / rel).mkdir(parents=True)
    (tmp_path / "usr/local/lib/edgeft/agent/edgeft_agent/agent.py").write_text("x")
    (tmp_path / "etc/edgeft/agent.json").write_text("{}")
    (tmp_path / "var/lib/edgeft/peer_table.json").write_text("{}")
    os.symlink(str(tmp_path / "usr/local/lib/edgeft/agent/edgeft-agent"), str(tmp_path / "usr/local/sbin/edgeft-agent"))
    return tmp_path


def params(root):
    return {
        "paths": [str(root / p) for p in ("usr/local/lib/edgeft/agent", "usr/local/lib/edgeft/bpf", "etc/edgeft/agent.json",
                                          "var/lib/edgeft")],
        "links": [{"path": str(root / "usr/local/sbin/edgeft-agent"), "target": str(root / "usr/local/lib/edgeft/agent/edgeft-agent")}],
        "empty_dirs": [str(root / "usr/local/lib/edgeft"), str(root / "etc/edgeft")],
    }


def test_everything_goes_in_one_run_and_a_second_run_changes_nothing(host):
    before = tree(host)
    preview = run(params(host), check_mode=True)
    assert tree(host) == before  # check mode removed nothing
    result = run(params(host))
    assert result["removed"] == preview["removed"] == [str(host / p) for p in (
        "usr/local/lib/edgeft/agent", "usr/local/lib/edgeft/bpf", "etc/edgeft/agent.json", "var/lib/edgeft",
        "usr/local/sbin/edgeft-agent", "usr/local/lib/edgeft", "etc/edgeft")]
    assert result["changed"] and result["kept"] == []
    assert tree(host) == ["etc", "usr", "usr/local", "usr/local/lib", "usr/local/sbin", "var", "var/lib"]
    again = run(params(host))
    assert not again["changed"] and again["removed"] == []


def test_what_is_not_edgefts_stays(host):
    """A link of that name pointing elsewhere, and a directory that holds anything else."""
    os.unlink(host / "usr/local/sbin/edgeft-agent")
    os.symlink("/opt/other/edgeft-agent", str(host / "usr/local/sbin/edgeft-agent"))
    (host / "etc/edgeft/local.conf").write_text("mine")
    result = run(params(host))
    assert str(host / "usr/local/sbin/edgeft-agent") not in result["removed"]
    assert os.readlink(host / "usr/local/sbin/edgeft-agent") == "/opt/other/edgeft-agent"
    assert result["kept"] == [str(host / "etc/edgeft")] and (host / "etc/edgeft/local.conf").exists()
    assert not (host / "usr/local/lib/edgeft").exists()


@pytest.mark.parametrize("option, value, message", [
    ("paths", ["relative/path"], "paths[0]: 'relative/path' must be a normalised absolute path"),
    ("paths", ["/etc/../etc/edgeft"], "paths[0]: '/etc/../etc/edgeft' must be a normalised absolute path"),
    ("paths", ["/etc"], "paths[0]: '/etc' is too close to the root to remove"),
    ("paths", ["/"], "paths[0]: '/' is too close to the root to remove"),
    ("empty_dirs", ["/usr"], "empty_dirs[0]: '/usr' is too close to the root to remove"),
    ("links", [{"path": "/usr/local/sbin/x"}], "links[0]: must be a dict with path and target"),
    ("links", [{"path": "/sbin", "target": "/x"}], "links[0].path: '/sbin' is too close to the root to remove"),
])
def test_bad_options_are_refused_before_anything_goes(host, option, value, message):
    before = tree(host)
    bad = dict(params(host), **{option: value})
    with pytest.raises(paths.PathsError) as err:
        run(bad)
    assert str(err.value).startswith(message)
    assert tree(host) == before
