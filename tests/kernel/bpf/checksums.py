"""The checksum oracle of the routed-mode tests: scapy recomputes every checksum."""

from __future__ import annotations

from scapy.layers.inet import IP, UDP, in4_chksum
from scapy.layers.inet6 import IPv6, in6_chksum
from scapy.layers.l2 import Ether
from scapy.packet import NoPayload


def layers(pkt):
    while not isinstance(pkt, NoPayload):
        yield pkt
        pkt = pkt.payload


def checksum_field(layer):
    names = {f.name for f in layer.fields_desc}
    return next((n for n in ("chksum", "cksum") if n in names), None)


def wrong_checksums(data: bytes) -> list:
    """Layers whose checksum differs from the one scapy computes for the bytes:
    every one, quoted headers inside ICMP errors included. A v4 UDP checksum
    of 0 ("none") is accepted as such."""
    got, fresh = Ether(data), Ether(data)
    for layer in layers(fresh):
        name = checksum_field(layer)
        if name:
            setattr(layer, name, None)
    want = Ether(bytes(fresh))
    wrong = []
    for a, b in zip(layers(got), layers(want)):
        name = checksum_field(a)
        if not name or (isinstance(a, UDP) and a.chksum == 0 and isinstance(a.underlayer, IP)):
            continue
        if getattr(a, name) != getattr(b, name):
            wrong.append("%s.%s %#06x, want %#06x" % (a.name, name, getattr(a, name), getattr(b, name)))
    return wrong


def udp_datagram_checksum_ok(datagram: bytes, family: int, src: str, dst: str) -> bool:
    """Whether a reassembled UDP datagram's checksum is right for src -> dst."""
    carried = int.from_bytes(datagram[6:8], "big")
    zeroed = datagram[:6] + b"\0\0" + datagram[8:]
    if family == 4:
        want = in4_chksum(17, IP(src=src, dst=dst), zeroed)
    else:
        want = in6_chksum(17, IPv6(src=src, dst=dst), zeroed)
    return carried == (want or 0xFFFF)
