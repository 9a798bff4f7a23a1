"""edgeft.failover.multihome on the real kernel, in a namespace each test creates.

The module runs in-process (Ansible's argument parsing, check and diff mode)
inside the namespace; what it did is read back with pyroute2 and /proc/sys
independently of its own code.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from mh_netns import ip, plane_host, run_module, snapshot

from ansible_collections.edgeft.failover.plugins.module_utils.multihome import host as host_mod
from ansible_collections.edgeft.failover.plugins.modules import multihome
from repo import REPO

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")

A = {"name": "a", "interface": "fab0", "ipv4": "198.18.1.11/16", "ipv6": "fd0e:d6ef:7a00:1::b/64", "mtu": 9000,
     "gateway4": "198.18.1.1", "switch": "tor-r1-a"}
B = {"name": "b", "interface": "fab1", "ipv4": "198.19.1.11/16", "ipv6": "fd0e:d6ef:7b00:1::b/64"}
ROOT = REPO


@pytest.fixture
def ns():
    with plane_host() as name:
        yield name


def run(ns, state_dir, planes=None, check=False, **kw):
    args = dict(state_dir=str(state_dir), **kw)
    if planes is not None:
        args["planes"] = planes
    return run_module(multihome.main, args, ns, check_mode=check)


def ok(result):
    assert not result.get("failed"), result.get("msg")
    return result


def test_check_then_apply_then_nothing_to_do(ns, tmp_path):
    fresh = snapshot(ns)
    check = ok(run(ns, tmp_path, [A, B], check=True))
    assert check["changed"] and snapshot(ns) == fresh and not os.listdir(tmp_path)
    assert check["diff"]["before"]["fab1"]["up"] is False and check["diff"]["after"]["fab1"]["up"] is True
    assert check["diff"]["after"]["fab0"]["mtu"] == 9000

    done = ok(run(ns, tmp_path, [A, B]))
    assert done["changed"]
    assert {k: done[k] for k in ("plan", "added", "removed", "sysctls_changed", "links_changed")} == \
           {k: check[k] for k in ("plan", "added", "removed", "sysctls_changed", "links_changed")}
    now = snapshot(ns)
    assert {a for a in now["addresses"] if a[0] in ("fab0", "fab1")} == {
        ("fab0", "198.18.1.11/16"), ("fab0", "fd0e:d6ef:7a00:1::b/64"), ("fab1", "198.19.1.11/16"), ("fab1", "fd0e:d6ef:7b00:1::b/64")}
    assert {r for r in now["routes"] if r[0] != 254} == {
        (60901, "198.18.0.0/16", None, "fab0", 253, 237), (60901, "fd0e:d6ef:7a00:1::/64", None, "fab0", 0, 237),
        (60901, "0.0.0.0/0", "198.18.1.1", "fab0", 0, 237),
        (60902, "198.19.0.0/16", None, "fab1", 253, 237), (60902, "fd0e:d6ef:7b00:1::/64", None, "fab1", 0, 237)}
    assert {r for r in now["rules"] if r[3] in (60901, 60902)} == {
        (4, 32700, "198.18.1.11/32", 60901, 237), (6, 32700, "fd0e:d6ef:7a00:1::b/128", 60901, 237),
        (4, 32701, "198.19.1.11/32", 60902, 237), (6, 32701, "fd0e:d6ef:7b00:1::b/128", 60902, 237)}
    assert now["links"]["fab0"] == (9000, True) and now["links"]["fab1"] == (1500, True)
    want = {"ipv4.conf.%s.rp_filter": "2", "ipv4.conf.%s.arp_ignore": "1", "ipv4.conf.%s.arp_announce": "2",
            "ipv4.conf.%s.ignore_routes_with_linkdown": "1", "ipv6.conf.%s.ignore_routes_with_linkdown": "1",
            "ipv6.conf.%s.accept_ra": "0"}
    for nic in ("fab0", "fab1"):
        for key, value in want.items():
            assert now["sysctls"]["net." + key % nic] == value, key % nic

    again = ok(run(ns, tmp_path, [A, B]))
    assert not again["changed"] and again["added"] == again["removed"] == {"addresses": [], "routes": [], "rules": []}
    assert again["sysctls_changed"] == again["links_changed"] == {}
    assert again["diff"]["before"] == again["diff"]["after"]
    assert snapshot(ns) == now


def test_absent_restores_the_host(ns, tmp_path):
    fresh = snapshot(ns)
    ok(run(ns, tmp_path, [A, B]))
    record = json.loads((tmp_path / "multihome.json").read_text())
    assert record["interfaces"]["fab0"]["mtu_before"] == 1500 and record["interfaces"]["fab1"]["down_before"] is True
    gone = ok(run(ns, tmp_path, state="absent"))
    assert gone["changed"] and gone["plan"] == {"interfaces": [], "sysctls": {}}
    assert gone["links_changed"] == {"fab0": {"mtu": {"before": 9000, "after": 1500}}, "fab1": {"up": {"before": True, "after": False}}}
    assert snapshot(ns) == fresh
    assert not (tmp_path / "multihome.json").exists()
    assert not ok(run(ns, tmp_path, state="absent"))["changed"]


def test_a_failure_mid_apply_rolls_back_everything(ns, tmp_path, monkeypatch):
    """After validation the kernel has nothing left to refuse here, so the third rule add is made to fail."""
    ok(run(ns, tmp_path, [dict(B, name="a", interface="fab1")]))  # something recorded before
    before, record = snapshot(ns), (tmp_path / "multihome.json").read_text()
    real_rule, calls = host_mod.Host.rule, []

    def failing_rule(self, op, rule):
        calls.append(op)
        if op == "add" and calls.count("add") == 3:
            raise host_mod.HostError("adding rule %s: injected failure" % rule["from"])
        return real_rule(self, op, rule)

    monkeypatch.setattr(host_mod.Host, "rule", failing_rule)
    failed = run(ns, tmp_path, [A, B])
    assert failed.get("failed") and "injected failure" in failed["msg"]
    assert "change(s) made before it were rolled back" in failed["msg"]
    assert snapshot(ns) == before
    assert (tmp_path / "multihome.json").read_text() == record


def test_an_incomplete_rollback_keeps_ownership_of_what_is_left(ns, tmp_path, monkeypatch):
    """Injected: the third rule add fails, and so does undoing the first one."""
    real_rule, calls = host_mod.Host.rule, []

    def failing_rule(self, op, rule):
        calls.append(op)
        if op == "add" and calls.count("add") == 3:
            raise host_mod.HostError("adding rule %s: injected failure" % rule["from"])
        if op == "del" and rule["from"] == "198.18.1.11/32":
            raise host_mod.HostError("deleting rule %s: injected failure" % rule["from"])
        return real_rule(self, op, rule)

    monkeypatch.setattr(host_mod.Host, "rule", failing_rule)
    failed = run(ns, tmp_path, [A, B])
    assert failed.get("failed") and "left 1 undone: deleting rule 198.18.1.11/32: injected failure" in failed["msg"]
    left = snapshot(ns)
    assert [r for r in left["rules"] if r[3] in (60901, 60902)] == [(4, 32700, "198.18.1.11/32", 60901, 237)]
    assert not [r for r in left["routes"] if r[0] in (60901, 60902)]
    record = json.loads((tmp_path / "multihome.json").read_text())
    assert {"family": 4, "from": "198.18.1.11/32", "table": 60901, "priority": 32700, "dev": "fab0"} in record["rules"]
    # Without faults the next run converges from there, and absent removes the leftover with the rest.
    monkeypatch.undo()
    assert ok(run(ns, tmp_path, [A, B]))["changed"]
    ok(run(ns, tmp_path, state="absent"))
    assert not [r for r in snapshot(ns)["rules"] if r[3] in (60901, 60902)]


def test_foreign_address_prefix_and_route_in_the_way_are_replaced(ns, tmp_path):
    ip(ns, "addr", "add", "198.18.1.11/24", "dev", "fab0")
    ip(ns, "addr", "add", "203.0.113.5/24", "dev", "fab0")  # not declared, not recorded: stays
    ip(ns, "route", "add", "default", "via", "198.18.1.254", "dev", "fab0", "table", "60901", "proto", "static")
    r = ok(run(ns, tmp_path, [A, B]))
    assert r["removed"]["addresses"] == ["198.18.1.11/24 dev fab0"]
    assert r["removed"]["routes"] == ["default via 198.18.1.254 dev fab0 table 60901"]
    now = snapshot(ns)
    assert ("fab0", "203.0.113.5/24") in now["addresses"] and ("fab0", "198.18.1.11/16") in now["addresses"]
    assert (60901, "0.0.0.0/0", "198.18.1.1", "fab0", 0, 237) in now["routes"]
    assert not ok(run(ns, tmp_path, [A, B]))["changed"]


def test_adopted_address_is_removed_once_no_longer_declared(ns, tmp_path):
    ip(ns, "addr", "add", "198.19.1.11/16", "dev", "fab1")
    r = ok(run(ns, tmp_path, [A, B]))
    assert "198.19.1.11/16 dev fab1" not in r["added"]["addresses"]
    r = ok(run(ns, tmp_path, [A, dict(B, ipv4=None)]))
    assert r["removed"] == {"addresses": ["198.19.1.11/16 dev fab1"], "routes": ["198.19.0.0/16 dev fab1 table 60902 scope link"],
                            "rules": ["32701: from 198.19.1.11/32 lookup 60902"]}
    assert r["added"] == {"addresses": [], "routes": [], "rules": []} and r["sysctls_changed"] == {}


@pytest.mark.parametrize("planes, setup, message", [
    ([A, dict(B, interface="fab9")], None, "planes[1].interface: no interface 'fab9' on this host"),
    ([A, dict(B, ipv4="198.18.200.12/16")], None, "planes[1].ipv4: 198.18.0.0/16 overlaps planes[0].ipv4 198.18.0.0/16"),
    ([A, B], ["sysctl", "net.ipv6.conf.fab1.disable_ipv6=1"], "planes[1].ipv6: IPv6 is disabled on fab1 (net.ipv6.conf.fab1.disable_ipv6 = 1)"),
    ([A, B], ["addr", "add", "198.18.1.11/32", "dev", "fab1p"], "planes[0].ipv4: 198.18.1.11 is already on interface fab1p"),
    ([dict(A, mtu=70000), B], None, "planes[0].mtu: 70000 is out of range (68..65535)"),
])
def test_bad_input_changes_nothing(ns, tmp_path, planes, setup, message):
    if setup and setup[0] == "sysctl":
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", setup[1]], check=True)
    elif setup:
        ip(ns, *setup)
    before = snapshot(ns)
    r = run(ns, tmp_path, planes)
    assert r.get("failed") and message in r["msg"], r.get("msg")
    assert snapshot(ns) == before and not os.listdir(tmp_path)


def _target_python(code):
    env = dict(os.environ, PYTHONPATH=str(ROOT / ".build" / "collections"))
    return subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True, env=env, check=False)


def test_not_root_is_refused_before_anything():
    code = ("import os; os.setgid(65534); os.setuid(65534)\n"
            "from ansible_collections.edgeft.failover.plugins.module_utils.multihome import run\n"
            "try:\n    run.check_target()\nexcept run.spec.OptionError as e:\n    print(e)\n")
    out = _target_python(code)
    assert "this module must run as root" in out.stdout, out.stderr


def test_missing_pyroute2_is_named():
    """pyroute2 is installed here; an import blocked in sys.modules stands for a host without it."""
    code = ("import sys; sys.modules['pyroute2'] = None\n"
            "from ansible_collections.edgeft.failover.plugins.module_utils.multihome import run\n"
            "try:\n    run.check_target()\nexcept run.spec.OptionError as e:\n    print(e)\n")
    out = _target_python(code)
    assert "pyroute2 is missing on the target" in out.stdout and "install python3-pyroute2" in out.stdout, out.stderr


def _addr_details(ns, nic):
    """{cidr: (flags, preferred_life_time)} read with iproute2, not the module's code."""
    out = ip(ns, "-j", "addr", "show", "dev", nic)
    return {"%s/%d" % (a["local"], a["prefixlen"]): (set(k for k in ("nodad", "deprecated") if a.get(k)), a.get("preferred_life_time"))
            for entry in json.loads(out) for a in entry["addr_info"]}


