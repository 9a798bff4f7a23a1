"""Routed-mode translation of real socket traffic, with and without tx checksum offload.

test_routed_translation.py checks the rewrite under BPF_PROG_TEST_RUN, whose
skb is always CHECKSUM_NONE. A socket sending out of a NIC with tx checksum
offload hands tc egress a CHECKSUM_PARTIAL skb instead: its L4 checksum field
holds only the pseudo-header sum, which our rewrite must move to the failover
addresses (BPF_F_PSEUDO_HDR) rather than treat as a finished checksum.

Host 1's plane 0 (fab0) is down and plane 1 (fab1) routed: its UDP and TCP
packets to host 2's plane-0 address leave fab1 translated to the failover
addresses FO1 -> FO2 (bpf_redirect_neigh, next hop by the FIB). fab1 has tx
offload off, so a packet still CHECKSUM_PARTIAL after our hook gets its
checksum completed in software (validate_xmit_skb -> skb_checksum_help) from
the pseudo-header sum we left: the frame captured on host 2's fab1 carries a
valid checksum only if that sum was updated right. With fab0's offload off
too, UDP arrives at the hook fully checksummed (CHECKSUM_NONE), the other
case. Kernel TCP always hands down CHECKSUM_PARTIAL, so a TCP segment sent on
a raw socket (CHECKSUM_NONE, checksum computed here) covers TCP's other case;
a UDP datagram over the MTU, fragmented by the sender, covers fragments.

What the hook saw is observed, not assumed: with fab1's offload on, nothing
completes the checksum on the way, veth hands the skb over as it is, and the
capture's PACKET_AUXDATA says TP_STATUS_CSUMNOTREADY exactly for the skbs
that were CHECKSUM_PARTIAL after our hook; their field must then be the
pseudo-header sum of the failover addresses. A control sends natively (no
translation) with fab0's offload on: the partial checksum shows up on the
wire as a checksum that does not verify, which proves the oracle would see a
missed pseudo-header update.

Offload is switched with the SIOCETHTOOL ioctl (ETHTOOL_STXCSUM, what
`ethtool -K dev tx on|off` sets), so the ethtool program is not needed.
Only namespaces made here are touched; lab addresses only.
"""

from __future__ import annotations

import ctypes
import fcntl
import ipaddress
import socket
import struct
import time

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrFragment
from scapy.layers.l2 import Ether

import hostlab as L
from checksums import udp_datagram_checksum_ok, wrong_checksums


pytestmark = pytest.mark.skipif(L.missing() is not None, reason=str(L.missing()))

PEER_ID = 7
# Plane 1's failover addresses, standing for each host's plane-0 address.
FO1 = {4: "198.19.255.1", 6: "fd00:edf7:b:ff::1"}
FO2 = {4: "198.19.255.2", 6: "fd00:edf7:b:ff::2"}
UDP_PORT, TCP_PORT, RAW_PORT = 5000, 5001, 5002
SMALL = bytes((i * 37 + 11) & 0xFF for i in range(200))
BIG = bytes((i * 131 + 7) & 0xFF for i in range(3000))  # > MTU 1500: fragmented by the sender

SIOCETHTOOL = 0x8946
ETHTOOL_GTXCSUM, ETHTOOL_STXCSUM = 0x16, 0x17
ETH_P_ALL = 0x0003
SOL_PACKET, PACKET_AUXDATA = 263, 8
PACKET_OUTGOING = 4
TP_STATUS_CSUMNOTREADY = 1 << 3


def _ethtool(sock, dev: str, cmd: int, data: int = 0) -> int:
    value = ctypes.create_string_buffer(struct.pack("=II", cmd, data))
    ifreq = struct.pack("@16sP", dev.encode(), ctypes.addressof(value)).ljust(40, b"\0")  # struct ifreq
    fcntl.ioctl(sock, SIOCETHTOOL, ifreq)
    return struct.unpack("=II", value.raw[:8])[1]


def tx_csum(ns: str, dev: str, on: bool = None) -> bool:
    """tx checksum offload of dev in ns: set it (when on is given), return what the device has."""
    with L.in_netns(ns), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        if on is not None:
            _ethtool(s, dev, ETHTOOL_STXCSUM, int(on))
        return bool(_ethtool(s, dev, ETHTOOL_GTXCSUM))


