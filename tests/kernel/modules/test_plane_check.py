"""edgeft.failover.plane_check on two real hosts with the programs attached.

The setup of test_plane_state.py (hostlab.py): host 1 and host 2 are
namespaces joined by a veth per plane (fab0: plane a, fab1: plane b), both run
the compiled data path over their own pinned maps, and each one's peer table
(filled by peer_table) holds the other. The module runs in-process inside host
1; host 2's data path answers its checks in the kernel, also on a plane host 2
has drained, where it ignores the agent's probe requests.
"""

from __future__ import annotations

import socket
import subprocess
import time

import pytest

import hostlab as L

from ansible_collections.edgeft.failover.plugins.module_utils import netlink
from ansible_collections.edgeft.failover.plugins.module_utils import plane_check as core
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import probe
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.modules import plane_check


def _problem():
    """hostlab.missing(), or pyroute2 missing."""
    return L.missing() or (None if netlink.HAS_PYROUTE2 else "pyroute2 missing")


pytestmark = pytest.mark.skipif(_problem() is not None, reason=str(_problem()))

FAMILIES = pytest.mark.parametrize("family", [4, 6], ids=["ipv4", "ipv6"])
QUICK = dict(count=3, interval_ms=5, timeout_ms=100)  # for the checks expected to go unanswered


@pytest.fixture
def lab(two_hosts):
    """The session's two attached hosts (conftest.py), as they are."""
    return two_hosts


def check(lab, plane="a", check_mode=False, **kw):
    args = dict(pin_root=lab.pins[1], state_dir=lab.state_dirs[1], plane=plane)
    args.update(kw)
    return L.run_module(plane_check.main, args, lab.ns[1], check_mode=check_mode)


def ok(result):
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is False
    return result


def failed(result, start):
    assert result.get("failed"), result
    assert result["msg"].startswith(start), result["msg"]
    return result["msg"]


def trace(lab):
    """What a check must not change on either host. Received counters and
    last-seen are left out: neighbour discovery (not ours) may update them."""
    out = {}
    for h in (1, 2):
        m = lab.maps(h)
        out[h] = {
            "peer": m.get_peer(0),
            "sent": m.last_sent(0),
            "planes": [m.get_plane(p) for p in (0, 1)],
            "counters": [{k: v for k, v in m.plane_counters(p).items() if not k.startswith("rx_")} for p in (0, 1)],
        }
    return out


def settled_trace(lab, quiet=0.3, limit=5.0):
    """trace() once nothing moves it for `quiet` seconds: replies still in flight from what a
    test did before (an ICMP error, a late answer) are not the check's doing."""
    deadline = time.monotonic() + limit
    last = trace(lab)
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = trace(lab)
        if now == last:
            return now
        last = now
    return last


def drain(lab, h, plane=0):
    lab.maps(h).set_plane_flags(plane, layout.PLANE_UP | layout.PLANE_DRAINED)


def agent_request_answered(lab, family, plane=0, wait=0.2) -> bool:
    """One agent-style probe request (kind REQUEST) host 1 -> host 2 on `plane`."""
    af = socket.AF_INET if family == 4 else socket.AF_INET6
    with L.in_netns(lab.ns[1]):
        s = socket.socket(af, socket.SOCK_DGRAM)
    with s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"fab%d" % plane)
        s.bind((L.ADDR[1][family][plane], 0))
        s.settimeout(wait)
        s.sendto(probe.request(0x5E55, 1, time.monotonic_ns()), (L.ADDR[2][family][plane], probe.PORT))
        try:
            return probe.parse_reply(s.recv(256)) is not None
        except socket.timeout:
            return False


