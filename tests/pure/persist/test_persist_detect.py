"""Renderer detection and the network_renderer_info module.

Detection reads a system's files under a root. The roots here are scratch directories holding
what an installed system would (program files, enabled-unit links, /etc/netplan, the ifupdown
interfaces file); the programs are empty placeholders, since detection only looks for them.
The module runs as Ansible runs it: a separate Python process reading its arguments file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import persist_render as rendering

from ansible_collections.edgeft.failover.plugins.module_utils.persist import detect


def make_root(tmp_path, *paths, links=(), texts=None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    for rel in paths:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    for rel, target in links:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)
    for rel, text in (texts or {}).items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(tmp_path)


NETWORKD = "lib/systemd/systemd-networkd"
NETWORKD_ENABLED = ("etc/systemd/system/multi-user.target.wants/systemd-networkd.service", "/lib/systemd/system/systemd-networkd.service")
NM = "usr/sbin/NetworkManager"
NM_ENABLED = ("etc/systemd/system/multi-user.target.wants/NetworkManager.service", "/lib/systemd/system/NetworkManager.service")
IFUPDOWN = {"sbin/ifup": "", "etc/network/interfaces": "auto lo\niface lo inet loopback\nsource /etc/network/interfaces.d/*\n"}


def choose(root):
    return detect.choose(detect.probe(root, ["fab0", "fab1"]))


def test_nothing_found(tmp_path):
    renderer, reasons = choose(make_root(tmp_path))
    assert renderer is None
    assert reasons == ["netplan: not installed (package netplan.io)", "networkmanager: not installed (package network-manager)",
                       "networkd: not installed (package %s)" % detect.PACKAGES["networkd"], "ifupdown: /etc/network/interfaces does not exist"]


def test_netplan_with_files_comes_first(tmp_path):
    root = make_root(tmp_path, "usr/sbin/netplan", "etc/netplan/01-netcfg.yaml", NETWORKD, NM, links=[NETWORKD_ENABLED, NM_ENABLED], texts=IFUPDOWN)
    assert choose(root) == ("netplan", ["netplan: /etc/netplan holds /etc/netplan/01-netcfg.yaml"])


def test_netplan_without_files_is_passed_over(tmp_path):
    root = make_root(tmp_path, "usr/sbin/netplan", NETWORKD, links=[NETWORKD_ENABLED])
    renderer, reasons = choose(root)
    assert renderer == "networkd"
    assert reasons[0] == "netplan: /etc/netplan holds no YAML file"


def test_networkmanager_enabled_before_networkd(tmp_path):
    root = make_root(tmp_path, NETWORKD, NM, links=[NETWORKD_ENABLED, NM_ENABLED])
    assert choose(root)[0] == "networkmanager"


def test_networkmanager_installed_but_not_enabled(tmp_path):
    root = make_root(tmp_path, NETWORKD, NM, links=[NETWORKD_ENABLED])
    renderer, reasons = choose(root)
    assert renderer == "networkd"
    assert "networkmanager: installed but neither running nor enabled" in reasons


def test_ifupdown_last(tmp_path):
    root = make_root(tmp_path, NETWORKD, texts=IFUPDOWN)
    renderer, reasons = choose(root)
    assert renderer == "ifupdown"
    assert "networkd: installed but neither running nor enabled" in reasons


def test_ifupdown_file_without_ifupdown(tmp_path):
    root = make_root(tmp_path, texts={"etc/network/interfaces": "auto lo\n"})
    renderer, reasons = choose(root)
    assert renderer is None
    assert reasons[-1] == "ifupdown: /etc/network/interfaces exists but ifupdown is not installed (package ifupdown)"


def test_facts_under_a_root(tmp_path):
    root = make_root(tmp_path, NETWORKD, "usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-255.so", "etc/network/if-pre-up.d/ifenslave",
                     texts={"etc/network/interfaces": "source-directory interfaces.d\n"})
    facts = detect.probe(root)
    assert facts["networkd"]["version"] == 255
    assert facts["networkd"]["active"] is None  # only asked of the running system
    assert facts["ifupdown"] == dict(facts["ifupdown"], interfaces_file=True, sources_interfaces_d=True, ifenslave=True, installed=False)
    facts = detect.probe(make_root(tmp_path / "other", texts={"etc/network/interfaces": "auto lo\n"}))
    assert facts["ifupdown"]["sources_interfaces_d"] is False and facts["networkd"]["version"] is None


@pytest.mark.skipif(not os.access("/lib/systemd/systemd-networkd", os.X_OK), reason="systemd-networkd is missing (package systemd)")
def test_this_machine():
    """Read-only look at the machine itself: networkd's version from the program."""
    facts = detect.probe("/")
    assert facts["networkd"]["installed"] and facts["networkd"]["version"] >= 240