class Capture:
    """An AF_PACKET socket on dev in ns, opened before any traffic: frames it
    received (not host 2's own), with their tpacket_auxdata status."""

    def __init__(self, ns: str, dev: str) -> None:
        with L.in_netns(ns):
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            self.sock.bind((dev, ETH_P_ALL))
        self.sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        self.frames = []  # (bytes, tp_status)

    def drain(self, until: float) -> None:
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return
            self.sock.settimeout(left)
            try:
                data, anc, _flags, addr = self.sock.recvmsg(65536, socket.CMSG_SPACE(20))
            except socket.timeout:
                return
            if addr[2] == PACKET_OUTGOING:
                continue
            status = next((struct.unpack_from("=I", d)[0] for lvl, typ, d in anc if (lvl, typ) == (SOL_PACKET, PACKET_AUXDATA)), None)
            assert status is not None, "no PACKET_AUXDATA"
            self.frames.append((data, status))

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(scope="module")
def lab():
    """Host 1 with its programs; a route to FO2 over fab1 for the FIB lookup;
    host 2 (no programs) owns FO2 on fab1 so it answers ARP/ND for it."""
    with L.bpffs() as root, L.two_hosts(root) as lab:
        lab.compile(hosts=(1,))
        lab.attach(1)
        h1, h2 = lab.ns[1], lab.ns[2]
        L.ip("-n", h1, "route", "add", FO2[4] + "/32", "dev", "fab1")
        L.ip("-n", h1, "-6", "route", "add", FO2[6] + "/128", "dev", "fab1")
        L.ip("-n", h2, "addr", "add", FO2[4] + "/32", "dev", "fab1")
        L.ip("-n", h2, "addr", "add", FO2[6] + "/128", "dev", "fab1", "nodad")
        lab.ifindex = {}
        with L.in_netns(h1):
            for plane in (0, 1):
                lab.ifindex[plane] = socket.if_nametoindex("fab%d" % plane)
        # The switch works on these veths, or nothing below means anything.
        for on in (False, True):
            assert tx_csum(h1, "fab0", on) is on
        yield lab


def routed_maps(lab):
    m = lab.maps(1)
    m.clear()
    m.set_plane(0, lab.ifindex[0], up=False)
    m.set_plane(1, lab.ifindex[1], routed=True)
    m.set_peer(PEER_ID, v4=(L.ADDR[2][4][0], L.ADDR[2][4][1]), v6=(L.ADDR[2][6][0], L.ADDR[2][6][1]))
    for f in (4, 6):
        m.set_failover(L.ADDR[1][f][0], 1, FO1[f], local=True)
        m.set_failover(L.ADDR[2][f][0], 1, FO2[f])
    return m


def raw_tcp_segment(family: int) -> bytes:
    """A SYN with its full checksum, for a raw socket: CHECKSUM_NONE at tc egress."""
    cls = IP if family == 4 else IPv6
    pkt = cls(src=L.ADDR[1][family][0], dst=L.ADDR[2][family][0]) / TCP(sport=40002, dport=RAW_PORT, flags="S", seq=4242) / b"edgeft-raw"
    return bytes(pkt)


def send_traffic(lab, family: int, socks: list) -> None:
    """From host 1's plane-0 address to host 2's: UDP small and big, a TCP SYN
    (connect), a raw TCP segment. The sockets go to socks (kept open while capturing)."""
    af = socket.AF_INET if family == 4 else socket.AF_INET6
    src, dst = L.ADDR[1][family][0], L.ADDR[2][family][0]
    with L.in_netns(lab.ns[1]):
        u = socket.socket(af, socket.SOCK_DGRAM)
        socks.append(u)
        u.bind((src, 0))
        u.sendto(SMALL, (dst, UDP_PORT))
        u.sendto(BIG, (dst, UDP_PORT))
        t = socket.socket(af, socket.SOCK_STREAM)
        socks.append(t)
        t.bind((src, 0))
        t.setblocking(False)
        t.connect_ex((dst, TCP_PORT))  # the SYN is enough: host 2 has no route back to FO1
        r = socket.socket(af, socket.SOCK_RAW, socket.IPPROTO_RAW)  # header included
        socks.append(r)
        r.sendto(raw_tcp_segment(family), (dst, 0))


def ip_layer(pkt, family):
    cls = IP if family == 4 else IPv6
    return pkt[cls] if cls in pkt else None


def is_fragment(pkt, family) -> bool:
    if family == 4:
        return bool(pkt[IP].flags.MF or pkt[IP].frag)
    return IPv6ExtHdrFragment in pkt


