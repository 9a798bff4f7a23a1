"""Routed mode: translation to failover addresses and back (BPF_PROG_TEST_RUN,
real kernel), every checksum of the result verified by scapy recomputing it.

This host's plane 0 is down; plane 1 is routed. Egress on plane 0 to the peer's
plane-0 address must leave on plane 1 from our plane-1 failover address to the
peer's, with every checksum still right; ingress on plane 1 of the peer's
translated packets must come back as native plane-0 addresses. The kernel's
test run builds its skb with CHECKSUM_NONE: the offloaded (CHECKSUM_PARTIAL)
case is covered by tests/kernel/bpf/test_routed_translation_offload.py on veths.
"""

from __future__ import annotations

import ipaddress

import pytest
from scapy.layers.inet import ICMP, IP, TCP, UDP, IPerror, fragment
from scapy.layers.inet6 import (
    ICMPv6DestUnreach,
    ICMPv6EchoRequest,
    ICMPv6PacketTooBig,
    IPerror6,
    IPv6,
    IPv6ExtHdrFragment,
    fragment6,
)
from scapy.layers.l2 import Ether

import bpf_packets as P
from checksums import udp_datagram_checksum_ok, wrong_checksums
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.testrun import (
    TC_ACT_REDIRECT,
    TC_ACT_UNSPEC,
    prog_test_run,
)

FAMILIES = pytest.mark.parametrize("family", [4, 6], ids=["ipv4", "ipv6"])
# Plane 1's failover addresses, standing for each host's plane-0 address.
FO_LOCAL = {4: "198.19.255.1", 6: "fd00:edf7:b:ff::1"}
FO_PEER = {4: "198.19.255.2", 6: "fd00:edf7:b:ff::2"}
ROUTER = {4: "198.19.0.254", 6: "fd00:edf7:b::fe"}  # a plane-1 router, no peer


@pytest.fixture
def routed(dp):
    """Plane 1 routed, plane 0 down, the peer known with its failover address."""
    dp.maps.set_plane(0, 1000, up=False)
    dp.maps.set_plane(1, 1001, routed=True)
    dp.maps.set_peer(P.PEER_ID, v4=P.PEER[4], v6=P.PEER[6])
    for family in (4, 6):
        dp.maps.set_failover(P.LOCAL[family][0], 1, FO_LOCAL[family], local=True)
        dp.maps.set_failover(P.PEER[family][0], 1, FO_PEER[family])
    return dp


def ip(family, src, dst, **kw):
    return IP(src=src, dst=dst, **kw) if family == 4 else IPv6(src=src, dst=dst, **kw)


def frame(family, src, dst, l4, payload=b"edgeft-routed" * 4, ours=True):
    macs = (P.MAC_LOCAL, P.MAC_PEER) if ours else (P.MAC_PEER, P.MAC_LOCAL)
    return bytes(Ether(src=macs[0], dst=macs[1]) / ip(family, src, dst) / l4 / payload)


def echo(family):
    return ICMP(type=8, id=7, seq=1) if family == 4 else ICMPv6EchoRequest(id=7, seq=1)


L4 = {
    "tcp": lambda family: TCP(sport=4000, dport=5000, flags="PA", seq=1234),
    "udp": lambda family: UDP(sport=4000, dport=5000),
    "icmp": echo,
}


def addresses(data: bytes, family: int):
    pkt = Ether(data)
    layer = pkt[IP] if family == 4 else pkt[IPv6]
    return layer.src, layer.dst


def egress(dp, pkt, plane=0):
    return prog_test_run(dp.fd(plane, "egress"), pkt)


def ingress(dp, pkt, plane=1):
    return prog_test_run(dp.fd(plane, "ingress"), pkt)


