"""Ingress: last-seen, counters and learning the peer's plane from steered traffic."""

from __future__ import annotations

import time

import pytest

import bpf_packets as P
from bpf_packets import FAMILIES, add_peer
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.testrun import (
    TC_ACT_REDIRECT,
    TC_ACT_UNSPEC,
    prog_test_run,
)


def ingress(dp, pkt: bytes, plane: int):
    r = prog_test_run(dp.fd(plane, "ingress"), pkt)
    assert r.retval == TC_ACT_UNSPEC  # ingress never acts on a packet
    assert r.data == pkt
    return r


@FAMILIES
def test_native_traffic_updates_last_seen_and_counters(dp, family):
    add_peer(dp)
    pkt = P.from_peer(family, plane=0)
    before = time.monotonic_ns()
    ingress(dp, pkt, plane=0)
    after = time.monotonic_ns()
    seen = dp.maps.last_seen(P.PEER_ID)
    assert before <= seen[0] <= after  # bpf_ktime_get_ns is CLOCK_MONOTONIC
    assert seen[1:] == [0, 0, 0]
    c = dp.maps.plane_counters(0)
    assert (c["rx_packets"], c["rx_bytes"], c["learned"]) == (1, len(pkt), 0)
    assert dp.maps.plane_counters(1)["rx_packets"] == 0
    peer = dp.maps.get_peer(P.PEER_ID)
    assert (peer["active_plane"], peer["down_planes"], peer["changed_ns"]) == (0, [], 0)


@FAMILIES
def test_steered_traffic_is_learned_at_once(dp, family):
    """The peer's plane-0 address arriving on plane 1: the peer left plane 0."""
    add_peer(dp)
    ingress(dp, P.from_peer(family, plane=0), plane=1)
    peer = dp.maps.get_peer(P.PEER_ID)
    assert peer["active_plane"] == 1
    assert peer["down_planes"] == [0]
    assert peer["changed_ns"] > 0
    assert dp.maps.plane_counters(1)["learned"] == 1
    assert dp.maps.last_seen(P.PEER_ID)[1] > 0

    ingress(dp, P.from_peer(family, plane=0), plane=1)  # no news: no event
    assert dp.maps.plane_counters(1)["learned"] == 1


@FAMILIES
def test_learned_plane_steers_our_return_traffic(dp, family):
    add_peer(dp)
    ingress(dp, P.from_peer(family, plane=0), plane=1)
    pkt = P.to_peer(family, plane=0)
    r = prog_test_run(dp.fd(0, "egress"), pkt)
    assert (r.retval, r.data) == (TC_ACT_REDIRECT, pkt)


@FAMILIES
def test_learning_clears_the_arrival_plane_from_down(dp, family):
    add_peer(dp, active_plane=0, down_planes=[1])
    ingress(dp, P.from_peer(family, plane=0), plane=1)
    peer = dp.maps.get_peer(P.PEER_ID)
    assert (peer["active_plane"], peer["down_planes"]) == (1, [0])


@FAMILIES
@pytest.mark.parametrize("state", ["drained", "down"])
def test_no_learning_onto_an_unusable_local_plane(dp, family, state):
    add_peer(dp)
    dp.maps.set_plane(1, 1001, up=state != "down", drained=state == "drained")
    ingress(dp, P.from_peer(family, plane=0), plane=1)
    peer = dp.maps.get_peer(P.PEER_ID)
    assert (peer["active_plane"], peer["down_planes"]) == (0, [])
    assert dp.maps.plane_counters(1)["learned"] == 0
    assert dp.maps.plane_counters(1)["rx_packets"] == 1  # still seen


@FAMILIES
def test_no_learn_flag_is_honoured(dp, family):
    add_peer(dp, flags=layout.PEER_NO_LEARN)
    ingress(dp, P.from_peer(family, plane=0), plane=1)
    assert dp.maps.get_peer(P.PEER_ID)["active_plane"] == 0


@FAMILIES
def test_multi_rail_native_traffic_learns_nothing(dp, family):
    add_peer(dp)
    ingress(dp, P.from_peer(family, plane=1), plane=1)
    peer = dp.maps.get_peer(P.PEER_ID)
    assert (peer["active_plane"], peer["down_planes"]) == (0, [])
    assert dp.maps.last_seen(P.PEER_ID)[1] > 0


