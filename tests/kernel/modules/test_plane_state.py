"""edgeft.failover.plane_state on two real hosts with the programs attached.

Host 1 and host 2 are namespaces joined by a veth per plane (fab0: plane a,
fab1: plane b); both run the programs over their own pinned maps, and each
one's peer table (filled by peer_table) holds the other. Draining plane a on
host 1 must move traffic in both directions to plane b, undraining must move
it back; the module runs in-process inside host 1.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import subprocess
import time
from unittest import mock

import pytest

import hostlab as L

from ansible_collections.edgeft.failover.plugins.module_utils.planes import drain_routes
from ansible_collections.edgeft.failover.plugins.module_utils.agent.steer import Steering
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.handle import MapHandle
from ansible_collections.edgeft.failover.plugins.modules import peer_table, plane_state


pytestmark = pytest.mark.skipif(L.missing() is not None, reason=str(L.missing()))

OTHER = {1: 2, 2: 1}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with L.attached_two_hosts(tmp_path_factory) as lab:
        yield lab


def fill(lab, h, extra=()):
    r = L.run_module(peer_table.main, dict(pin_root=lab.pins[h], state_dir=lab.state_dirs[h], planes=L.PLANES,
                                           peers=[L.peer_decl(OTHER[h])] + list(extra)), lab.ns[h])
    assert not r.get("failed"), r["msg"]


def drain_record(lab, h=1):
    """plane_state's per-peer drain record of host h, None when there is no file."""
    try:
        with open(os.path.join(lab.state_dirs[h], "peer_drains.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


@pytest.fixture
def hosts(lab):
    """Both peer tables filled, counters zero, planes up, nothing learned, no per-peer drain recorded."""
    for h in (1, 2):
        lab.maps(h).clear()
        fill(lab, h)
        for name in ("peer_drains.json", "peer_drains.lock"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(lab.state_dirs[h], name))
        # Routes a drain put in the held table (drain_routes.py) outlive the maps' reset.
        for family in ("-4", "-6"):
            subprocess.run(["ip", "-n", lab.ns[h], family, "route", "flush", "table", str(drain_routes.TABLE + 1)],
                           capture_output=True, check=False)
    for h in (1, 2):
        other = OTHER[h]
        lab.wait_resolved(h, [(L.ADDR[other][f][p], "fab%d" % p) for f in (4, 6) for p in (0, 1)])
    return lab


def state(lab, plane=None, h=1, check=False, **kw):
    args = dict(dict(pin_root=lab.pins[h], state_dir=lab.state_dirs[h]), **kw)
    if plane is not None:
        args["plane"] = plane
    return L.run_module(plane_state.main, args, lab.ns[h], check_mode=check)


def ok(result):
    assert not result.get("failed"), result.get("msg")
    return result


def counters(lab, h, plane):
    return lab.maps(h).plane_counters(plane)


def ping(lab, h, dst, count=3):
    cmd = ["ip", "netns", "exec", lab.ns[h], "ping", "-c", str(count), "-i", "0.05", "-W", "1", dst]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def udp_roundtrip(lab, family, n=5):
    """n datagrams host 1 -> host 2's plane-a address; how many arrived."""
    af = socket.AF_INET if family == 4 else socket.AF_INET6
    with L.in_netns(lab.ns[2]):
        rx = socket.socket(af, socket.SOCK_DGRAM)
    with L.in_netns(lab.ns[1]):
        tx = socket.socket(af, socket.SOCK_DGRAM)
    with rx, tx:
        rx.bind((L.ADDR[2][family][0], 0))
        rx.settimeout(1.0)
        for i in range(n):
            tx.sendto(b"edgeft-%d" % i, (L.ADDR[2][family][0], rx.getsockname()[1]))
        got = 0
        with contextlib.suppress(socket.timeout):
            while got < n:
                rx.recv(100)
                got += 1
    return got


def peer_state(lab, h):
    """Host h's view of the other host (peer id 0 in both tables)."""
    return lab.maps(h).get_peer(0)


def _delta(base, now, h, plane, key):
    return now[h][plane][key] - base[h][plane][key]


def wait_for(cond, timeout=3.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


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
    assert _delta(base, now, 1, 0, "tx_packets") == 0 and _delta(base, now, 1, 0, "steered_packets") == 0
    assert _delta(base, now, 1, 1, "tx_packets") >= 10
    assert _delta(base, now, 2, 0, "rx_packets") == 0 and _delta(base, now, 2, 1, "rx_packets") >= 10  # arrived on plane b
    assert _delta(base, now, 2, 0, "steered_packets") >= 5  # host 2's replies steered too
    assert _delta(base, now, 1, 0, "rx_packets") == 0 and _delta(base, now, 1, 1, "rx_packets") >= 5  # and arrived on plane b

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
    assert _delta(base, now, 1, 0, "tx_packets") >= 10 and _delta(base, now, 1, 0, "steered_packets") == 0
    assert _delta(base, now, 2, 0, "rx_packets") >= 10 and _delta(base, now, 2, 1, "rx_packets") == 0
    assert _delta(base, now, 2, 0, "tx_packets") >= 5 and _delta(base, now, 2, 0, "steered_packets") == 0


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


# --------------------------------------------------------- per-peer drain
def routing(lab, h=1, peer_id=0):
    p = lab.maps(h).get_peer(peer_id)
    return p["active_plane"], p["down_planes"], p["learned_planes"], p["changed_ns"]


def test_peer_drain_steers_one_peer_off_the_plane_and_back(hosts):
    dst = L.ADDR[2][4][0]  # host 2's plane-a address
    assert ping(hosts, 1, dst, count=2).returncode == 0
    flags = [hosts.maps(1).get_plane(p) for p in (0, 1)]
    t0 = time.monotonic_ns()
    r = ok(state(hosts, "a", state="drained", peers=["h2"]))
    assert r["changed"] and r["changed_peers"] == ["h2"] and r["plane"] == {"name": "a", "index": 0}
    assert r["notified"] == 1
    # Only this peer's traffic moves: the local plane's flags are untouched.
    assert [hosts.maps(1).get_plane(p) for p in (0, 1)] == flags
    assert [(p["name"], p["drained"], p["usable"]) for p in r["planes"]] == [("a", False, True), ("b", False, True)]
    active, down, learned, changed_ns = routing(hosts)
    assert (active, down, learned) == (1, [0], []) and changed_ns >= t0
    assert r["peer_drains"] == {"a": ["h2"], "b": []} and r["peers"][0]["drained_planes"] == ["a"]
    assert (r["peers"][0]["active_plane"], r["peers"][0]["down_planes"]) == ("b", ["a"])
    assert r["diff"]["before"]["peer_drains"] == {"a": [], "b": []}
    assert r["diff"]["after"]["peer_drains"] == {"a": ["h2"], "b": []}
    assert r["diff"]["before"]["planes"] == r["diff"]["after"]["planes"]
    assert drain_record(hosts)["hosts"][os.path.normpath(hosts.pins[1])] == {"h2": {"0": {"before": "clear"}}}
    # Host 2 learned from the steered notification: it left plane a towards host 1.
    assert wait_for(lambda: peer_state(hosts, 2)["down_planes"] == [0])

    base = {h: {p: counters(hosts, h, p) for p in (0, 1)} for h in (1, 2)}
    assert ping(hosts, 1, dst, count=5).returncode == 0
    assert udp_roundtrip(hosts, 4) == 5
    now = {h: {p: counters(hosts, h, p) for p in (0, 1)} for h in (1, 2)}
    assert _delta(base, now, 1, 0, "steered_packets") >= 10 and _delta(base, now, 1, 1, "steered_in_packets") >= 10
    assert _delta(base, now, 1, 0, "tx_packets") == 0
    assert _delta(base, now, 2, 0, "rx_packets") == 0 and _delta(base, now, 2, 1, "rx_packets") >= 10
    assert routing(hosts)[:3] == (1, [0], [])  # host 2's steered replies changed nothing here

    r = ok(state(hosts, "a", state="drained", peers=["h2"]))
    assert not r["changed"] and r["changed_peers"] == [] and r["notified"] == 0

    time.sleep(layout.TUNABLES["EDGEFT_LEARN_HOLD_NS"] / 1e9)
    t1 = time.monotonic_ns()
    r = ok(state(hosts, "a", state="active", peers=["h2"]))
    assert r["changed"] and r["changed_peers"] == ["h2"] and r["notified"] == 1
    active, down, learned, changed_ns = routing(hosts)
    assert (active, down, learned) == (0, [], []) and changed_ns >= t1  # stamped: the learning hold
    assert r["peer_drains"] == {"a": [], "b": []} and r["peers"][0]["drained_planes"] == []
    assert drain_record(hosts)["hosts"] == {}
    # The notification arrives natively on plane a: host 2 forgets.
    assert wait_for(lambda: peer_state(hosts, 2)["down_planes"] == [])
    base = {h: {p: counters(hosts, h, p) for p in (0, 1)} for h in (1, 2)}
    assert ping(hosts, 1, dst, count=5).returncode == 0
    now = {h: {p: counters(hosts, h, p) for p in (0, 1)} for h in (1, 2)}
    assert _delta(base, now, 1, 0, "tx_packets") >= 5 and _delta(base, now, 1, 0, "steered_packets") == 0
    assert _delta(base, now, 2, 0, "rx_packets") >= 5 and _delta(base, now, 2, 1, "rx_packets") == 0
    assert not ok(state(hosts, "a", state="active", peers=["h2"]))["changed"]


@pytest.mark.parametrize("before", ["judged", "learned"])
def test_peer_undrain_leaves_a_down_bit_it_did_not_set(hosts, before):
    maps = hosts.maps(1)
    if before == "judged":  # as the agent does when probes on plane a fail
        Steering(maps, hosts.pins[1]).path_down(0, 0, [1])
    else:  # as the data path does when host 2 steers onto plane b
        st = maps.state.get(0)
        st.down_mask, st.learned_mask, st.active_plane = 0b01, 0b01, 1
        maps.state.put(0, st)
    r = ok(state(hosts, "a", state="drained", peers=["h2"], notify_peers=False))
    assert r["changed"] and r["changed_peers"] == ["h2"]
    assert routing(hosts)[:3] == (1, [0], [])  # a learned bit became ours: no packet can undo it now
    assert drain_record(hosts)["hosts"][os.path.normpath(hosts.pins[1])] == {"h2": {"0": {"before": before}}}
    r = ok(state(hosts, "a", state="active", peers=["h2"], notify_peers=False))
    assert r["changed"] and r["changed_peers"] == ["h2"] and r["peers"][0]["drained_planes"] == []
    # Still down; a learned bit is learning's again (the peer's native traffic undoes it).
    assert routing(hosts)[:3] == (1, [0], [0] if before == "learned" else [])
    assert not ok(state(hosts, "a", state="active", peers=["h2"]))["changed"]


def test_peer_drain_check_mode_changes_nothing(hosts):
    r = ok(state(hosts, "a", state="drained", peers=["h2"], check=True))
    assert r["changed"] and r["changed_peers"] == ["h2"] and r["notified"] == 0
    assert (r["peers"][0]["active_plane"], r["peers"][0]["down_planes"], r["peers"][0]["drained_planes"]) == ("b", ["a"], ["a"])
    assert r["peer_drains"]["a"] == ["h2"] and r["diff"]["after"]["peer_drains"]["a"] == ["h2"]
    assert routing(hosts)[:3] == (0, [], []) and drain_record(hosts) is None
    ok(state(hosts, "a", state="drained", peers=["h2"], notify_peers=False))
    stamped = routing(hosts)
    r = ok(state(hosts, "a", state="active", peers=["h2"], check=True))
    assert r["changed"] and r["peers"][0]["down_planes"] == [] and r["peer_drains"]["a"] == []
    assert routing(hosts) == stamped and drain_record(hosts)["hosts"] != {}


def test_peer_drain_refuses_unknown_peers_and_query(hosts):
    r = state(hosts, "a", state="drained", peers=["h2", "nope", "zz"])
    assert r.get("failed") and r["msg"].startswith("peers: unknown peers 'nope', 'zz'"), r["msg"]
    assert r["msg"].endswith("are: h2")
    assert routing(hosts)[:3] == (0, [], []) and drain_record(hosts) is None
    r = state(hosts, "a", state="active", peers=["nope"])
    assert r.get("failed") and r["msg"].startswith("peers: unknown peer 'nope'")
    r = state(hosts, peers=["h2"])
    assert r.get("failed") and r["msg"] == "peers: only with state=drained or active"
    r = ok(state(hosts, "a", state="drained", peers=[]))  # no peer: nothing, not the whole plane
    assert not r["changed"] and not hosts.maps(1).get_plane(0)["drained"]


def test_a_refused_or_check_mode_peer_drain_creates_no_file(hosts):
    """Not even the record's lock file: a refusal and check mode leave state_dir as it was."""
    files = sorted(os.listdir(hosts.state_dirs[1]))
    assert "peer_drains.lock" not in files
    ok(state(hosts, "a", state="drained", peers=["h2"], check=True))
    assert state(hosts, "a", state="drained", peers=["h2", "nope"]).get("failed")
    assert state(hosts, "a", state="active", peers=["nope"]).get("failed")
    ok(state(hosts, "a", state="active", peers=["h2"]))  # nothing drained: nothing to change
    assert sorted(os.listdir(hosts.state_dirs[1])) == files
    ok(state(hosts, "a", state="drained", peers=["h2"], notify_peers=False))
    assert "peer_drains.lock" in os.listdir(hosts.state_dirs[1])  # a change takes the lock


def test_peer_drain_refuses_a_peer_left_without_a_plane(hosts):
    h3 = {"name": "h3", "planes": [{"name": "a", "ipv4": "198.18.0.3/24"}, {"name": "b", "ipv4": "198.19.0.3/24"}]}
    h4 = {"name": "h4", "planes": [{"name": "a", "ipv4": "198.18.0.4/24"}]}
    fill(hosts, 1, extra=[h3, h4])
    maps = hosts.maps(1)
    Steering(maps, hosts.pins[1]).path_down(0, 1, [0])  # h2: plane b judged down
    ids = ok(state(hosts))["peers"]
    ids = {p["name"]: p["id"] for p in ids}
    snapshot = {n: maps.get_peer(i) for n, i in ids.items()}
    r = state(hosts, "a", state="drained", peers=["h3", "h2", "h4"])
    assert r.get("failed"), r
    assert r["msg"].startswith("force: steering traffic off plane 'a' would leave no plane for peers "
                               "h2 (b: down for this peer), h4 (b: no address of the peer); nothing was changed")
    assert {n: maps.get_peer(i) for n, i in ids.items()} == snapshot and drain_record(hosts) is None
    # A plane drained here (the whole plane) is no target either.
    ok(state(hosts, "b", state="drained", notify_peers=False))
    r = state(hosts, "a", state="drained", peers=["h3"])
    assert r.get("failed") and "h3 (b: drained here)" in r["msg"], r["msg"]
    ok(state(hosts, "b", state="active", notify_peers=False))
    r = ok(state(hosts, "a", state="drained", peers=["h3", "h4"], force=True, notify_peers=False))
    assert r["changed_peers"] == ["h3", "h4"]
    assert maps.get_peer(ids["h3"])["down_planes"] == [0] and maps.get_peer(ids["h3"])["active_plane"] == 1
    assert maps.get_peer(ids["h4"])["down_planes"] == [0] and maps.get_peer(ids["h4"])["active_plane"] == 0
    # The forced drain tells the operator, as a module warning, which peer it could not move.
    assert any("no other plane for peer h4 (b: no address of the peer): the traffic stays on plane 'a'" in w
               for w in r["warnings"]), r["warnings"]


def test_peer_drain_rolls_back_when_a_write_fails(hosts):
    h3 = {"name": "h3", "planes": [{"name": "a", "ipv4": "198.18.0.3/24"}, {"name": "b", "ipv4": "198.19.0.3/24"}]}
    fill(hosts, 1, extra=[h3])
    maps = hosts.maps(1)
    snapshot = {i: maps.get_peer(i) for i in maps.peer_ids()}
    real, writes = MapHandle.put, []

    def put(self, key, value, flags=0):
        if self.spec.name == "edgeft_state_v1":
            writes.append(key)
            if len(writes) == 2:
                raise OSError(errno.EIO, "injected")
        return real(self, key, value, flags)

    with mock.patch.object(MapHandle, "put", put):
        r = state(hosts, "a", state="drained", peers=["h2", "h3"])
    assert r.get("failed") and "the 1 peer(s) written before it were restored, nothing changed" in r["msg"], r["msg"]
    assert len(writes) == 3  # h2, h3 (failed), h2 back
    assert {i: maps.get_peer(i) for i in maps.peer_ids()} == snapshot
    assert drain_record(hosts)["hosts"] == {}


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