# ------------------------------------------------------------------ healthy
@FAMILIES
def test_every_peer_answers_on_a_healthy_plane(hosts, family):
    before = trace(hosts)
    started = time.monotonic()
    r = ok(check(hosts, "a", family=str(family), interval_ms=25))
    assert time.monotonic() - started >= 4 * 0.025  # 5 rounds, paced by interval_ms
    assert r["plane"] == {"name": "a", "index": 0, "interface": "fab0"}
    assert (r["healthy"], r["unhealthy_peers"], r["checked"]) == (True, [], 1)
    (peer,) = r["peers"]
    assert peer["name"] == "h2" and peer["address"] == L.ADDR[2][family][0]
    assert (peer["sent"], peer["answered"], peer["lost"], peer["loss_percent"]) == (5, 5, 0, 0.0)
    assert 0 < peer["rtt_ms_avg"] <= peer["rtt_ms_max"] < 500
    assert peer["healthy"] is True
    # Checks leave no trace in the data path of either host.
    assert trace(hosts) == before


def test_auto_prefers_ipv4_and_planes_by_index_or_declared_names(hosts):
    r = ok(check(hosts, "1"))
    assert r["plane"] == {"name": "b", "index": 1, "interface": "fab1"}
    assert r["peers"][0]["address"] == L.ADDR[2][4][1] and r["healthy"]
    planes = [{"name": "left", "interface": "fab0"}, {"name": "right", "interface": "fab1"}]
    r = ok(check(hosts, "right", planes=planes, count=1))
    assert r["plane"]["name"] == "right" and r["healthy"]


# ------------------------------------------------------------------ drained
@FAMILIES
def test_a_drained_plane_answers_checks_but_not_the_agent(hosts, family):
    """The switch of plane a under maintenance: both hosts have drained it. The
    agent's probe finds the plane dead, the check proves it works."""
    assert agent_request_answered(hosts, family)  # the control: answered while undrained
    drain(hosts, 1)
    drain(hosts, 2)
    assert not agent_request_answered(hosts, family)
    # (Host 2's stack answered that request with an ICMP port unreachable, which
    # its egress steered off the drained plane like any packet: trace from when
    # that traffic is over.)
    before = settled_trace(hosts)
    r = ok(check(hosts, "a", family=str(family)))
    (peer,) = r["peers"]
    assert (r["healthy"], peer["answered"], peer["lost"]) == (True, 5, 0)
    assert peer["address"] == L.ADDR[2][family][0] and peer["rtt_ms_avg"] > 0
    assert trace(hosts) == before  # still drained on both, nothing steered, learned or counted


def test_loss_is_judged_against_max_loss_percent():
    def peer(sent, answered, limit):
        return core.peer_result({"name": "p", "address": "198.18.0.2", "sent": sent, "answered": answered,
                                 "rtts_ns": [1000000, 3000000][:answered]}, limit)
    p = peer(20, 2, 90)
    assert (p["lost"], p["loss_percent"], p["rtt_ms_avg"], p["rtt_ms_max"], p["healthy"]) == (18, 90.0, 2.0, 3.0, True)
    assert not peer(20, 2, 89)["healthy"]
    assert not peer(2, 0, 100)["healthy"]


# ------------------------------------------------------------------ peers
def test_peers_by_name_unknown_names_and_unnamed_peers(hosts, tmp_path):
    r = ok(check(hosts, "a", peers=["h2", "h2"], count=1))
    assert [p["name"] for p in r["peers"]] == ["h2"]
    msg = failed(check(hosts, "a", peers=["h2", "zz", "yy"]), "peers: unknown peer(s) zz, yy;")
    assert "the peers of this host are: h2" in msg
    r = ok(check(hosts, "a", peers=[]))
    assert (r["checked"], r["peers"], r["healthy"]) == (0, [], False)
    # Without the peer_table record, peers are named by id as plane_state names them.
    r = ok(check(hosts, "0", state_dir=str(tmp_path), peers=["#0"], count=1))
    assert r["peers"][0]["name"] == "#0" and r["healthy"]


# ------------------------------------------------------------------ errors
def test_bad_planes_and_maps_are_named(hosts):
    failed(check(hosts, "zz"), "plane: 'zz' is neither a plane name of this host (a, b)")
    msg = failed(check(hosts, "2"), "plane: plane '2' (index 2) is not configured in the maps")
    assert "edgeft.failover.peer_table" in msg
    msg = failed(check(hosts, "a", pin_root="/nonexistent"), "pin_root: ")
    assert "attach the programs first with edgeft.failover.ebpf_program" in msg
    swapped = [{"name": "a", "interface": "fab1"}, {"name": "b", "interface": "fab0"}]
    failed(check(hosts, "a", planes=swapped), "planes[0].interface: 'fab1' is not the data path's NIC of plane 'a' (fab0)")