def kind(pkt, family):
    """Which of the sent packets an (unfragmented) frame is."""
    if UDP in pkt and pkt[UDP].dport == UDP_PORT:
        return "udp"
    if TCP in pkt and pkt[TCP].dport == TCP_PORT:
        return "tcp"
    if TCP in pkt and pkt[TCP].dport == RAW_PORT:
        return "raw-tcp"
    return None


def l4_of(pkt):
    return pkt[UDP] if UDP in pkt else pkt[TCP]


def pseudo_sum(family: int, src: str, dst: str, proto: int, length: int) -> int:
    """The folded one's-complement pseudo-header sum: what a CHECKSUM_PARTIAL
    skb carries in its L4 checksum field (~csum_tcpudp_magic / ~csum_ipv6_magic)."""
    a, b = ipaddress.ip_address(src).packed, ipaddress.ip_address(dst).packed
    tail = struct.pack("!BBH", 0, proto, length) if family == 4 else struct.pack("!I3xB", length, proto)
    s = sum(struct.unpack("!%dH" % ((len(a) + len(b) + len(tail)) // 2), a + b + tail))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def l4_length(pkt, family) -> int:
    return pkt[IP].len - pkt[IP].ihl * 4 if family == 4 else pkt[IPv6].plen


def reassemble(frames, family):
    """The UDP datagram (header included) from its captured fragments, None while one is missing."""
    pieces = {}
    for data in frames:
        pkt = Ether(data)
        if family == 4:
            start = 14 + pkt[IP].ihl * 4
            pieces[pkt[IP].frag * 8] = data[start:14 + pkt[IP].len]
        else:
            assert pkt[IPv6].nh == 44, "fragment header right after the IPv6 header"
            pieces[pkt[IPv6ExtHdrFragment].offset * 8] = data[14 + 40 + 8:14 + 40 + pkt[IPv6].plen]
    out = b""
    for off in sorted(pieces):
        if off != len(out):
            return None
        out += pieces[off]
    return out if len(out) == 8 + len(BIG) else None


def capture_while_sending(lab, family, done, devs=("fab0", "fab1"), wait=3.0, linger=0.3):
    """Capture host 2's devs, send host 1's traffic, collect until done(frames of
    fab1) or `wait` s, then `linger` s more for anything that should not come."""
    caps = {dev: Capture(lab.ns[2], dev) for dev in devs}
    socks = []
    try:
        send_traffic(lab, family, socks)
        deadline = time.monotonic() + wait
        main = caps[devs[-1]]
        while time.monotonic() < deadline and not done(main.frames):
            for cap in caps.values():
                cap.drain(time.monotonic() + 0.05)
        end = time.monotonic() + linger
        for cap in caps.values():
            cap.drain(end)
        return {dev: cap.frames for dev, cap in caps.items()}
    finally:
        for s in socks:
            s.close()
        for cap in caps.values():
            cap.close()


def ours(frames, family, src):
    """Parsed frames from src carrying one of our L4 packets or a fragment."""
    out = []
    for data, status in frames:
        pkt = Ether(data)
        layer = ip_layer(pkt, family)
        if layer is None or layer.src != src:
            continue
        if is_fragment(pkt, family) or kind(pkt, family):
            out.append((data, status, pkt))
    return out


def complete(family):
    def done(frames):
        got = ours(frames, family, FO1[family])
        kinds = {kind(p, family) for _data, _aux, p in got if not is_fragment(p, family)}
        frags = [d for d, _aux, p in got if is_fragment(p, family)]
        return {"udp", "tcp", "raw-tcp"} <= kinds and reassemble(frags, family) is not None
    return done


# Whether each sent packet is CHECKSUM_PARTIAL at tc egress, by fab0's offload:
# UDP follows the device; kernel TCP always is; a raw socket's segment and a
# locally fragmented datagram never are.
PARTIAL_AT_HOOK = {
    "udp": lambda fab0_tx: fab0_tx,
    "tcp": lambda fab0_tx: True,
    "raw-tcp": lambda fab0_tx: False,
}

MODES = pytest.mark.parametrize(
    "fab0_tx, fab1_tx",
    [(True, False), (False, False), (True, True), (False, True)],
    ids=["offloaded", "not-offloaded", "offloaded-fab1-tx-on", "not-offloaded-fab1-tx-on"],
)
FAMILIES = pytest.mark.parametrize("family", [4, 6], ids=["ipv4", "ipv6"])


@FAMILIES
@MODES
def test_translated_socket_traffic_has_valid_checksums_on_the_wire(lab, family, fab0_tx, fab1_tx):
    """fab1 tx off: every translated frame is completed in software (or was
    complete): all checksums verify. fab1 tx on: the partial ones arrive still
    partial, with the failover addresses' pseudo-header sum; the rest verify."""
    m = routed_maps(lab)
    assert tx_csum(lab.ns[1], "fab0", fab0_tx) is fab0_tx
    assert tx_csum(lab.ns[1], "fab1", fab1_tx) is fab1_tx
    before = m.xlat_counters_of(1)["translated_out"]

    frames = capture_while_sending(lab, family, complete(family))

    got = ours(frames["fab1"], family, FO1[family])
    seen = {}  # kind -> frames (a slow neighbour resolution may let a SYN retransmit in)
    fragments = []
    for data, status, pkt in got:
        layer = ip_layer(pkt, family)
        assert (layer.src, layer.dst) == (FO1[family], FO2[family])
        if family == 4:
            fresh = Ether(data)
            del fresh[IP].chksum
            assert pkt[IP].chksum == Ether(bytes(fresh))[IP].chksum, "IPv4 header checksum"
        if is_fragment(pkt, family):
            # Fragmented locally, so checksummed in software before our hook.
            assert not status & TP_STATUS_CSUMNOTREADY
            fragments.append(data)
            continue
        k = kind(pkt, family)
        seen.setdefault(k, []).append(pkt)
        partial = bool(status & TP_STATUS_CSUMNOTREADY)
        if fab1_tx and PARTIAL_AT_HOOK[k](fab0_tx):
            assert partial, "%s: expected CHECKSUM_PARTIAL after the hook" % k
            proto = 17 if k == "udp" else 6
            want = pseudo_sum(family, FO1[family], FO2[family], proto, l4_length(pkt, family))
            assert l4_of(pkt).chksum == want, "%s: partial sum %#06x, want %#06x" % (k, l4_of(pkt).chksum, want)
        else:
            assert not partial, "%s: still partial on a wire without offload" % k
            assert wrong_checksums(data) == [], k
    assert set(seen) == {"udp", "tcp", "raw-tcp"}, set(seen)
    assert [bytes(p[UDP].payload) for p in seen["udp"]] == [SMALL]

    datagram = reassemble(fragments, family)
    assert datagram is not None, "fragments missing: %d captured" % len(fragments)
    assert datagram[8:] == BIG
    assert udp_datagram_checksum_ok(datagram, family, FO1[family], FO2[family])

    # Redirected, not also sent natively: nothing of ours on host 2's fab0,
    # nor untranslated on fab1.
    assert ours(frames["fab0"], family, L.ADDR[1][family][0]) == []
    assert ours(frames["fab1"], family, L.ADDR[1][family][0]) == []
    grew = m.xlat_counters_of(1)["translated_out"] - before
    assert grew >= len(got), (grew, len(got))


@FAMILIES
def test_control_a_partial_checksum_reaches_the_wire_unverified(lab, family):
    """Without translation (maps empty: everything passes) and fab0's offload
    on, the partial checksum travels as it is and does not verify: the oracle
    above would catch a pseudo-header sum left at the native addresses. With
    fab0's offload off the same packets verify."""
    lab.maps(1).clear()
    assert tx_csum(lab.ns[1], "fab1", False) is False
    src, dst = L.ADDR[1][family][0], L.ADDR[2][family][0]

    def native(frames):
        return {kind(p, family) for _data, _aux, p in ours(frames, family, src) if not is_fragment(p, family)} >= {"udp", "tcp", "raw-tcp"}

    for fab0_tx in (True, False):
        assert tx_csum(lab.ns[1], "fab0", fab0_tx) is fab0_tx
        frames = capture_while_sending(lab, family, native, devs=("fab0",), linger=0.1)["fab0"]
        kinds = set()
        for data, status, pkt in ours(frames, family, src):
            if is_fragment(pkt, family):
                continue
            k = kind(pkt, family)
            kinds.add(k)
            layer = ip_layer(pkt, family)
            assert (layer.src, layer.dst) == (src, dst)
            # Without offload fab0 completes a partial one in software before the wire.
            partial = fab0_tx and PARTIAL_AT_HOOK[k](fab0_tx)
            assert bool(status & TP_STATUS_CSUMNOTREADY) is partial, k
            if partial:
                proto = 17 if k == "udp" else 6
                assert l4_of(pkt).chksum == pseudo_sum(family, src, dst, proto, l4_length(pkt, family)), k
                assert wrong_checksums(data) != [], "%s: a partial checksum verified" % k
            else:
                assert wrong_checksums(data) == [], k
        assert kinds == {"udp", "tcp", "raw-tcp"}, kinds
