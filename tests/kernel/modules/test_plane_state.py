"""edgeft.failover.plane_state on two real hosts with the programs attached: whole planes.

Host 1 and host 2 are namespaces joined by a veth per plane (fab0: plane a,
fab1: plane b); both run the programs over their own pinned maps, and each
one's peer table (filled by peer_table) holds the other. Draining plane a on
host 1 must move traffic in both directions to plane b, undraining must move
it back; the module runs in-process inside host 1. (Drains for some peers
only: test_plane_state_peers.py.)
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

import hostlab as L
from plane_state_env import counters, delta, fill, ok, peer_state, ping, state, udp_roundtrip, wait_for

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout

pytestmark = pytest.mark.skipif(L.missing() is not None, reason=str(L.missing()))


# ------------------------------------------------------------------ flags
def test_drain_sets_the_flag_and_undrain_clears_it(hosts):
    r = ok(state(hosts, "a", state="drained"))
    assert r["changed"] and r["plane"] == {"name": "a", "index": 0}
    assert hosts.maps(1).get_plane(0)["drained"] and not hosts.maps(1).get_plane(1)["drained"]
    assert [(p["name"], p["drained"], p["usable"]) for p in r["planes"]] == [("a", True, False), ("b", False, True)]
    assert r["diff"] == {"before": {"planes": {"a": {"up": True, "drained": False}, "b": {"up": True, "drained": False}}},
                         "after": {"planes": {"a": {"up": True, "drained": True}, "b": {"up": True, "drained": False}}}}
    assert not ok(state(hosts, "a", state="drained"))["changed"]
    assert ok(state(hosts, "a", state="active"))["changed"]
    assert not hosts.maps(1).get_plane(0)["drained"]
    assert not ok(state(hosts, "a", state="active"))["changed"]


def test_check_mode_changes_nothing(hosts):
    r = ok(state(hosts, "b", state="drained", check=True))
    assert r["changed"] and r["planes"][1]["drained"] and r["notified"] == 0
    assert not hosts.maps(1).get_plane(1)["drained"]
    ok(state(hosts, "b", state="drained"))
    r = ok(state(hosts, "b", state="active", check=True))
    assert r["changed"] and r["diff"]["after"]["planes"]["b"]["drained"] is False
    assert hosts.maps(1).get_plane(1)["drained"]


def test_the_last_usable_plane_is_refused_unless_forced(hosts):
    ok(state(hosts, "b", state="drained"))
    r = state(hosts, "a", state="drained")
    assert r.get("failed") and r["msg"].startswith("force: plane 'a' is this host's last usable plane (b: drained)"), r["msg"]
    assert not hosts.maps(1).get_plane(0)["drained"]
    r = ok(state(hosts, "a", state="drained", force=True))
    assert r["changed"] and hosts.maps(1).get_plane(0)["drained"]


def test_a_down_plane_does_not_count_as_usable(hosts):
    hosts.maps(1).set_plane_flags(1, 0)  # the agent saw plane b's link go down
    r = state(hosts, "a", state="drained")
    assert r.get("failed") and "(b: down)" in r["msg"]


def test_planes_by_index_and_bad_plane_names(hosts):
    r = ok(state(hosts, "1", state="drained"))
    assert r["plane"] == {"name": "b", "index": 1}
    r = state(hosts, "zz", state="drained")
    assert r.get("failed") and r["msg"].startswith("plane: 'zz' is neither a plane name of this host (a, b)")
    r = state(hosts, "2", state="drained")
    assert r.get("failed") and "plane: plane '2' (index 2) is not configured" in r["msg"]
    r = state(hosts, state="drained")
    assert r.get("failed") and "state is drained but all of the following are missing: plane" in r["msg"]
    r = state(hosts, "a", state="drained", pin_root="/nonexistent")
    assert r.get("failed") and "attach the programs first with edgeft.failover.ebpf_program" in r["msg"]


def test_names_come_from_planes_when_given(hosts):
    planes = [{"name": "left", "interface": "fab0"}, {"name": "right", "interface": "fab1"}]
    r = ok(state(hosts, "right", state="drained", planes=planes))
    assert r["plane"] == {"name": "right", "index": 1}
    assert r["peers"][0]["last_seen_age_ms"].keys() == {"left", "right"}


# ---------------------------------------------------------------- traffic
@pytest.mark.parametrize("family", [4, 6], ids=["ipv4", "ipv6"])
def test_drain_moves_both_directions_and_undrain_moves_them_back(hosts, family):
    dst = L.ADDR[2][family][0]  # host 2's plane-a address
    assert ping(hosts, 1, dst).returncode == 0
    assert counters(hosts, 1, 0)["tx_packets"] >= 3 and counters(hosts, 1, 0)["steered_packets"] == 0

    r = ok(state(hosts, "a", state="drained"))
    assert r["notified"] == 1
    # Host 2 learned from the notification alone: it left plane a towards host 1.
    assert wait_for(lambda: peer_state(hosts, 2)["active_plane"] == 1)
    assert (peer_state(hosts, 2)["down_planes"], peer_state(hosts, 2)["learned_planes"]) == ([0], [0])
    # Host 1 does not learn the echo of its own drain.
    assert peer_state(hosts, 1)["down_planes"] == []

    base = {h: {p: counters(hosts, h, p) for p in (0, 1)} for h in (1, 2)}
    p = ping(hosts, 1, dst, count=5)
    assert p.returncode == 0, p.stdout + p.stderr
    assert udp_roundtrip(hosts, family) == 5
    now = {h: {p: counters(hosts, h, p) for p in (0, 1)} for h in (1, 2)}
    # Host 1 routes its traffic for host 2's plane-a address via plane b (the held table,
    # drain_routes.py), so nothing even reaches plane a's NIC to be steered there.
    assert r["held_routes"] >= 1
    assert delta(base, now, 1, 0, "tx_packets") == 0 and delta(base, now, 1, 0, "steered_packets") == 0
    assert delta(base, now, 1, 1, "tx_packets") >= 10
    assert delta(base, now, 2, 0, "rx_packets") == 0 and delta(base, now, 2, 1, "rx_packets") >= 10  # arrived on plane b
    assert delta(base, now, 2, 0, "steered_packets") >= 5  # host 2's replies steered too
    assert delta(base, now, 1, 0, "rx_packets") == 0 and delta(base, now, 1, 1, "rx_packets") >= 5  # and arrived on plane b

    time.sleep(layout.TUNABLES["EDGEFT_LEARN_HOLD_NS"] / 1e9)
    r = ok(state(hosts, "a", state="active"))
    assert r["changed"] and r["notified"] == 1
    # The notification arrives natively on plane a: host 2 forgets what it learned.
    assert wait_for(lambda: peer_state(hosts, 2)["down_planes"] == [])
    assert peer_state(hosts, 2)["learned_planes"] == [] and counters(hosts, 2, 0)["unlearned"] == 1

    base = {h: {p: counters(hosts, h, p) for p in (0, 1)} for h in (1, 2)}
    assert ping(hosts, 1, dst, count=5).returncode == 0
    assert udp_roundtrip(hosts, family) == 5
    now = {h: {p: counters(hosts, h, p) for p in (0, 1)} for h in (1, 2)}
    assert delta(base, now, 1, 0, "tx_packets") >= 10 and delta(base, now, 1, 0, "steered_packets") == 0
    assert delta(base, now, 2, 0, "rx_packets") >= 10 and delta(base, now, 2, 1, "rx_packets") == 0
    assert delta(base, now, 2, 0, "tx_packets") >= 5 and delta(base, now, 2, 0, "steered_packets") == 0


def test_undrain_holds_learning_so_in_flight_packets_cannot_undo_it(hosts):
    ok(state(hosts, "a", state="drained", notify_peers=False))
    before = time.monotonic_ns()
    ok(state(hosts, "a", state="active", notify_peers=False))
    assert peer_state(hosts, 1)["changed_ns"] >= before
    # Host 2 still steers (nothing told it yet): its packet is not learned within the hold.
    hosts.maps(2).set_active(0, 1)
    with L.in_netns(hosts.ns[2]), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((L.ADDR[2][4][0], 0))
        s.sendto(b"in flight", (L.ADDR[1][4][0], 9))
    time.sleep(0.05)
    assert peer_state(hosts, 1)["down_planes"] == []
    assert counters(hosts, 1, 1)["rx_packets"] >= 1


def test_query_reports_ages_counters_and_names(hosts):
    assert ping(hosts, 1, L.ADDR[2][4][1], count=2).returncode == 0  # plane b only
    r = ok(state(hosts))
    assert not r["changed"] and r["plane"] is None
    assert [p["name"] for p in r["planes"]] == ["a", "b"]  # names recorded by peer_table
    b = r["planes"][1]
    assert b["interface"] == "fab1" and b["up"] and not b["drained"]
    assert b["counters"]["tx_packets"] >= 2 and b["counters"]["rx_packets"] >= 2
    assert set(b["counters"]) == {field[0] for field in layout.Counters._fields_}
    (peer,) = r["peers"]
    assert (peer["name"], peer["id"], peer["active_plane"], peer["down_planes"]) == ("h2", 0, "a", [])
    assert peer["last_seen_age_ms"]["a"] is None or peer["last_seen_age_ms"]["a"] >= 0
    assert 0 <= peer["last_seen_age_ms"]["b"] < 5000
    assert peer["addresses"]["planes"]["b"] == {"ipv4": "198.19.0.2", "ipv6": "fd00:edf7:b::2"}
    assert "diff" in r and r["diff"]["before"] == r["diff"]["after"]


def test_report_has_nic_counters_and_now_ns(hosts):
    assert ping(hosts, 1, L.ADDR[2][4][0], count=2).returncode == 0
    t0 = time.monotonic_ns()
    r = ok(state(hosts))
    t1 = time.monotonic_ns()
    assert t0 <= r["now_ns"] <= t1
    assert r["peer_drains"] == {"a": [], "b": []} and r["peers"][0]["drained_planes"] == []
    a = r["planes"][0]["nic"]
    assert set(a) == {"rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "rx_dropped", "tx_dropped",
                      "rx_errors", "tx_errors", "carrier"}
    assert a["carrier"] is True and a["tx_packets"] >= 2 and a["rx_packets"] >= 2 and a["tx_errors"] == 0
    r2 = ok(state(hosts))
    assert r2["now_ns"] > r["now_ns"] and r2["planes"][0]["nic"]["tx_packets"] >= a["tx_packets"]
    hosts.maps(1).set_plane(1, 9999)  # plane b's NIC is gone
    r = ok(state(hosts))
    assert r["planes"][1]["nic"] is None and r["planes"][1]["interface"] is None and r["planes"][0]["nic"]


# ------------------------------------------------------------------ confirmation
@pytest.mark.parametrize("family", [4, 6], ids=["ipv4", "ipv6"])
def test_a_confirmed_drain_keeps_an_idle_peer_off_the_plane(hosts, family):
    """Host 2 exchanged nothing with host 1: the drain's confirmation alone teaches it, and what
    it sends afterwards, of either family, arrives on plane b. With family 6, host 1 knows host 2
    by its IPv6 addresses only: the echoes and their answers are ICMPv6."""
    if family == 6:
        fill(hosts, 1, families=(6,))
    r = ok(state(hosts, "a", state="drained", confirm_ms=2000))
    assert r["changed"] and (r["confirmed"], r["unconfirmed"]) == (["h2"], [])
    assert (peer_state(hosts, 2)["down_planes"], peer_state(hosts, 2)["learned_planes"]) == ([0], [0])
    base = {h: {p: counters(hosts, h, p) for p in (0, 1)} for h in (1, 2)}
    # Pings of every family host 1 knows host 2 by (its answers to another would not be steered,
    # and the first one arriving natively would rightly make host 2 forget).
    families = (4, 6) if family == 4 else (6,)
    for f in families:
        assert ping(hosts, 2, L.ADDR[1][f][0], count=2).returncode == 0
    now = {h: {p: counters(hosts, h, p) for p in (0, 1)} for h in (1, 2)}
    assert delta(base, now, 2, 0, "steered_packets") >= 2 * len(families) and delta(base, now, 1, 0, "rx_packets") == 0
    assert delta(base, now, 1, 1, "rx_packets") >= 2 * len(families)
    # Drained already: confirmed again, nothing changed.
    r = ok(state(hosts, "a", state="drained", confirm_ms=500))
    assert not r["changed"] and r["confirmed"] == ["h2"]
    ok(state(hosts, "a", state="active"))


@pytest.mark.parametrize("why", ["answered on the plane", "no answer"])
def test_a_peer_that_keeps_to_the_plane_or_is_silent_is_not_confirmed(hosts, why):
    if why == "answered on the plane":  # host 2 does not learn from host 1
        maps = hosts.maps(2)
        st = maps.state.get(0)
        st.flags |= layout.PEER_NO_LEARN
        maps.state.put(0, st)
    sysctl = ["ip", "netns", "exec", hosts.ns[2], "sysctl", "-q", "-w"]
    if why == "no answer":
        subprocess.run(sysctl + ["net.ipv4.icmp_echo_ignore_all=1"], check=True)
    try:
        started = time.monotonic()
        r = ok(state(hosts, "a", state="drained", confirm_ms=300))
        took = time.monotonic() - started
    finally:
        subprocess.run(sysctl + ["net.ipv4.icmp_echo_ignore_all=0"], check=True)
    assert r["changed"] and r["confirmed"] == [] and r["unconfirmed"] == [{"name": "h2", "reason": why}]
    assert took >= 0.3
    assert hosts.maps(1).get_plane(0)["drained"]  # a result, not a failure: the caller decides
    ok(state(hosts, "a", state="active"))


def test_a_confirmed_undrain_brings_back_a_peer_whose_hold_swallowed_the_notification(hosts):
    """Two hosts behind one switch undrain at the same moment: host 2, which learned during the
    drain that host 1 keeps off plane a, has just undrained too, and its learning hold (50 ms)
    swallows host 1's notification; notified once, it would keep off the plane for host 1 for
    good. The undrain's confirmation sends again, past the hold, until the answer comes back on
    the plane. (Host 1's own hold after its undrain keeps it from learning host 2's answers that
    still come back on plane b meanwhile.)"""
    ok(state(hosts, "a", state="drained", confirm_ms=2000))
    assert peer_state(hosts, 2)["learned_planes"] == [0]
    hosts.maps(2).hold(at_ns=time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 40_000_000)  # held for the next 90 ms
    r = ok(state(hosts, "a", state="active", confirm_ms=2000))
    assert r["changed"] and (r["confirmed"], r["unconfirmed"]) == (["h2"], [])
    assert (peer_state(hosts, 2)["down_planes"], peer_state(hosts, 2)["learned_planes"]) == ([], [])
    # Undrained already: confirmed back again, nothing changed.
    r = ok(state(hosts, "a", state="active", confirm_ms=500))
    assert not r["changed"] and r["confirmed"] == ["h2"]


STEERED_SENDER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 0))
end = time.monotonic() + 0.6
while time.monotonic() < end:
    s.sendto(b"still steered", (sys.argv[2], 9))
    time.sleep(0.005)
"""