@FAMILIES
def test_identity_address_counts_but_learns_nothing(dp, family):
    """An address native to no plane cannot tell which plane the peer left."""
    ident = {4: "198.18.200.2", 6: "fd00:edf7:ff::2"}[family]
    add_peer(dp)
    dp.maps.set_address(ident, P.PEER_ID)  # plane = PLANE_NONE
    pkt = P.udp(family, ident, P.LOCAL[family][1], macs=(P.MAC_PEER, P.MAC_LOCAL))
    ingress(dp, pkt, plane=1)
    assert dp.maps.get_peer(P.PEER_ID)["active_plane"] == 0
    assert dp.maps.last_seen(P.PEER_ID)[1] > 0


@FAMILIES
def test_unknown_source_changes_nothing(dp, family):
    add_peer(dp)
    pkt = P.udp(family, P.STRANGER[family], P.LOCAL[family][1], macs=(P.MAC_PEER, P.MAC_LOCAL))
    ingress(dp, pkt, plane=1)
    assert dp.maps.last_seen(P.PEER_ID) == [0, 0, 0, 0]
    assert dp.maps.plane_counters(1)["rx_packets"] == 0


def _bad_ip_header(frame: bytes, family: int) -> bytes:
    """IPv4 whose IHL claims 60 header bytes in a 34-byte frame; IPv6 saying version 4."""
    if family == 4:
        return frame[:14] + b"\x4f" + frame[15:34]
    return frame[:14] + b"\x45" + frame[15:]


@FAMILIES
@pytest.mark.parametrize("kind", ["bad_ip_header", "vlan_tagged", "broadcast_mac", "multicast"])
def test_not_understood_frames_change_nothing(dp, family, kind):
    add_peer(dp)
    good = P.from_peer(family, plane=0)
    pkt = {
        "bad_ip_header": _bad_ip_header(good, family),
        "multicast": P.multicast(family, P.PEER[family][0]),
        "vlan_tagged": P.vlan(family, P.PEER[family][0], P.LOCAL[family][1]),
        "broadcast_mac": P.broadcast_mac(family, P.PEER[family][0], P.LOCAL[family][1]),
    }[kind]
    ingress(dp, pkt, plane=1)
    assert dp.maps.get_peer(P.PEER_ID)["active_plane"] == 0
    assert dp.maps.last_seen(P.PEER_ID) == [0, 0, 0, 0]


# ---- what a packet taught, a packet can undo (docs/datapath.md, "Learning")
def _past_hold(dp):
    """Pretend the last change is older than EDGEFT_LEARN_HOLD_NS."""
    dp.maps.hold(at_ns=time.monotonic_ns() - layout.TUNABLES["EDGEFT_LEARN_HOLD_NS"] - 1)


@FAMILIES
def test_learning_marks_what_it_learned(dp, family):
    add_peer(dp)
    ingress(dp, P.from_peer(family, plane=0), plane=1)
    peer = dp.maps.get_peer(P.PEER_ID)
    assert (peer["down_planes"], peer["learned_planes"]) == ([0], [0])


@FAMILIES
def test_a_judged_down_plane_is_not_marked_learned(dp, family):
    """The agent marked plane 0 down itself; the peer agreeing teaches nothing new."""
    add_peer(dp, active_plane=0, down_planes=[0])
    ingress(dp, P.from_peer(family, plane=0), plane=1)
    peer = dp.maps.get_peer(P.PEER_ID)
    assert (peer["active_plane"], peer["down_planes"], peer["learned_planes"]) == (1, [0], [])


@FAMILIES
def test_native_traffic_again_forgets_what_was_learned(dp, family):
    add_peer(dp)
    ingress(dp, P.from_peer(family, plane=0), plane=1)
    _past_hold(dp)
    before = time.monotonic_ns()
    ingress(dp, P.from_peer(family, plane=0), plane=0)  # the peer is back on plane 0
    peer = dp.maps.get_peer(P.PEER_ID)
    assert (peer["active_plane"], peer["down_planes"], peer["learned_planes"]) == (0, [], [])
    assert peer["changed_ns"] >= before
    assert dp.maps.plane_counters(0)["unlearned"] == 1
    pkt = P.to_peer(family, plane=0)  # and our traffic to it stays on plane 0 again
    assert_pass_egress(dp, pkt)


