"""up / down of every shipped topology, idempotence, and cleanup after failed or killed runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from edgeft_lab import Lab, LabError
from edgeft_lab import cgroups as lab_cgroups
from edgeft_lab import fabric as lab_fabric
from edgeft_lab import netns as lab_netns
from lab_helpers import assert_nothing_left, link_info, needs_root, unique_name
from repo import REPO

pytestmark = needs_root


@pytest.mark.parametrize("topology,hosts,switches", [("default", 4, 6), ("routed", 4, 6), ("flat", 4, 2)])
def test_up_gives_full_reachability_and_down_removes_everything(make_lab, topology, hosts, switches):
    lab = make_lab(topology)
    start = time.monotonic()
    assert lab.up() is True
    took = time.monotonic() - start
    assert took < 5, f"up took {took:.1f} s"
    assert lab.is_up()
    names = [ns for ns in lab_netns.list_all() if ns.startswith(f"{lab.name}-")]
    assert sorted(names) == sorted(lab.plan.namespaces) and len(names) == hosts + switches

    matrix = lab.ping_matrix()
    assert matrix.ok, matrix.format()
    # Every other host, every plane, both families.
    assert len(matrix.results) == hosts * (hosts - 1) * 2 * 2
    assert {(r.plane, r.family) for r in matrix.results} == {("a", 4), ("a", 6), ("b", 4), ("b", 6)}

    # Host NICs carry the planned addresses; nothing is tentative (DAD is off).
    with lab.ipr("r1h1") as sock:
        got = {a.get_attr("IFA_ADDRESS") for a in sock.get_addr() if a["scope"] == 0}
        assert not [a for a in sock.get_addr() if a["flags"] & 0x40]  # IFA_F_TENTATIVE
    port = lab.plan.host("r1h1").port("a")
    assert {str(port.ipv4.ip), str(port.ipv6.ip)} <= got
    assert link_info(lab, "r1h1", "lo")["admin_up"]

    # Routers forward, bridges have no IP presence, hosts never forward.
    router = lab_netns.read_sysctl(lab.netns(lab.plan.switches[0].name), "net.ipv4.ip_forward")
    assert router == ("1" if topology == "routed" else "0")
    assert lab_netns.read_sysctl(lab.netns("r1h1"), "net.ipv4.ip_forward") == "0"
    assert lab_netns.read_sysctl(lab.netns("r1h1"), "net.ipv6.conf.fab0.accept_dad") == "0"

    # The bpffs is visible from inside a host, where `ip netns exec` has remounted /sys.
    pin_root = lab.pin_root("r1h1")
    assert pin_root == Path(f"/run/edgeft-lab/{lab.name}/bpf/r1h1") and pin_root.is_dir()
    fstype = subprocess.run(
        lab.exec_argv("r1h1", ["stat", "-f", "-c", "%T", str(pin_root)]), capture_output=True, text=True, check=True
    )
    assert fstype.stdout.strip() == "bpf_fs"

    # Each host has a cgroup of its own, and what the lab starts in a host runs inside it (the
    # agents' TCP program sees those processes only, never the machine's: lab/cgroups.py).
    own = subprocess.run(lab.exec_argv("r1h1", ["cat", "/proc/self/cgroup"]), capture_output=True, text=True, check=True)
    assert "0::/edgeft-lab-%s/r1h1\n" % lab.name in own.stdout, own.stdout
    assert lab.cgroup("r1h1") == lab_cgroups.host_dir(lab.run_dir, lab.name, "r1h1")
    assert lab.cgroup(lab.plan.switches[0].name) is None
    assert lab.inventory()["all"]["children"]["fabric"]["hosts"]["r1h1"]["edgeft_agent_tcp_cgroup"] == str(lab.cgroup("r1h1"))

    start = time.monotonic()
    assert lab.down() is True
    assert time.monotonic() - start < 5
    assert_nothing_left(lab.name)
    assert lab.down() is False  # idempotent
    assert not lab.is_up()


def test_second_up_is_a_noop_and_another_fabric_is_refused(make_lab):
    lab = make_lab("default")
    assert lab.up() is True
    with lab.ipr("r1h1") as sock:
        index_before = sock.link_lookup(ifname="fab0")[0]
    inode_before = os.stat(lab_netns.path(lab.netns("r1h1"))).st_ino
    assert lab.up() is False
    with lab.ipr("r1h1") as sock:
        assert sock.link_lookup(ifname="fab0")[0] == index_before
    assert os.stat(lab_netns.path(lab.netns("r1h1"))).st_ino == inode_before

    with pytest.raises(LabError, match="already up with a different fabric"):
        Lab("routed", name=lab.name).up()
    assert lab.is_up() and lab.ping_matrix().ok  # untouched


class Boom(RuntimeError):
    pass


def _fail_on_call(monkeypatch, target: object, attribute: str, call: int, exc: BaseException) -> None:
    """Make target.attribute raise exc on its call-th call (the earlier calls work)."""
    original = getattr(target, attribute)
    calls = {"n": 0}

    def wrapper(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == call:
            raise exc
        return original(*args, **kwargs)

    monkeypatch.setattr(target, attribute, wrapper)


@pytest.mark.parametrize(
    "target,attribute,call,exc",
    [
        (lab_netns, "create", 5, Boom("namespace creation")),
        (lab_fabric._FabricWriter, "_switch", 3, Boom("switch setup")),
        (lab_fabric._FabricWriter, "_host", 2, Boom("host setup")),
        (lab_fabric._FabricWriter, "_host", 4, KeyboardInterrupt()),
    ],
    ids=["netns-create", "switch-setup", "host-setup", "ctrl-c"],
)
def test_failed_up_removes_what_it_created(make_lab, monkeypatch, target, attribute, call, exc):
    lab = make_lab("default")
    _fail_on_call(monkeypatch, target, attribute, call, exc)
    with pytest.raises(type(exc)):
        lab.up()
    assert_nothing_left(lab.name)


def test_failed_bpffs_mount_removes_the_namespaces(make_lab, monkeypatch):
    from edgeft_lab import bpffs

    lab = make_lab("flat")

    def refuse(path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        raise OSError(1, "mount refused (test)")

    monkeypatch.setattr(bpffs, "mount", refuse)
    with pytest.raises(OSError, match="mount refused"):
        lab.up()
    assert_nothing_left(lab.name)


KILLED_UP = """
import os, signal, sys
from edgeft_lab import Lab, fabric
def die(self, host):
    os.kill(os.getpid(), signal.SIGKILL)  # no cleanup can run: only the intent log is left