def test_failover_addresses_are_installed_never_preferred_and_removed(ns, tmp_path):
    fresh = snapshot(ns)
    # Routed planes: /24 native subnets, failover addresses from a prefix beside them.
    planes = [dict(A, ipv4="198.18.1.11/24", failover4="198.18.255.1", failover6="fd0e:d6ef:7a00:ff::1"),
              dict(B, ipv4="198.19.1.11/24", failover4="198.19.255.1", failover6="fd0e:d6ef:7b00:ff::1")]
    check = ok(run(ns, tmp_path, planes, check=True))
    assert snapshot(ns) == fresh
    assert "fd0e:d6ef:7b00:ff::1/128" in check["diff"]["after"]["fab1"]["addresses"]
    assert "32701: from 198.19.255.1/32 lookup 60902" in check["added"]["rules"]

    done = ok(run(ns, tmp_path, planes))
    assert done["failover_addresses"] == {"fab0": ["198.18.255.1/32", "fd0e:d6ef:7a00:ff::1/128"],
                                          "fab1": ["198.19.255.1/32", "fd0e:d6ef:7b00:ff::1/128"]}
    details = _addr_details(ns, "fab1")
    assert details["fd0e:d6ef:7b00:ff::1/128"] == ({"nodad", "deprecated"}, 0)
    assert "198.19.255.1/32" in details
    rules = {r for r in snapshot(ns)["rules"] if r[3] in (60901, 60902)}
    assert {(4, 32700, "198.18.255.1/32", 60901, 237), (6, 32700, "fd0e:d6ef:7a00:ff::1/128", 60901, 237),
            (4, 32701, "198.19.255.1/32", 60902, 237), (6, 32701, "fd0e:d6ef:7b00:ff::1/128", 60902, 237)} <= rules
    record = json.loads((tmp_path / "multihome.json").read_text())
    assert "fd0e:d6ef:7b00:ff::1/128" in record["interfaces"]["fab1"]["addresses"]
    # The kernel picks the native address as source towards the plane, never the failover one
    # (once the native address has passed duplicate address detection: fab1 has just come up).
    deadline = time.monotonic() + 5
    while "tentative" in ip(ns, "-6", "addr", "show", "dev", "fab1") and time.monotonic() < deadline:
        time.sleep(0.1)
    route = ip(ns, "-6", "route", "get", "fd0e:d6ef:7b00:1::77", "from", "::", "oif", "fab1")
    assert "fd0e:d6ef:7b00:ff::1" not in route

    assert not ok(run(ns, tmp_path, planes))["changed"]

    # Re-added by hand without the flags: replaced by the flagged address.
    ip(ns, "addr", "del", "fd0e:d6ef:7b00:ff::1/128", "dev", "fab1")
    ip(ns, "addr", "add", "fd0e:d6ef:7b00:ff::1/128", "dev", "fab1", "nodad")
    fixed = ok(run(ns, tmp_path, planes))
    assert fixed["changed"] and _addr_details(ns, "fab1")["fd0e:d6ef:7b00:ff::1/128"] == ({"nodad", "deprecated"}, 0)

    ok(run(ns, tmp_path, state="absent"))
    assert snapshot(ns) == fresh