@FAMILIES
def test_native_traffic_never_clears_a_judged_plane(dp, family):
    """One-way failure: we judged plane 0 broken, the peer still reaches us on it."""
    add_peer(dp, active_plane=1, down_planes=[0])
    ingress(dp, P.from_peer(family, plane=0), plane=0)
    peer = dp.maps.get_peer(P.PEER_ID)
    assert peer["down_planes"] == [0]
    assert dp.maps.plane_counters(0)["unlearned"] == 0


@FAMILIES
def test_within_the_hold_packets_change_nothing(dp, family):
    """Packets the peer sent before it switched, still in flight, do not flip us back."""
    add_peer(dp)
    ingress(dp, P.from_peer(family, plane=0), plane=1)  # learned: left plane 0
    ingress(dp, P.from_peer(family, plane=0), plane=0)  # an in-flight native packet
    assert dp.maps.get_peer(P.PEER_ID)["down_planes"] == [0]
    dp.maps.clear_down(P.PEER_ID, 0)  # the control plane fails back: hold again
    assert dp.maps.get_peer(P.PEER_ID)["active_plane"] == 0  # back where nothing is avoided
    ingress(dp, P.from_peer(family, plane=0), plane=1)  # an in-flight steered packet
    peer = dp.maps.get_peer(P.PEER_ID)
    assert (peer["active_plane"], peer["down_planes"]) == (0, [])
    assert dp.maps.plane_counters(1)["learned"] == 1


@FAMILIES
@pytest.mark.parametrize("state", ["drained", "down"])
def test_no_learning_of_a_plane_we_already_left(dp, family, state):
    """Plane 0 is drained/down here: the peer steering off it only echoes us."""
    add_peer(dp)
    dp.maps.set_plane(0, 1000, up=state != "down", drained=state == "drained")
    ingress(dp, P.from_peer(family, plane=0), plane=1)
    peer = dp.maps.get_peer(P.PEER_ID)
    assert (peer["active_plane"], peer["down_planes"], peer["learned_planes"]) == (0, [], [])
    assert dp.maps.plane_counters(1)["learned"] == 0


def test_neighbour_discovery_teaches_nothing(dp):
    """ND is never steered, so it says nothing about the peer's choice either way; and the
    kernel keeps neighbour entries fresh on a drained plane, so it is not traffic: not counted,
    not seen (a drained plane must look unused to the maintenance verification)."""
    add_peer(dp)
    na = P.neighbour_advertisement(P.PEER[6][0], P.LOCAL[6][0])
    ingress(dp, na, plane=1)  # plane-0 source on plane 1, but ND
    assert dp.maps.get_peer(P.PEER_ID)["down_planes"] == []
    assert dp.maps.last_seen(P.PEER_ID)[1] == 0
    assert dp.maps.plane_counters(1)["rx_packets"] == 0
    ingress(dp, P.from_peer(6, plane=0), plane=1)
    _past_hold(dp)
    ingress(dp, na, plane=0)  # native ND does not unlearn
    assert dp.maps.get_peer(P.PEER_ID)["learned_planes"] == [0]


def test_set_active_is_a_judgement_and_holds(dp):
    add_peer(dp)
    ingress(dp, P.from_peer(4, plane=0), plane=1)
    before = time.monotonic_ns()
    dp.maps.set_active(P.PEER_ID, 1)
    peer = dp.maps.get_peer(P.PEER_ID)
    assert (peer["down_planes"], peer["learned_planes"]) == ([0, 2, 3], [])
    assert peer["changed_ns"] >= before


def assert_pass_egress(dp, pkt):
    r = prog_test_run(dp.fd(0, "egress"), pkt)
    assert (r.retval, r.data) == (TC_ACT_UNSPEC, pkt)