@pytest.mark.parametrize("option,value,message", [
    ("count", 0, "count: must be 1..1000, got 0"),
    ("count", 1001, "count: must be 1..1000, got 1001"),
    ("interval_ms", 0, "interval_ms: must be >= 1, got 0"),
    ("timeout_ms", 0, "timeout_ms: must be >= 1, got 0"),
    ("max_loss_percent", 101, "max_loss_percent: must be 0..100, got 101"),
    ("max_loss_percent", -1, "max_loss_percent: must be 0..100, got -1"),
    ("family", "5", "value of family must be one of: auto, 4, 6, got: 5"),
])
def test_bad_ranges_are_named(lab, option, value, message):
    failed(check(lab, "a", **{option: value}), message)


def test_a_nic_without_an_address_of_the_family(hosts):
    ns1, v6 = hosts.ns[1], L.ADDR[1][6][1] + "/64"
    L.ip("-n", ns1, "addr", "del", v6, "dev", "fab1")
    try:
        msg = failed(check(hosts, "b", family="6"), "family: fab1 (plane 'b') has no global IPv6 address to send checks from")
        assert "needed for h2" in msg
        assert ok(check(hosts, "b", count=1))["healthy"]  # auto: IPv4, which the NIC has
    finally:
        L.ip("-n", ns1, "addr", "add", v6, "dev", "fab1", "nodad")


# ------------------------------------------------------------------ check mode
def test_check_mode_checks_the_same_and_changes_nothing(hosts):
    drain(hosts, 2)
    before = trace(hosts)
    r = ok(check(hosts, "a", check_mode=True))
    assert (r["healthy"], r["checked"], r["unhealthy_peers"]) == (True, 1, [])
    assert (r["peers"][0]["sent"], r["peers"][0]["answered"]) == (5, 5)
    normal = ok(check(hosts, "a"))
    strip = [{k: v for k, v in p.items() if not k.startswith("rtt")} for p in normal["peers"]]
    assert strip == [{k: v for k, v in p.items() if not k.startswith("rtt")} for p in r["peers"]]
    assert {k: v for k, v in normal.items() if k not in ("peers", "warnings")} == {
        k: v for k, v in r.items() if k not in ("peers", "warnings")}
    assert trace(hosts) == before


# ------------------------------------------------------------------ broken (last: slow to heal)
def test_a_peer_whose_link_is_down_is_lost_and_unhealthy(hosts):
    """Last in the file: host 1 needs a few seconds to resolve host 2 again after this."""
    ns2 = hosts.ns[2]
    # Keep host 2's IPv6 addresses over the down/up (the kernel flushes them otherwise).
    subprocess.run(["ip", "netns", "exec", ns2, "sysctl", "-qw", "net.ipv6.conf.fab0.keep_addr_on_down=1"], check=True)
    L.ip("-n", ns2, "link", "set", "fab0", "down")
    try:
        for family in ("auto", "6"):
            r = ok(check(hosts, "a", family=family, **QUICK))
            (peer,) = r["peers"]
            assert (peer["sent"], peer["answered"], peer["lost"], peer["loss_percent"]) == (3, 0, 3, 100.0)
            assert (peer["rtt_ms_avg"], peer["rtt_ms_max"], peer["healthy"]) == (None, None, False)
            assert (r["healthy"], r["unhealthy_peers"], r["checked"]) == (False, ["h2"], 1)
            # Even tolerating every loss, a peer that never answered is not healthy.
            assert not ok(check(hosts, "a", family=family, max_loss_percent=100, **QUICK))["healthy"]
        assert ok(check(hosts, "b", count=2))["healthy"]  # the other plane is fine
    finally:
        L.ip("-n", ns2, "link", "set", "fab0", "up")
