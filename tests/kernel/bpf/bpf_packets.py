"""scapy frames for the data path tests, the peer they come from and go to, and the IPv4/IPv6
parametrization; addresses from the lab ranges only."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP, IPOption_RR
from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop
from scapy.layers.l2 import ARP, Dot1Q, Ether

# This host (.1) and the peer (.2) on plane 0 / plane 1.
LOCAL = {4: ("198.18.0.1", "198.19.0.1"), 6: ("fd00:edf7:a::1", "fd00:edf7:b::1")}
PEER = {4: ("198.18.0.2", "198.19.0.2"), 6: ("fd00:edf7:a::2", "fd00:edf7:b::2")}
STRANGER = {4: "198.18.0.99", 6: "fd00:edf7:a::99"}
PEER_ID = 7
FAMILIES = pytest.mark.parametrize("family", [4, 6], ids=["ipv4", "ipv6"])

MAC_LOCAL = "02:00:00:00:00:01"
MAC_PEER = "02:00:00:00:00:02"


def ip(family: int, src: str, dst: str, **kw):
    return IP(src=src, dst=dst, **kw) if family == 4 else IPv6(src=src, dst=dst, **kw)


def udp(family: int, src: str, dst: str, payload: bytes = b"edgeft" * 8, macs=(MAC_LOCAL, MAC_PEER), **kw) -> bytes:
    eth = Ether(src=macs[0], dst=macs[1])
    return bytes(eth / ip(family, src, dst, **kw) / UDP(sport=4000, dport=5000) / payload)


def to_peer(family: int, plane: int = 0, **kw) -> bytes:
    """Egress: this host's plane address to the peer's address on `plane`."""
    return udp(family, LOCAL[family][plane], PEER[family][plane], **kw)


def from_peer(family: int, plane: int = 0, **kw) -> bytes:
    """Ingress: the peer's address on `plane` to this host's."""
    return udp(family, PEER[family][plane], LOCAL[family][plane], macs=(MAC_PEER, MAC_LOCAL), **kw)


def ipv4_options(src: str, dst: str) -> bytes:
    return bytes(Ether(src=MAC_LOCAL, dst=MAC_PEER) / IP(src=src, dst=dst, options=[IPOption_RR()]) / UDP() / b"opt")


def fragments(family: int, src: str, dst: str) -> list:
    """First and a later fragment of one datagram (the later has no L4 header)."""
    if family == 4:
        from scapy.layers.inet import fragment

        frags = fragment(IP(src=src, dst=dst) / UDP() / (b"F" * 1200), fragsize=512)
        return [bytes(Ether(src=MAC_LOCAL, dst=MAC_PEER) / f) for f in frags]
    from scapy.layers.inet6 import fragment6

    pkt = Ether(src=MAC_LOCAL, dst=MAC_PEER) / IPv6(src=src, dst=dst) / IPv6ExtHdrFragment() / UDP() / (b"F" * 1200)
    return [bytes(Ether(src=MAC_LOCAL, dst=MAC_PEER) / f) for f in fragment6(pkt[IPv6], 600)]


def ipv6_hop_by_hop(src: str, dst: str) -> bytes:
    return bytes(Ether(src=MAC_LOCAL, dst=MAC_PEER) / IPv6(src=src, dst=dst) / IPv6ExtHdrHopByHop() / UDP() / b"hbh")


def vlan(family: int, src: str, dst: str) -> bytes:
    return bytes(Ether(src=MAC_LOCAL, dst=MAC_PEER) / Dot1Q(vlan=42) / ip(family, src, dst) / UDP() / b"vlan")


def arp_request(src: str, dst: str) -> bytes:
    return bytes(Ether(src=MAC_LOCAL, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, psrc=src, pdst=dst, hwsrc=MAC_LOCAL))


def multicast(family: int, src: str) -> bytes:
    if family == 4:
        return bytes(Ether(src=MAC_LOCAL, dst="01:00:5e:00:00:fb") / IP(src=src, dst="224.0.0.251") / UDP() / b"m")
    return bytes(Ether(src=MAC_LOCAL, dst="33:33:00:00:00:fb") / IPv6(src=src, dst="ff02::fb") / UDP() / b"m")


def broadcast_mac(family: int, src: str, dst: str) -> bytes:
    """A unicast IP destination inside an Ethernet broadcast frame."""
    return bytes(Ether(src=MAC_LOCAL, dst="ff:ff:ff:ff:ff:ff") / ip(family, src, dst) / UDP() / b"b")


def non_ip(dst_mac: str = MAC_PEER) -> bytes:
    return bytes(Ether(src=MAC_LOCAL, dst=dst_mac, type=0x88B5) / (b"\0" * 46))


def neighbour_solicitation(src: str, target: str, unicast: bool = True) -> bytes:
    """IPv6 NS for target: unicast (a refresh of a known entry) or to the solicited-node group."""
    from scapy.layers.inet6 import ICMPv6ND_NS, in6_getnsma, inet_pton, inet_ntop
    import socket

    dst = target if unicast else inet_ntop(socket.AF_INET6, in6_getnsma(inet_pton(socket.AF_INET6, target)))
    mac = MAC_PEER if unicast else "33:33:ff:00:00:02"
    return bytes(Ether(src=MAC_LOCAL, dst=mac) / IPv6(src=src, dst=dst, hlim=255) / ICMPv6ND_NS(tgt=target))


def neighbour_advertisement(src: str, dst: str) -> bytes:
    from scapy.layers.inet6 import ICMPv6ND_NA

    return bytes(Ether(src=MAC_PEER, dst=MAC_LOCAL) / IPv6(src=src, dst=dst, hlim=255) / ICMPv6ND_NA(tgt=src, R=0, S=1, O=1))


def add_peer(dp, **kw):
    """The peer these frames come from and go to (PEER_ID, PEER), in dp's maps."""
    dp.maps.set_peer(PEER_ID, v4=PEER[4], v6=PEER[6], **kw)