def test_a_confirmed_undrain_does_not_learn_the_steering_of_a_peer_it_is_bringing_back(hosts):
    """As above, but host 2's hold also swallows the second echo (it changed its own state
    later), and host 2 sends to host 1 all along, steered until it comes back. Had host 1 learned
    from those packets (or from host 2's steered answers) once its undrain's hold was over, its
    next echoes would leave steered too, and the two hosts would keep each other off plane a for
    good. Host 1 holds its learning from the peers not back yet through the first rounds, so the
    third echo leaves natively, past host 2's hold, and brings host 2 back."""
    ok(state(hosts, "a", state="drained", confirm_ms=2000))
    assert peer_state(hosts, 2)["learned_planes"] == [0]
    sender = subprocess.Popen(["ip", "netns", "exec", hosts.ns[2], sys.executable, "-c", STEERED_SENDER,
                               L.ADDR[2][4][0], L.ADDR[1][4][0]])
    try:
        time.sleep(0.05)
        hosts.maps(2).hold(at_ns=time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 110_000_000)  # held for the next 160 ms
        r = ok(state(hosts, "a", state="active", confirm_ms=2000))
    finally:
        sender.wait(timeout=10)
    assert r["changed"] and (r["confirmed"], r["unconfirmed"]) == (["h2"], [])
    for host in (1, 2):
        assert (peer_state(hosts, host)["down_planes"], peer_state(hosts, host)["learned_planes"]) == ([], [])


