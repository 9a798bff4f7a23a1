"""edgeft.failover.plane_state's check_planes on two real hosts with the programs attached: one
module run that reads the planes and proves some of them end to end, as plane_check does (the
switch maintenance guard's step). The setup of test_plane_state.py; host 2's data path answers
the checks in the kernel, also on a plane host 2 has drained."""

from __future__ import annotations

import pytest

import hostlab as L
from plane_state_env import ok, state

from ansible_collections.edgeft.failover.plugins.module_utils import netlink

PROBLEM = L.missing() or (None if netlink.HAS_PYROUTE2 else "pyroute2 missing")
pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=str(PROBLEM))


def test_a_query_reads_the_planes_and_checks_the_named_ones(hosts):
    r = ok(state(hosts, check_planes=["b"], check_count=2))
    assert [(p["name"], p["drained"], p["usable"]) for p in r["planes"]] == [("a", False, True), ("b", False, True)]
    assert list(r["checks"]) == ["b"] and not r["changed"]
    check = r["checks"]["b"]
    assert (check["healthy"], check["unhealthy_peers"], check["checked"]) == (True, [], 1)
    assert check["plane"]["name"] == "b" and check["plane"]["interface"] == "fab1" and "changed" not in check
    (peer,) = check["peers"]
    assert (peer["name"], peer["sent"], peer["answered"]) == ("h2", 2, 2)


def test_planes_by_index_each_once_and_none_without_the_option(hosts):
    r = ok(state(hosts, check_planes=["1", "a", "b"], check_count=1))
    assert sorted(r["checks"]) == ["a", "b"] and all(c["healthy"] for c in r["checks"].values())
    assert ok(state(hosts))["checks"] == {}


def test_a_drained_peer_plane_still_answers_and_check_mode_checks_the_same(hosts):
    ok(state(hosts, "b", h=2, state="drained"))
    try:
        r = ok(state(hosts, check=True, check_planes=["b"], check_count=1))
        assert r["checks"]["b"]["healthy"] and not r["changed"]
    finally:
        ok(state(hosts, "b", h=2, state="active"))


@pytest.mark.parametrize("args, message", [
    (dict(check_planes=["c"]), "check_planes: 'c' is neither a plane name of this host (a, b) nor a plane index 0.."),
    (dict(check_planes=["b"], check_count=0), "check_count: must be 1..1000, got 0"),
    (dict(check_planes=["b"], check_max_loss_percent=101), "check_max_loss_percent: must be 0..100, got 101"),
    (dict(check_planes=["b"], plane="a", state="drained"), "check_planes: only with state=query"),
    # Named for what is missing, not for the plane names that cannot be read without it.
    (dict(check_planes=["b"], pin_root="/nonexistent/edgeft"),
     "pin_root: /nonexistent/edgeft does not exist: attach the programs first with edgeft.failover.ebpf_program"),
], ids=["unknown plane", "count", "loss", "with a change", "no pin_root"])
def test_bad_checks_fail_before_anything_runs(hosts, args, message):
    r = state(hosts, **args)
    assert r.get("failed") and r["msg"].startswith(message), r.get("msg")
    assert not hosts.maps(1).get_plane(0)["drained"]  # the drain asked for with the checks did not run