def run_module(args, tmp_path):
    """The module's result, run as Ansible runs it: a separate process reading its arguments file."""
    args_file = tmp_path / "module-args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    # The directory holding ansible_collections/edgeft/failover: a checkout's .build/collections, or a sanity mirror's root.
    repo = rendering.ROLE.parents[1]
    collections = repo.parents[2] if repo.parent.parent.name == "ansible_collections" else repo / ".build" / "collections"
    env = dict(os.environ, PYTHONPATH=str(collections))
    proc = subprocess.run([sys.executable, "-m", "ansible_collections.edgeft.failover.plugins.modules.network_renderer_info", str(args_file)],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout)


def test_module_reports_renderer_gaps_and_plan(tmp_path):
    root = make_root(tmp_path, NETWORKD, "usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-252.so", links=[NETWORKD_ENABLED])
    result = run_module({"root": root, "plan": rendering.load_plan("fabric"), "warn_gaps": True}, tmp_path)
    assert not result.get("failed"), result
    assert (result["renderer"], result["requested"], result["problems"], result["changed"]) == ("networkd", "auto", [], False)
    assert len(result["gaps"]) == 2 and all("rto_min 20 ms" in g for g in result["gaps"])
    # Warnings are events in the module's result since ansible-core 2.19 (plain strings before).
    warnings = [w["event"]["msg"] if isinstance(w, dict) else w for w in result["warnings"]]
    assert [w for w in warnings if w.startswith("not persisted by networkd: plan.interfaces[")] == ["not persisted by networkd: " + g for g in result["gaps"]]
    assert result["plan"]["interfaces"][2]["ports"] == ["fab2", "fab3"]


def test_module_names_the_package_of_a_missing_renderer(tmp_path):
    result = run_module({"root": make_root(tmp_path / "root"), "renderer": "networkmanager", "plan": rendering.load_plan("fabric")}, tmp_path)
    assert result["renderer"] == "networkmanager"
    assert result["problems"] == ["networkmanager is not installed under %s (none of /usr/sbin/NetworkManager): install the package"
                                  " network-manager, or choose another renderer" % (tmp_path / "root")]


def test_module_requires_ifupdown_to_read_interfaces_d_and_ifenslave_for_bonds(tmp_path):
    root = make_root(tmp_path, "sbin/ifup", texts={"etc/network/interfaces": "auto lo\n"})
    problems = run_module({"root": root, "renderer": "ifupdown", "plan": rendering.load_plan("fabric")}, tmp_path)["problems"]
    assert problems == ["%s/etc/network/interfaces does not include /etc/network/interfaces.d: add the line"
                        " 'source /etc/network/interfaces.d/*' to it" % tmp_path,
                        "ifupdown sets up bonds through ifenslave's hooks, which are not installed: install the package ifenslave"]


def test_module_refuses_a_bad_plan(tmp_path):
    plan = rendering.load_plan("fabric")
    plan["interfaces"][1]["routes"][1]["gateway"] = "fd0e::1"
    result = run_module({"root": make_root(tmp_path), "plan": plan}, tmp_path)
    assert result["failed"] and result["msg"].startswith("plan.interfaces[1].routes[1].gateway: fd0e::1 is IPv6")
    result = run_module({"root": "relative/dir", "plan": {}}, tmp_path)
    assert result["failed"] and result["msg"].startswith("root:")