@pytest.mark.parametrize("forget", [False, True])
def test_an_undrain_may_forget_what_the_drain_left_learned(hosts, forget):
    """Host 1 holds a learned bit for host 2 on plane a, as a host behind the same switch does
    after both drained: forget_learned clears it before the undrain's notification (which then
    leaves natively), judged bits are not touched, and check mode changes nothing."""
    ok(state(hosts, "a", state="drained"))
    maps = hosts.maps(1)
    st = maps.state.get(0)
    st.down_mask, st.learned_mask = 0x1, 0x1
    maps.state.put(0, st)
    r = ok(state(hosts, "a", state="active", forget_learned=forget, check=True))
    assert r["forgotten"] == [] and peer_state(hosts, 1)["learned_planes"] == [0]
    r = ok(state(hosts, "a", state="active", forget_learned=forget))
    assert r["changed"] and r["forgotten"] == (["h2"] if forget else [])
    assert peer_state(hosts, 1)["learned_planes"] == ([] if forget else [0])
    assert peer_state(hosts, 1)["down_planes"] == ([] if forget else [0])
    if not forget:
        maps.clear_down(0, 0)
    r = state(hosts, "a", state="drained", forget_learned=True)
    assert r.get("failed") and r["msg"].startswith("forget_learned: only with state=active for the whole plane"), r["msg"]


def test_confirmation_options_are_checked_and_check_mode_sends_nothing(hosts):
    for kw, message in ((dict(state="query"), "confirm_ms: only with state=drained or active for the whole plane"),
                        (dict(state="drained", peers=["h2"]), "confirm_ms: only with state=drained or active for the whole plane"),
                        (dict(state="drained", notify_peers=False), "confirm_ms: confirming sends echo requests"),
                        (dict(state="drained", confirm_ms=99), "confirm_ms: must be 0 (no confirmation) or 100..60000, got 99")):
        r = state(hosts, "a", **dict(dict(confirm_ms=1000), **kw))
        assert r.get("failed") and r["msg"].startswith(message), r["msg"]
    assert not hosts.maps(1).get_plane(0)["drained"]
    r = ok(state(hosts, "a", state="drained", confirm_ms=1000, check=True))
    assert r["changed"] and (r["confirmed"], r["unconfirmed"], r["notified"]) == ([], [], 0)
    assert peer_state(hosts, 2)["down_planes"] == [] and not hosts.maps(1).get_plane(0)["drained"]