@FAMILIES
@pytest.mark.parametrize("proto", sorted(L4))
def test_egress_translates_to_failover_addresses_with_valid_checksums(routed, family, proto):
    pkt = frame(family, P.LOCAL[family][0], P.PEER[family][0], L4[proto](family))
    r = egress(routed, pkt)
    assert r.retval == TC_ACT_REDIRECT
    assert addresses(r.data, family) == (FO_LOCAL[family], FO_PEER[family])
    assert wrong_checksums(r.data) == []
    assert len(r.data) == len(pkt)
    x = routed.maps.xlat_counters_of(1)
    assert x["translated_out"] == 1 and x["untranslatable"] == 0


@FAMILIES
@pytest.mark.parametrize("proto", sorted(L4))
def test_ingress_translates_back_to_native_addresses(routed, family, proto):
    pkt = frame(family, FO_PEER[family], FO_LOCAL[family], L4[proto](family), ours=False)
    r = ingress(routed, pkt)
    assert r.retval == TC_ACT_UNSPEC
    assert addresses(r.data, family) == (P.PEER[family][0], P.LOCAL[family][0])
    assert wrong_checksums(r.data) == []
    assert routed.maps.xlat_counters_of(1)["translated_in"] == 1


@FAMILIES
@pytest.mark.parametrize("proto", sorted(L4))
def test_a_round_trip_restores_every_byte(routed, family, proto):
    """Egress here, then the peer's ingress (the mirror image of our maps):
    the receiver gets the very packet that was sent."""
    pkt = frame(family, P.LOCAL[family][0], P.PEER[family][0], L4[proto](family))
    out = egress(routed, pkt).data
    # The peer's view: its failover address is local, ours is a peer's.
    routed.maps.set_failover(P.LOCAL[family][0], 1, FO_LOCAL[family], local=False)
    routed.maps.set_failover(P.PEER[family][0], 1, FO_PEER[family], local=True)
    back = ingress(routed, out).data
    assert back == pkt


def test_ipv4_udp_without_checksum_keeps_none(routed):
    pkt = bytearray(frame(4, P.LOCAL[4][0], P.PEER[4][0], UDP(sport=4000, dport=5000)))
    pkt[40:42] = b"\0\0"  # UDP checksum: none
    r = egress(routed, bytes(pkt))
    assert Ether(r.data)[UDP].chksum == 0
    assert wrong_checksums(r.data) == []


@FAMILIES
def test_native_plane_1_traffic_is_untouched(routed, family):
    """Multi-rail: the same two hosts' own plane-1 flow passes as it is, both ways."""
    out = frame(family, P.LOCAL[family][1], P.PEER[family][1], L4["tcp"](family))
    r = egress(routed, out, plane=1)
    assert (r.retval, r.data) == (TC_ACT_UNSPEC, out)
    back = frame(family, P.PEER[family][1], P.LOCAL[family][1], L4["tcp"](family), ours=False)
    r = ingress(routed, back)
    assert (r.retval, r.data) == (TC_ACT_UNSPEC, back)
    x = routed.maps.xlat_counters_of(1)
    assert x["translated_out"] == x["translated_in"] == 0


@FAMILIES
def test_only_our_own_failover_addresses_are_translated_back(routed, family):
    # To the peer's failover address (not ours): not for us to rewrite.
    other = frame(family, FO_LOCAL[family], FO_PEER[family], L4["udp"](family), ours=False)
    assert ingress(routed, other).data == other
    # A stranger's native traffic to our failover address: delivered as it is.
    ping = frame(family, ROUTER[family], FO_LOCAL[family], echo(family), ours=False)
    r = ingress(routed, ping)
    assert (r.retval, r.data) == (TC_ACT_UNSPEC, ping)


@FAMILIES
def test_ingress_learns_the_peer_left_plane_0(dp, family):
    """After translating back, the peer's plane-0 address arriving on plane 1
    teaches us its choice, as on L2 planes."""
    dp.maps.set_plane(1, 1001, routed=True)  # both planes up here
    dp.maps.set_peer(P.PEER_ID, v4=P.PEER[4], v6=P.PEER[6])
    dp.maps.set_failover(P.LOCAL[family][0], 1, FO_LOCAL[family], local=True)
    dp.maps.set_failover(P.PEER[family][0], 1, FO_PEER[family])
    ingress(dp, frame(family, FO_PEER[family], FO_LOCAL[family], L4["udp"](family), ours=False))
    peer = dp.maps.get_peer(P.PEER_ID)
    assert peer["active_plane"] == 1 and 0 in peer["down_planes"], peer


