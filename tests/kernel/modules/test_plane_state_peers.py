"""edgeft.failover.plane_state for some peers only (option peers), on the two hosts of
test_plane_state.py: one peer's traffic steered off a plane and back, the record of what it
changed, refusals, check mode and a rollback."""

from __future__ import annotations

import errno
import os
import time
from unittest import mock

import pytest

import hostlab as L
from plane_state_env import delta, counters, drain_record, fill, ok, peer_state, ping, routing, state, udp_roundtrip, wait_for

from ansible_collections.edgeft.failover.plugins.module_utils.agent.steer import Steering
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.handle import MapHandle

pytestmark = pytest.mark.skipif(L.missing() is not None, reason=str(L.missing()))


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
    assert delta(base, now, 1, 0, "steered_packets") >= 10 and delta(base, now, 1, 1, "steered_in_packets") >= 10
    assert delta(base, now, 1, 0, "tx_packets") == 0
    assert delta(base, now, 2, 0, "rx_packets") == 0 and delta(base, now, 2, 1, "rx_packets") >= 10
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
    assert delta(base, now, 1, 0, "tx_packets") >= 5 and delta(base, now, 1, 0, "steered_packets") == 0
    assert delta(base, now, 2, 0, "rx_packets") >= 5 and delta(base, now, 2, 1, "rx_packets") == 0
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
