"""Egress steering verdicts on crafted frames (BPF_PROG_TEST_RUN, real kernel)."""

from __future__ import annotations

import pytest

import bpf_packets as P
from bpf_packets import FAMILIES, add_peer
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.testrun import (
    TC_ACT_REDIRECT,
    TC_ACT_UNSPEC,
    prog_test_run,
)


def egress(dp, pkt: bytes, plane: int = 0):
    return prog_test_run(dp.fd(plane, "egress"), pkt)


def assert_pass(r, pkt: bytes) -> None:
    assert r.retval == TC_ACT_UNSPEC
    assert r.data == pkt


def assert_redirect(r, pkt: bytes) -> None:
    assert r.retval == TC_ACT_REDIRECT
    assert r.data == pkt  # L2 mode: every byte, the IP header included, unchanged


@FAMILIES
def test_peer_on_its_plane_passes_untouched(dp, family):
    add_peer(dp)
    pkt = P.to_peer(family)
    assert_pass(egress(dp, pkt), pkt)
    c = dp.maps.plane_counters(0)
    assert (c["tx_packets"], c["tx_bytes"], c["steered_packets"]) == (1, len(pkt), 0)


@FAMILIES
def test_traffic_to_a_peer_stamps_its_last_sent_slot(dp, family):
    """The agent's activity source: last tx per peer, on the NIC the route chose."""
    import time

    add_peer(dp)
    before = time.monotonic_ns()
    egress(dp, P.to_peer(family), plane=1)
    sent = dp.maps.last_sent(P.PEER_ID)
    assert sent[0] == 0 and sent[1] >= before and sent[2:] == [0, 0]
    assert dp.maps.last_traffic([P.PEER_ID]) == {P.PEER_ID: sent[1]}
    dp.maps.seen.put(P.PEER_ID * 4 + 0, sent[1] + 5)  # a later arrival counts as well
    assert dp.maps.last_traffic([P.PEER_ID, 0]) == {P.PEER_ID: sent[1] + 5, 0: 0}


@FAMILIES
def test_peer_active_on_other_plane_is_redirected(dp, family):
    add_peer(dp)
    dp.maps.set_active(P.PEER_ID, 1)
    pkt = P.to_peer(family)
    assert_redirect(egress(dp, pkt), pkt)
    c = dp.maps.plane_counters(0)
    assert (c["steered_packets"], c["steered_bytes"], c["tx_packets"]) == (1, len(pkt), 0)
    c = dp.maps.plane_counters(1)
    assert (c["steered_in_packets"], c["steered_in_bytes"]) == (1, len(pkt))


@FAMILIES
def test_redirected_packet_passes_on_the_target_plane(dp, family):
    """The target NIC's own egress program must not bounce it back."""
    add_peer(dp)
    dp.maps.set_active(P.PEER_ID, 1)
    pkt = P.to_peer(family)
    assert_pass(egress(dp, pkt, plane=1), pkt)


@FAMILIES
def test_drained_target_plane_gets_no_redirect(dp, family):
    add_peer(dp)
    dp.maps.set_active(P.PEER_ID, 1)
    dp.maps.set_plane(1, 1001, drained=True)
    pkt = P.to_peer(family)
    assert_pass(egress(dp, pkt), pkt)
    assert dp.maps.plane_counters(0)["steer_skipped"] == 1


@FAMILIES
def test_down_target_plane_gets_no_redirect(dp, family):
    add_peer(dp)
    dp.maps.set_active(P.PEER_ID, 1)
    dp.maps.set_plane(1, 1001, up=False)
    pkt = P.to_peer(family)
    assert_pass(egress(dp, pkt), pkt)


@FAMILIES
def test_no_peer_address_on_target_plane_gets_no_redirect(dp, family):
    dp.maps.set_peer(P.PEER_ID, v4=P.PEER[4][:1], v6=P.PEER[6][:1])
    dp.maps.set_active(P.PEER_ID, 1)
    pkt = P.to_peer(family)
    assert_pass(egress(dp, pkt), pkt)
    assert dp.maps.plane_counters(0)["steer_skipped"] == 1


@FAMILIES
def test_local_drain_moves_known_peers_off_the_plane(dp, family):
    add_peer(dp)
    dp.maps.set_plane(0, 1000, drained=True)
    pkt = P.to_peer(family)
    assert_redirect(egress(dp, pkt), pkt)


@FAMILIES
def test_unusable_active_plane_falls_back_to_first_usable(dp, family):
    add_peer(dp, active_plane=0, down_planes=[0])
    pkt = P.to_peer(family)
    assert_redirect(egress(dp, pkt), pkt)


@FAMILIES
def test_multi_rail_flow_keeps_its_plane(dp, family):
    """The peer's plane-1 address, sent on plane 1, is not pulled to plane 0."""
    add_peer(dp, active_plane=0)
    pkt = P.to_peer(family, plane=1)
    assert_pass(egress(dp, pkt, plane=1), pkt)
    assert dp.maps.plane_counters(1)["tx_packets"] == 1


@FAMILIES
def test_unconfigured_plane_steers_nothing(host, family):
    """Before any plane is configured, known peers' traffic stays put."""
    host.maps.clear()
    add_peer(host, down_planes=[0])
    pkt = P.to_peer(family)
    assert_pass(egress(host, pkt), pkt)


@FAMILIES
def test_unknown_destination_passes(dp, family):
    add_peer(dp)
    dp.maps.set_active(P.PEER_ID, 1)
    pkt = P.udp(family, P.LOCAL[family][0], P.STRANGER[family])
    assert_pass(egress(dp, pkt), pkt)
    c = dp.maps.plane_counters(0)
    assert c["tx_packets"] == c["steered_packets"] == c["steer_skipped"] == 0