@FAMILIES
def test_without_a_failover_address_nothing_is_steered(routed, family):
    routed.maps.delete_failover(P.PEER[family][0], 1)
    pkt = frame(family, P.LOCAL[family][0], P.PEER[family][0], L4["udp"](family))
    r = egress(routed, pkt)
    assert (r.retval, r.data) == (TC_ACT_UNSPEC, pkt)
    assert routed.maps.xlat_counters_of(0)["untranslatable"] == 1
    assert routed.maps.plane_counters(0)["steer_skipped"] == 1


def icmp_error(family, src, dst, quoted):
    """An error about `quoted` (an IP packet), as a router or host sends it."""
    if family == 4:
        return IP(src=src, dst=dst) / ICMP(type=3, code=4, nexthopmtu=1400) / quoted
    return IPv6(src=src, dst=dst) / ICMPv6PacketTooBig(mtu=1400) / quoted


@FAMILIES
@pytest.mark.parametrize("proto", ["tcp", "udp"])
def test_a_routers_icmp_error_reaches_the_native_socket(routed, family, proto):
    """Path MTU discovery for translated flows: a plane-1 router's error about
    our translated packet gets our native address and a quote of the packet
    as our stack sent it, every checksum (quoted ones too) right."""
    quoted = ip(family, FO_LOCAL[family], FO_PEER[family]) / L4[proto](family) / (b"q" * 40)
    pkt = bytes(Ether(src=P.MAC_PEER, dst=P.MAC_LOCAL) / icmp_error(family, ROUTER[family], FO_LOCAL[family], quoted))
    r = ingress(routed, pkt)
    assert r.retval == TC_ACT_UNSPEC
    out = Ether(r.data)
    outer = out[IP] if family == 4 else out[IPv6]
    inner = out[IPerror] if family == 4 else out[IPerror6]
    assert (outer.src, outer.dst) == (ROUTER[family], P.LOCAL[family][0])
    assert (inner.src, inner.dst) == (P.LOCAL[family][0], P.PEER[family][0])
    assert wrong_checksums(r.data) == []
    assert routed.maps.xlat_counters_of(1)["icmp_errors_in"] == 1


@FAMILIES
def test_our_icmp_error_to_the_peer_is_translated_with_its_quote(routed, family):
    """Our port unreachable about the peer's packet, sent while plane 0 is down."""
    quoted = ip(family, P.PEER[family][0], P.LOCAL[family][0]) / UDP(sport=5000, dport=4000) / (b"q" * 40)
    if family == 4:
        err = IP(src=P.LOCAL[4][0], dst=P.PEER[4][0]) / ICMP(type=3, code=3) / quoted
    else:
        err = IPv6(src=P.LOCAL[6][0], dst=P.PEER[6][0]) / ICMPv6DestUnreach(code=4) / quoted
    r = egress(routed, bytes(Ether(src=P.MAC_LOCAL, dst=P.MAC_PEER) / err))
    assert r.retval == TC_ACT_REDIRECT
    out = Ether(r.data)
    inner = out[IPerror] if family == 4 else out[IPerror6]
    assert addresses(r.data, family) == (FO_LOCAL[family], FO_PEER[family])
    assert (inner.src, inner.dst) == (FO_PEER[family], FO_LOCAL[family])
    assert wrong_checksums(r.data) == []