fabric._FabricWriter._host = die
Lab("default", name=sys.argv[1]).up()
"""


def _run_killed_up(name: str) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO / "lab"))
    result = subprocess.run([sys.executable, "-c", KILLED_UP, name], env=env, capture_output=True, text=True, check=False)
    assert result.returncode == -9, result.stderr
    state = json.loads(Path(f"/run/edgeft-lab/{name}/state.json").read_text())
    assert state["phase"] == "building"
    assert [ns for ns in lab_netns.list_all() if ns.startswith(f"{name}-")], "the killed up left nothing to clean"


def test_down_cleans_up_after_a_killed_up(make_lab):
    lab = make_lab("default")
    _run_killed_up(lab.name)
    assert not lab.is_up()
    assert lab.down() is True
    assert_nothing_left(lab.name)


def test_up_after_a_killed_up_rebuilds_cleanly(make_lab):
    lab = make_lab("default")
    _run_killed_up(lab.name)
    messages: list[str] = []
    rebuilt = Lab("default", name=lab.name, log=messages.append)
    assert rebuilt.up() is True
    assert any("interrupted" in m for m in messages)
    assert rebuilt.ping_matrix().ok


def _cli(*args: str, user: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "lab"))
    argv = [sys.executable, "-m", "edgeft_lab", *args]
    if user:
        argv = ["runuser", "-u", user, "--", *argv]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd="/", check=False)


def _one_line_error(result: subprocess.CompletedProcess, code: int, text: str) -> None:
    assert result.returncode == code, result
    assert result.stderr.startswith("edgeft-lab: error: ") and result.stderr.count("\n") == 1, result.stderr
    assert text in result.stderr and "Traceback" not in result.stderr


def test_cli_lifecycle_and_errors(make_lab, tmp_path):
    name = make_lab("flat").name  # registered for teardown; driven through the CLI only
    inventory = tmp_path / "inv.yml"
    up = _cli("--topology", "flat", "--name", name, "up", "--inventory", str(inventory))
    assert up.returncode == 0 and f"lab {name} up" in up.stdout, up
    assert inventory.read_text().startswith("# generated by bin/edgeft-lab inventory")
    again = _cli("--topology", "flat", "--name", name, "up")
    assert again.returncode == 0 and "already up" in again.stdout

    # Without --topology, commands on a running lab use the topology it was built from.
    status = _cli("--name", name, "status", "--json")
    doc = json.loads(status.stdout)
    assert doc["kind"] == "flat" and doc["phase"] == "up"
    assert all(ln["a_state"] == ln["b_state"] == "up" for ln in doc["links"])
    matrix = _cli("--name", name, "ping-matrix")
    assert matrix.returncode == 0 and "48/48 reachable" in matrix.stdout

    fault = _cli("--name", name, "fault", "link-down", "--host", "r1h1", "--plane", "a", "--side", "switch")
    assert fault.returncode == 0, fault
    text = _cli("--name", name, "status").stdout
    assert "link-down host=r1h1 plane=a side=switch" in text and "no-carrier / down" in text
    failing = _cli("--name", name, "ping-matrix", "--timeout", "0.3")
    assert failing.returncode == 1 and "FAILED r1h1 -> r1h2 plane a" in failing.stdout
    _one_line_error(_cli("--name", name, "fault", "power-off", "--switch", "nope"), 1, "unknown switch 'nope'")
    _one_line_error(_cli("--name", name, "fault", "loss", "--percent", "30"), 1, "needs either --switch")
    _one_line_error(_cli("--name", name, "repair", "silent"), 1, "no active fault matches")
    _one_line_error(_cli("--topology", "default", "--name", name, "up"), 1, "different fabric")
    repair = _cli("--name", name, "repair", "--all")
    assert "repaired: link-down host=r1h1 plane=a side=switch" in repair.stdout

    down = _cli("--name", name, "down")
    assert down.returncode == 0 and f"lab {name} down" in down.stdout
    assert "not running" in _cli("--name", name, "down").stdout
    assert_nothing_left(name)
    _one_line_error(_cli("--name", name, "fault", "silent", "--switch", "sw-a"), 1, "is not up")


def test_cli_needs_root_and_says_so():
    result = _cli("--name", unique_name(), "status", user="nobody")
    _one_line_error(result, 2, "must run as root")


SIGTERM_UP = """
import os, signal, sys
from edgeft_lab import cli, fabric
def term(self, host):
    os.kill(os.getpid(), signal.SIGTERM)