def _steering_peer(dp):
    """A peer whose plane 0 is down: any packet the parser accepts is redirected."""
    add_peer(dp)
    dp.maps.set_active(P.PEER_ID, 1)


NOT_UNDERSTOOD = {
    "arp": lambda f: P.arp_request(P.LOCAL[4][0], P.PEER[4][0]),
    "non_ip": lambda f: P.non_ip(),
    "eth_only_non_ip": lambda f: P.non_ip()[:14],
    "vlan_tagged": lambda f: P.vlan(f, P.LOCAL[f][0], P.PEER[f][0]),
    "multicast": lambda f: P.multicast(f, P.LOCAL[f][0]),
    "broadcast_mac": lambda f: P.broadcast_mac(f, P.LOCAL[f][0], P.PEER[f][0]),
}


@FAMILIES
@pytest.mark.parametrize("kind", sorted(NOT_UNDERSTOOD))
def test_not_understood_frames_pass_unmodified(dp, family, kind):
    _steering_peer(dp)
    pkt = NOT_UNDERSTOOD[kind](family)
    assert_pass(egress(dp, pkt), pkt)
    assert dp.maps.plane_counters(0)["steered_packets"] == 0


# Frames cut inside the fixed IP header (Ethernet only with an IP ethertype,
# IPv4/IPv6 header cut short): BPF_PROG_TEST_RUN refuses them (EINVAL) on
# recent kernels, so test_truncated_frames.py runs them through both programs
# attached to real veths instead.


def test_ipv4_options_announced_but_missing_pass(dp):
    """IHL says 60 bytes of header, the frame ends after 20."""
    _steering_peer(dp)
    pkt = bytearray(P.to_peer(4)[: 14 + 20])
    pkt[14] = 0x4F
    assert_pass(egress(dp, bytes(pkt)), bytes(pkt))


def test_ipv4_bad_header_length_passes(dp):
    _steering_peer(dp)
    pkt = bytearray(P.to_peer(4))
    pkt[14] = 0x44  # version 4, IHL 4 (< 5): not a valid header
    assert_pass(egress(dp, bytes(pkt)), bytes(pkt))


def test_ethertype_ipv4_with_version_6_passes(dp):
    _steering_peer(dp)
    pkt = bytearray(P.to_peer(4))
    pkt[14] = 0x65
    assert_pass(egress(dp, bytes(pkt)), bytes(pkt))


def test_ipv6_with_v4_mapped_destination_passes(dp):
    """::ffff:a.b.c.d is our IPv4 key space, never a real IPv6 destination."""
    _steering_peer(dp)
    pkt = P.udp(6, P.LOCAL[6][0], "::ffff:" + P.PEER[4][0])
    assert_pass(egress(dp, pkt), pkt)


# Packets whose addresses sit where the parser expects them: steering by L3
# alone is right for them, so they follow their flow, bytes untouched.
L3_ONLY = {
    "ipv4_options": (4, lambda src, dst: [P.ipv4_options(src, dst)]),
    "ipv4_fragments": (4, lambda src, dst: P.fragments(4, src, dst)),
    "ipv6_hop_by_hop": (6, lambda src, dst: [P.ipv6_hop_by_hop(src, dst)]),
    "ipv6_fragments": (6, lambda src, dst: P.fragments(6, src, dst)),
}


@pytest.mark.parametrize("kind", sorted(L3_ONLY))
def test_l3_only_packets_follow_their_flow(dp, kind):
    family, make = L3_ONLY[kind]
    add_peer(dp)
    pkts = make(P.LOCAL[family][0], P.PEER[family][0])
    assert len(pkts) >= 1
    for pkt in pkts:  # peer healthy on plane 0: untouched
        assert_pass(egress(dp, pkt), pkt)
    dp.maps.set_active(P.PEER_ID, 1)
    for pkt in pkts:  # every fragment of a datagram goes the same way
        assert_redirect(egress(dp, pkt), pkt)
    for pkt in make(P.LOCAL[family][0], P.STRANGER[family]):
        assert_pass(egress(dp, pkt), pkt)


def test_special_packets_are_what_they_claim():
    """Guard the builders: options present, later fragments without L4."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6ExtHdrFragment, IPv6ExtHdrHopByHop
    from scapy.layers.l2 import Ether

    assert P.ipv4_options(P.LOCAL[4][0], P.PEER[4][0])[14] & 0xF > 5
    assert IPv6ExtHdrHopByHop in Ether(P.ipv6_hop_by_hop(P.LOCAL[6][0], P.PEER[6][0]))
    v4 = [Ether(f) for f in P.fragments(4, P.LOCAL[4][0], P.PEER[4][0])]
    assert len(v4) >= 2 and v4[-1][IP].frag > 0 and UDP not in v4[-1]
    v6 = [Ether(f) for f in P.fragments(6, P.LOCAL[6][0], P.PEER[6][0])]
    assert len(v6) >= 2 and v6[-1][IPv6ExtHdrFragment].offset > 0


def test_neighbour_discovery_is_never_steered(dp):
    """A unicast NS for the peer's plane-0 address must leave on plane 0, drained
    or not, or the neighbour entry there (next hop of later steering) dies."""
    _steering_peer(dp)
    dp.maps.set_plane(0, 1000, drained=True)
    pkt = P.neighbour_solicitation(P.LOCAL[6][0], P.PEER[6][0])
    assert_pass(egress(dp, pkt), pkt)
    c = dp.maps.plane_counters(0)
    assert c["steered_packets"] == c["tx_packets"] == c["steer_skipped"] == 0
    data = P.to_peer(6)  # the same peer's ordinary traffic is still steered
    assert_redirect(egress(dp, data), data)