@FAMILIES
def test_fragments_translate_and_reassemble_with_a_valid_checksum(routed, family):
    """The first fragment's UDP checksum covers the whole datagram: fixed there;
    later fragments have no L4 header: only their addresses change."""
    src, dst = P.LOCAL[family][0], P.PEER[family][0]
    if family == 4:
        frags = fragment(IP(src=src, dst=dst) / UDP(sport=4000, dport=5000) / (b"F" * 1200), fragsize=512)
    else:
        frags = fragment6(IPv6(src=src, dst=dst) / IPv6ExtHdrFragment() / UDP(sport=4000, dport=5000) / (b"F" * 1200), 600)
    assert len(frags) >= 3
    pieces = {}
    for f in frags:
        r = egress(routed, bytes(Ether(src=P.MAC_LOCAL, dst=P.MAC_PEER) / f))
        assert r.retval == TC_ACT_REDIRECT
        assert addresses(r.data, family) == (FO_LOCAL[family], FO_PEER[family])
        out = Ether(r.data)
        if family == 4:
            assert wrong_checksums(bytes(Ether() / IP(bytes(out[IP])[:20]))) == []  # the header's own
            pieces[out[IP].frag * 8] = bytes(out[IP].payload)
        else:
            pieces[out[IPv6ExtHdrFragment].offset * 8] = bytes(out[IPv6ExtHdrFragment].payload)
    datagram = b"".join(pieces[k] for k in sorted(pieces))
    assert udp_datagram_checksum_ok(datagram, family, FO_LOCAL[family], FO_PEER[family])


@FAMILIES
def test_the_checksum_oracle_sees_a_stale_quoted_checksum(family):
    """wrong_checksums is what the tests above trust: an address changed in a
    quote without its checksums is caught (outer error checksum and quoted ones)."""
    quoted = ip(family, FO_LOCAL[family], FO_PEER[family]) / L4["tcp"](family) / (b"q" * 40)
    good = bytes(Ether(src=P.MAC_PEER, dst=P.MAC_LOCAL) / icmp_error(family, ROUTER[family], FO_LOCAL[family], quoted))
    assert wrong_checksums(good) == []
    at = good.rfind(ipaddress.ip_address(FO_PEER[family]).packed)  # the quoted destination
    stale = good[:at] + bytes(4) + good[at + 4:]
    assert any(w.startswith("TCP in ICMP") for w in wrong_checksums(stale)), wrong_checksums(stale)
    icmp_check = 14 + (20 if family == 4 else 40) + 2
    bad_outer = good[:icmp_check] + bytes([good[icmp_check] ^ 0xFF]) + good[icmp_check + 1:]
    assert len(wrong_checksums(bad_outer)) == 1


@FAMILIES
def test_a_kernel_routed_packet_on_the_routed_plane_is_translated_in_place(dp, family):
    """The agent's backup and held routes send a peer's plane-0 address out of plane 1's
    NIC (via its gateway) when plane 0 is down or gone: there it can only go translated,
    in place (the kernel already resolved the gateway), and is not redirected."""
    dp.maps.set_plane(1, 1001, routed=True)
    dp.maps.set_peer(P.PEER_ID, v4=P.PEER[4], v6=P.PEER[6])
    dp.maps.set_failover(P.LOCAL[family][0], 1, FO_LOCAL[family], local=True)
    dp.maps.set_failover(P.PEER[family][0], 1, FO_PEER[family])
    pkt = frame(family, P.LOCAL[family][0], P.PEER[family][0], L4["tcp"](family))
    r = egress(dp, pkt, plane=1)
    assert r.retval == TC_ACT_UNSPEC
    assert addresses(r.data, family) == (FO_LOCAL[family], FO_PEER[family])
    assert r.data[:12] == pkt[:12]  # the MACs the kernel chose stay
    assert wrong_checksums(r.data) == []
    assert dp.maps.xlat_counters_of(1)["translated_out"] == 1
    # From a source that has no failover address: left alone, and counted.
    other = frame(family, P.LOCAL[family][1], P.PEER[family][0], L4["tcp"](family))
    r = egress(dp, other, plane=1)
    assert (r.retval, r.data) == (TC_ACT_UNSPEC, other)
    assert dp.maps.xlat_counters_of(1)["untranslatable"] == 1