fabric._FabricWriter._host = term
sys.exit(cli.main(["--name", sys.argv[1], "up"]))
"""


def test_sigterm_during_up_cleans_up(make_lab):
    name = make_lab("default").name
    env = dict(os.environ, PYTHONPATH=str(REPO / "lab"))
    result = subprocess.run([sys.executable, "-c", SIGTERM_UP, name], env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 130, result
    assert "interrupted" in result.stderr and "Traceback" not in result.stderr
    assert_nothing_left(name)


def test_down_stops_a_running_flapper(make_lab):
    from edgeft_lab import procs

    lab = make_lab("flat")
    lab.up()
    lab.flap("r2h2", "a", hz=10, duration=60)
    (record,) = lab.faults()
    assert record.running()
    assert lab.down() is True
    assert not procs.is_running(record.pid, record.pid_start)
    assert_nothing_left(lab.name)


CUSTOM = """
name: {name}
description: three planes, uneven racks, jumbo frames, a routed flat fabric
fabric: {{kind: flat, mode: routed}}
racks: 3
hosts_per_rack: [1, 2, 1]
mtu: 9000
planes:
  - {{name: a, nic: fab0, ipv4: 198.18.0.0/18, ipv6: fd0e:1::/60}}
  - {{name: b, nic: fab1, ipv4: 198.18.64.0/18, ipv6: fd0e:2::/60}}
  - {{name: c, nic: eth7, ipv4: 198.19.0.0/16, ipv6: fdff:ffff:0:100::/56}}
"""


def test_custom_topology_with_three_planes_uneven_racks_and_mtu(make_lab, tmp_path):
    path = tmp_path / "custom.yml"
    name = unique_name()
    path.write_text(CUSTOM.format(name=name))
    lab = make_lab(str(path), name=name)
    assert [h.name for h in lab.plan.hosts] == ["r1h1", "r2h1", "r2h2", "r3h1"]
    assert lab.up()
    matrix = lab.ping_matrix()
    assert matrix.ok, matrix.format()
    assert len(matrix.results) == 4 * 3 * 3 * 2
    with lab.ipr("r2h2") as sock:
        (link,) = sock.get_links(*sock.link_lookup(ifname="eth7"))
        assert link.get_attr("IFLA_MTU") == 9000
    # Flat routed: one router per plane with a gateway bridge per rack.
    with lab.ipr("sw-c") as sock:
        bridges = {link.get_attr("IFLA_IFNAME") for link in sock.get_links() if link.get_attr("IFLA_IFNAME").startswith("br-")}
    assert bridges == {"br-r1", "br-r2", "br-r3"}
    assert str(lab.plan.host("r3h1").port("c").ipv6) == "fdff:ffff:0:103::b/64"
    # Large pings across the router need the MTU on every hop.
    big = subprocess.run(lab.exec_argv("r1h1", ["ping", "-c1", "-W1", "-M", "do", "-s", "8900", "198.19.3.11"]),
                         capture_output=True, check=False)
    assert big.returncode == 0
