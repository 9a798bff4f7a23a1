"""The network_persist role, run for real by ansible-playbook against localhost into scratch roots.

Each scratch root stands for a system image: it holds what the role looks for (the renderer's
program and enabled-unit link, /etc/network/interfaces, ...) as empty placeholders, since the
role only checks that they exist, and the role writes into it what that system would boot
with. Per renderer: check mode changes nothing, a real run writes exactly the reviewed
expected files (tests/data/persist/expected) with their modes, a second run changes nothing;
a smaller plan or another renderer removes the files that are no longer needed; and every
refusal happens before anything is written, naming the option to change.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess

import pytest

import persist_render as rendering

REPO = rendering.ROLE.parents[1]
RECAP = re.compile(r"^localhost\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
PLAYBOOK = """
- name: Persist a network plan
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Persist
      ansible.builtin.include_role:
        name: edgeft.failover.network_persist
"""
NETWORKD = ["lib/systemd/systemd-networkd", "usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-255.so"]
FIXTURES = {
    "networkd": (NETWORKD, [("etc/systemd/system/multi-user.target.wants/systemd-networkd.service", "/lib/systemd/system/systemd-networkd.service")], {}),
    "ifupdown": (["sbin/ifup", "etc/network/if-pre-up.d/ifenslave"], [],
                 {"etc/network/interfaces": "auto lo\niface lo inet loopback\n\nsource /etc/network/interfaces.d/*\n"}),
    "networkmanager": (["usr/sbin/NetworkManager"], [("etc/systemd/system/multi-user.target.wants/NetworkManager.service",
                                                      "/lib/systemd/system/NetworkManager.service")], {}),
    "netplan": (["usr/sbin/netplan"] + NETWORKD, [], {}),
}


def make_system(root, *renderers):
    """A scratch root holding what `renderers` look like when installed (and enabled)."""
    for renderer in renderers:
        files, links, texts = FIXTURES[renderer]
        for rel in files:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text("")
        for rel, target in links:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            if not (root / rel).is_symlink():
                (root / rel).symlink_to(target)
        for rel, text in texts.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
    root.mkdir(parents=True, exist_ok=True)
    return root


def written(root):
    """{path: text} of the files edgeft wrote under root (its prefix), with their modes."""
    out = {}
    for path in sorted(root.rglob("*60-edgeft*")):
        if path.is_file():
            out[str(path.relative_to(root))] = (path.read_text(), "%04o" % stat.S_IMODE(path.stat().st_mode))
    return out


def expected(plan_name, renderer):
    """The reviewed expected files, with the mode each must have (NetworkManager and netplan want 0600)."""
    files = rendering.read_tree(rendering.expected_dir(plan_name, renderer))
    return {path: (text, "0600" if path.endswith(".nmconnection") or path.startswith("etc/netplan/") else "0644")
            for path, text in files.items()}


def play(tmp_path, root, plan, renderer, *options, gaps="fail", prefix=None):
    """Run the role; (returncode, output, changed count)."""
    variables = {"network_persist_plan": plan, "network_persist_root": str(root), "network_persist_renderer": renderer,
                 "network_persist_gaps": gaps}
    if prefix is not None:
        variables["network_persist_file_prefix"] = prefix
    (tmp_path / "vars.json").write_text(json.dumps(variables))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    proc = subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", "-e", "@%s" % (tmp_path / "vars.json"),
                           str(tmp_path / "play.yml")] + list(options),
                          cwd=REPO, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1"))
    out = proc.stdout + proc.stderr
    recap = RECAP.search(out)
    return proc.returncode, out, int(recap.group(2)) if recap else None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.geteuid() != 0, reason="the role writes root-owned files (owner root)")]


@pytest.mark.parametrize("renderer", rendering.RENDERERS)
def test_check_write_idempotent(tmp_path, renderer):
    root = make_system(tmp_path / "root", renderer)
    plan = rendering.load_plan("fabric")
    gaps = "warn" if renderer == "netplan" else "fail"  # netplan cannot express the multipath route and rto_min
    before = sorted(str(p) for p in root.rglob("*"))

    rc, out, changed = play(tmp_path, root, plan, renderer, "--check", "--diff", gaps=gaps)
    assert rc == 0, out
    assert changed > 0
    assert sorted(str(p) for p in root.rglob("*")) == before, "check mode wrote into the root"

    rc, out, changed = play(tmp_path, root, plan, renderer, "--diff", gaps=gaps)
    assert rc == 0, out
    assert written(root) == expected("fabric", renderer)
    if renderer == "netplan":
        assert "not persisted by netplan: plan.interfaces[0].routes[3] (fab0 198.18.3.0/24): netplan has no multipath routes" in out

    rc, out, changed = play(tmp_path, root, plan, renderer, "--diff", gaps=gaps)
    assert rc == 0, out
    assert changed == 0, out


def test_stale_files_and_renderer_changes(tmp_path):
    root = make_system(tmp_path / "root", "networkd", "ifupdown")
    rc, out, _changed = play(tmp_path, root, rendering.load_plan("fabric"), "networkd")
    assert rc == 0, out
    assert written(root) == expected("fabric", "networkd")

    # Check mode over existing files shows the change and writes nothing.
    rc, out, changed = play(tmp_path, root, rendering.load_plan("lacp"), "networkd", "--check", "--diff")
    assert rc == 0 and changed > 0, out
    assert written(root) == expected("fabric", "networkd")
    assert "+Name=bond1" in out and "60-edgeft-fab0.network" in out

    # A smaller plan: the files of interfaces it no longer has go, and the sysctl file it does not need.
    rc, out, changed = play(tmp_path, root, rendering.load_plan("lacp"), "networkd")
    assert rc == 0 and changed > 0, out
    assert written(root) == expected("lacp", "networkd")

    # Another renderer: edgeft's networkd files go, the ifupdown ones come; a file someone else wrote stays.
    (root / "etc/network/interfaces.d").mkdir(parents=True)
    (root / "etc/network/interfaces.d/50-mgmt").write_text("auto mgmt0\n")
    rc, out, _changed = play(tmp_path, root, rendering.load_plan("fabric"), "ifupdown")
    assert rc == 0, out
    assert written(root) == expected("fabric", "ifupdown")
    assert (root / "etc/network/interfaces.d/50-mgmt").read_text() == "auto mgmt0\n"

    # none: only the sysctl file is left.
    rc, out, _changed = play(tmp_path, root, rendering.load_plan("fabric"), "none")
    assert rc == 0, out
    assert list(written(root)) == ["etc/sysctl.d/60-edgeft.conf"]


def test_auto_detects_the_renderer(tmp_path):
    root = make_system(tmp_path / "root", "networkd", "ifupdown")  # networkd enabled comes before ifupdown
    rc, out, _changed = play(tmp_path, root, rendering.load_plan("fabric"), "auto")
    assert rc == 0, out
    assert written(root) == expected("fabric", "networkd")


REFUSALS = [
    ("auto", [], {}, "network_persist_renderer=auto found no network configuration system under {root} (netplan: not installed"
                     " (package netplan.io); networkmanager: not installed (package network-manager); networkd: not installed"
                     " (package systemd); ifupdown: /etc/network/interfaces does not exist). Set network_persist_renderer to"
                     " networkd, ifupdown, networkmanager or netplan (or none to write only the sysctl file)."),
    ("networkmanager", [], {}, "network_persist_renderer=networkmanager: networkmanager is not installed under {root}"
                               " (none of /usr/sbin/NetworkManager): install the package network-manager, or choose another renderer"),
    ("ifupdown", ["ifupdown"], {"etc/network/if-pre-up.d/ifenslave": None},
     "network_persist_renderer=ifupdown: ifupdown sets up bonds through ifenslave's hooks, which are not installed: install the package ifenslave"),
    ("networkd", ["networkd"], {"usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-255.so": None,
                                "usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-252.so": ""},
     "networkd cannot persist all of the plan, so a reboot would not restore it: plan.interfaces[0].routes[3] (fab0 198.18.3.0/24):"
     " rto_min 20 ms: systemd-networkd 252 has no per-route RTO minimum"),
]


@pytest.mark.parametrize("renderer, installed, change, message", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refusals_before_writing(tmp_path, renderer, installed, change, message):
    root = make_system(tmp_path / "root", *installed)
    for rel, text in change.items():
        if text is None:
            (root / rel).unlink()
        else:
            (root / rel).write_text(text)
    rc, out, _changed = play(tmp_path, root, rendering.load_plan("fabric"), renderer)
    assert rc != 0
    assert message.format(root=root) in " ".join(out.split()), out
    assert written(root) == {}


def test_refused_plan_names_the_option(tmp_path):
    root = make_system(tmp_path / "root", "networkd")
    plan = rendering.load_plan("fabric")
    plan["interfaces"][0]["routes"][0]["dst"] = "198.18.1.0/16"
    rc, out, _changed = play(tmp_path, root, plan, "networkd")
    assert rc != 0
    assert "network_persist_plan (or network_persist_root): plan.interfaces[0].routes[0].dst: '198.18.1.0/16' is not an IP prefix" in out
    rc, out, _changed = play(tmp_path, root, rendering.load_plan("fabric"), "networkd", prefix="60 edgeft*")
    assert rc != 0 and "network_persist_file_prefix: \"60 edgeft*\" must consist of letters, digits, _ and -" in out
    assert written(root) == {}
