"""The probe reflector (tc ingress) and probes passing egress unsteered.

A probe request from a known peer comes back as a reply: MACs, addresses,
ports and the kind halves swapped, every checksum still valid (scapy recomputes
them), the rest of the payload untouched, redirected out the same NIC. Anything
that is not exactly a probe is left to the normal programs, unmodified.

Checks (the plane_check module's probes) are handled the same way, except
that a drained plane answers them too, where it ignores the agent's requests.
"""

from __future__ import annotations

import os
import re

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrHopByHop
from scapy.layers.l2 import Ether

import bpf_packets as P
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import probe
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.build import default_bpf_dir, import_bcc
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.testrun import (
    TC_ACT_REDIRECT,
    TC_ACT_UNSPEC,
    prog_test_run,
)

FAMILIES = pytest.mark.parametrize("family", [4, 6], ids=["ipv4", "ipv6"])
# BPF_PROG_TEST_RUN runs frames on the loopback device, whose MAC is all zero:
# only a frame sent to it is PACKET_HOST (eth_type_trans), i.e. "for this host".
MAC_HOST = "00:00:00:00:00:00"
SESSION, SEQ, SENT_NS = 0xA1B2C3D4, 77, 123456789012345


def add_peer(dp, **kw):
    dp.maps.set_peer(P.PEER_ID, v4=P.PEER[4], v6=P.PEER[6], **kw)


def probe_frame(family, plane=0, sport=40000, payload=None, mac_dst=MAC_HOST, src=None, dst=None, **ip_kw):
    """A request from the peer's address on `plane` to ours, as it arrives here."""
    src = src or P.PEER[family][plane]
    dst = dst or P.LOCAL[family][plane]
    payload = probe.request(SESSION, SEQ, SENT_NS) if payload is None else payload
    return bytes(Ether(src=P.MAC_PEER, dst=mac_dst) / P.ip(family, src, dst, **ip_kw)
                 / UDP(sport=sport, dport=probe.PORT) / payload)


def reply_frame(family, plane=0):
    """What our reflector sends back for probe_frame(): a reply arriving at the peer."""
    return bytes(Ether(src=P.MAC_LOCAL, dst=P.MAC_PEER) / P.ip(family, P.PEER[family][plane], P.LOCAL[family][plane])
                 / UDP(sport=probe.PORT, dport=40000) / _reply_payload())


def _reply_payload():
    return probe.FORMAT.pack(probe.MAGIC, probe.REPLY, probe.REQUEST, SESSION, SEQ, SENT_NS)


def _check_reply_payload():
    return probe.FORMAT.pack(probe.MAGIC, probe.CHECK_REPLY, probe.CHECK, SESSION, SEQ, SENT_NS)


def check_frame(family, plane=0, **kw):
    """A check request from the peer's address on `plane` to ours, as it arrives here."""
    return probe_frame(family, plane, payload=probe.check_request(SESSION, SEQ, SENT_NS), **kw)


def checksums_valid(frame: bytes) -> bool:
    """scapy recomputes every checksum of a copy without them: equal bytes = valid."""
    pkt = Ether(frame)
    fresh = pkt.copy()
    if IP in fresh:
        del fresh[IP].chksum
    if fresh[UDP].chksum != 0:  # IPv4 "no checksum" stays 0
        del fresh[UDP].chksum
    return bytes(fresh) == frame


def ingress(dp, frame, plane=0):
    return prog_test_run(dp.fd(plane, "ingress"), frame)


def snapshot(dp):
    return dp.maps.get_peer(P.PEER_ID), dp.maps.last_seen(P.PEER_ID), [dp.maps.plane_counters(p) for p in (0, 1)]


@FAMILIES
@pytest.mark.parametrize("plane", [0, 1])
def test_request_from_a_peer_comes_back_as_its_reply(dp, family, plane):
    add_peer(dp)
    frame = probe_frame(family, plane)
    assert checksums_valid(frame)
    r = ingress(dp, frame, plane)
    assert r.retval == TC_ACT_REDIRECT  # bpf_redirect(skb->ifindex): out the NIC it came in on
    out = Ether(r.data)
    sent = Ether(frame)
    assert (out.src, out.dst) == (sent.dst, sent.src)
    ip_layer = IP if family == 4 else IPv6
    assert (out[ip_layer].src, out[ip_layer].dst) == (sent[ip_layer].dst, sent[ip_layer].src)
    assert (out[UDP].sport, out[UDP].dport) == (probe.PORT, 40000)
    assert probe.parse_reply(bytes(out[UDP].payload)) == (SESSION, SEQ, SENT_NS)
    assert len(r.data) == len(frame)
    assert checksums_valid(r.data)
    # TTL / hop limit, length, id: untouched
    if family == 4:
        assert (out[IP].ttl, out[IP].id, out[IP].len) == (sent[IP].ttl, sent[IP].id, sent[IP].len)
    else:
        assert (out[IPv6].hlim, out[IPv6].plen) == (sent[IPv6].hlim, sent[IPv6].plen)


def test_ipv4_without_udp_checksum_stays_without(dp):
    add_peer(dp)
    frame = bytes(Ether(src=P.MAC_PEER, dst=MAC_HOST) / IP(src=P.PEER[4][0], dst=P.LOCAL[4][0])
                  / UDP(sport=40000, dport=probe.PORT, chksum=0) / probe.request(SESSION, SEQ, SENT_NS))
    r = ingress(dp, frame)
    assert r.retval == TC_ACT_REDIRECT
    assert Ether(r.data)[UDP].chksum == 0
    assert checksums_valid(r.data)


@FAMILIES
def test_probe_payload_longer_than_the_header_is_kept(dp, family):
    add_peer(dp)
    frame = probe_frame(family, payload=probe.request(SESSION, SEQ, SENT_NS) + b"padding-kept")
    r = ingress(dp, frame)
    assert r.retval == TC_ACT_REDIRECT
    assert bytes(Ether(r.data)[UDP].payload).endswith(b"padding-kept")
    assert checksums_valid(r.data)


@FAMILIES
def test_probes_are_not_counted_seen_or_learned(dp, family):
    """A request from the peer's plane-0 address arriving on plane 1 would be
    learned if it were traffic; a native reply would unlearn. Probes do neither."""
    add_peer(dp, active_plane=1, down_planes=[0])
    st = dp.maps.state.get(P.PEER_ID)
    st.learned_mask = 1
    dp.maps.state.put(P.PEER_ID, st)
    before = snapshot(dp)
    assert ingress(dp, probe_frame(family, plane=0), plane=1).retval == TC_ACT_REDIRECT
    reply = reply_frame(family)
    # A reply arriving at us: the peer's plane-0 address on plane 0 (native).
    reply_in = bytes(Ether(src=P.MAC_PEER, dst=MAC_HOST) / P.ip(family, P.PEER[family][0], P.LOCAL[family][0])
                     / UDP(sport=probe.PORT, dport=40000) / _reply_payload())
    r = ingress(dp, reply_in, plane=0)
    assert (r.retval, r.data) == (TC_ACT_UNSPEC, reply_in)
    assert snapshot(dp) == before
    assert Ether(reply)[UDP].sport == probe.PORT


@FAMILIES
def test_requests_on_a_drained_plane_are_not_answered(dp, family):
    """Peers' agents must see a drained plane as dead and keep off it themselves;
    the request goes on to the stack unmodified, like any UDP datagram."""
    add_peer(dp)
    dp.maps.set_plane(0, 1000, up=True, drained=True)
    frame = probe_frame(family, plane=0)
    r = ingress(dp, frame, plane=0)
    assert (r.retval, r.data) == (TC_ACT_UNSPEC, frame)
    dp.maps.set_plane(0, 1000, up=True, drained=False)
    assert ingress(dp, frame, plane=0).retval == TC_ACT_REDIRECT


@FAMILIES
def test_requests_from_strangers_are_not_answered(dp, family):
    """Only peers get replies: the reflector cannot bounce packets at arbitrary addresses."""
    add_peer(dp)
    frame = probe_frame(family, src=P.STRANGER[family])
    r = ingress(dp, frame)
    assert (r.retval, r.data) == (TC_ACT_UNSPEC, frame)


@FAMILIES
def test_requests_for_another_host_are_not_answered(dp, family):
    """A bridge floods unknown unicast: a frame for another MAC is not ours to answer."""
    add_peer(dp)
    frame = probe_frame(family, mac_dst=P.MAC_LOCAL)
    r = ingress(dp, frame)
    assert (r.retval, r.data) == (TC_ACT_UNSPEC, frame)


def _not_probes(family):
    good = probe.request(SESSION, SEQ, SENT_NS)
    wrong_magic = probe.FORMAT.pack(0x12345678, probe.REQUEST, probe.REPLY, SESSION, SEQ, SENT_NS)
    wrong_kind = probe.FORMAT.pack(probe.MAGIC, 0x1234, probe.REPLY, SESSION, SEQ, SENT_NS)
    yield "wrong_magic", probe_frame(family, payload=wrong_magic)
    yield "wrong_kind", probe_frame(family, payload=wrong_kind)
    yield "short_payload", probe_frame(family, payload=good[:-1])
    yield "reply_kind_to_probe_port", probe_frame(family, payload=_reply_payload())
    yield "other_port", bytes(Ether(src=P.MAC_PEER, dst=MAC_HOST) / P.ip(family, P.PEER[family][0], P.LOCAL[family][0])
                              / UDP(sport=40000, dport=probe.PORT + 1) / good)
    yield "plain_udp", P.udp(family, P.PEER[family][0], P.LOCAL[family][0], macs=(P.MAC_PEER, MAC_HOST))
    if family == 4:
        yield "ip_options", bytes(Ether(src=P.MAC_PEER, dst=MAC_HOST)
                                  / IP(src=P.PEER[4][0], dst=P.LOCAL[4][0], options=[P.IPOption_RR()])
                                  / UDP(sport=40000, dport=probe.PORT) / good)
        yield "fragment", probe_frame(4, flags="MF")
    else:
        yield "extension_header", bytes(Ether(src=P.MAC_PEER, dst=MAC_HOST)
                                        / IPv6(src=P.PEER[6][0], dst=P.LOCAL[6][0]) / IPv6ExtHdrHopByHop()
                                        / UDP(sport=40000, dport=probe.PORT) / good)


@FAMILIES
def test_anything_but_a_probe_is_left_to_the_normal_ingress(dp, family):
    add_peer(dp)
    for kind, frame in _not_probes(family):
        dp.maps.clear_seen(P.PEER_ID)
        r = ingress(dp, frame)
        assert (r.retval, r.data) == (TC_ACT_UNSPEC, frame), kind
        assert dp.maps.last_seen(P.PEER_ID)[0] > 0, "%s was not handled as traffic" % kind


@FAMILIES
def test_probes_leave_egress_unsteered(dp, family):
    """The peer is steered off plane 0 and plane 0 is down here: traffic is
    redirected, our requests and the reflector's replies still leave on plane 0."""
    add_peer(dp, active_plane=1, down_planes=[0])
    dp.maps.set_plane(0, 1000, up=False)
    traffic = P.to_peer(family, plane=0)
    assert prog_test_run(dp.fd(0, "egress"), traffic).retval == TC_ACT_REDIRECT
    before = dp.maps.plane_counters(0)["steered_packets"]
    request = bytes(Ether(src=P.MAC_LOCAL, dst=P.MAC_PEER) / P.ip(family, P.LOCAL[family][0], P.PEER[family][0])
                    / UDP(sport=40000, dport=probe.PORT) / probe.request(SESSION, SEQ, SENT_NS))
    for frame in (request, reply_frame(family)):
        r = prog_test_run(dp.fd(0, "egress"), frame)
        assert (r.retval, r.data) == (TC_ACT_UNSPEC, frame)
    assert dp.maps.plane_counters(0)["steered_packets"] == before
    assert dp.maps.plane_counters(0)["tx_packets"] == 0
    sent_by_traffic = dp.maps.last_sent(P.PEER_ID)[0]
    assert sent_by_traffic > 0  # the steered data packet made the peer active; probes do not
    dp.maps.clear_seen(P.PEER_ID)
    for frame in (request, reply_frame(family)):
        prog_test_run(dp.fd(0, "egress"), frame)
    assert dp.maps.last_sent(P.PEER_ID) == [0, 0, 0, 0]


def test_the_agent_mirror_matches_the_header():
    """probe.py's constants and field offsets, compiled as asserts against edgeft_maps.h."""
    bcc = import_bcc()
    lines = ["#include <uapi/linux/bpf.h>", '#include "edgeft_maps.h"']
    for name, value in (("PORT", probe.PORT), ("MAGIC", probe.MAGIC), ("REQUEST", probe.REQUEST), ("REPLY", probe.REPLY),
                        ("CHECK", probe.CHECK), ("CHECK_REPLY", probe.CHECK_REPLY)):
        lines.append('_Static_assert(EDGEFT_PROBE_%s == %d, "probe.py %s");' % (name, value, name))
    lines.append('_Static_assert(sizeof(struct edgeft_probe) == %d, "probe.py SIZE");' % probe.SIZE)
    for field, offset, size in probe.FIELDS:
        lines.append('_Static_assert(__builtin_offsetof(struct edgeft_probe, %s) == %d, "probe.py %s");' % (field, offset, field))
        lines.append('_Static_assert(sizeof(((struct edgeft_probe *)0)->%s) == %d, "probe.py %s");' % (field, size, field))
    lines.append("int edgeft_probe_mirror(struct __sk_buff *skb) { return 0; }")
    b = bcc.BPF(text="\n".join(lines).encode(), cflags=["-I%s" % default_bpf_dir()])
    b.cleanup()
    text = open(os.path.join(default_bpf_dir(), "edgeft_maps.h")).read()
    assert sorted(re.findall(r"#define EDGEFT_PROBE_(\w+)", text)) == ["CHECK", "CHECK_REPLY", "MAGIC", "PORT", "REPLY", "REQUEST"]


# ------------------------------------------------------------------ checks
PLANE_FLAGS = pytest.mark.parametrize("up,drained", [(True, False), (True, True), (False, True)],
                                      ids=["up", "drained", "down_and_drained"])


@FAMILIES
@PLANE_FLAGS
def test_checks_are_answered_whatever_the_plane_flags(dp, family, up, drained):
    """The operator's check of a plane under maintenance: reflected like a request
    (same swap, checksums valid), also where the agent's requests go unanswered."""
    add_peer(dp)
    dp.maps.set_plane(0, 1000, up=up, drained=drained)
    frame = check_frame(family)
    assert checksums_valid(frame)
    r = ingress(dp, frame)
    assert r.retval == TC_ACT_REDIRECT
    out, sent = Ether(r.data), Ether(frame)
    assert (out.src, out.dst) == (sent.dst, sent.src)
    ip_layer = IP if family == 4 else IPv6
    assert (out[ip_layer].src, out[ip_layer].dst) == (sent[ip_layer].dst, sent[ip_layer].src)
    assert (out[UDP].sport, out[UDP].dport) == (probe.PORT, 40000)
    payload = bytes(out[UDP].payload)
    assert payload == _check_reply_payload()
    assert probe.parse_check_reply(payload) == (SESSION, SEQ, SENT_NS)
    assert probe.parse_reply(payload) is None  # never an agent reply
    assert len(r.data) == len(frame) and checksums_valid(r.data)
    request = probe_frame(family)
    r = ingress(dp, request)
    if drained:  # the agent's request on the same plane, in the same state: ignored
        assert (r.retval, r.data) == (TC_ACT_UNSPEC, request)
    else:
        assert r.retval == TC_ACT_REDIRECT


@FAMILIES
def test_checks_are_not_counted_seen_or_learned(dp, family):
    """As test_probes_are_not_counted_seen_or_learned, with checks and check replies."""
    add_peer(dp, active_plane=1, down_planes=[0])
    st = dp.maps.state.get(P.PEER_ID)
    st.learned_mask = 1
    dp.maps.state.put(P.PEER_ID, st)
    dp.maps.set_plane(1, 1001, up=True, drained=True)
    before = snapshot(dp)
    assert ingress(dp, check_frame(family, plane=0), plane=1).retval == TC_ACT_REDIRECT
    reply_in = bytes(Ether(src=P.MAC_PEER, dst=MAC_HOST) / P.ip(family, P.PEER[family][0], P.LOCAL[family][0])
                     / UDP(sport=probe.PORT, dport=40000) / _check_reply_payload())
    r = ingress(dp, reply_in, plane=0)
    assert (r.retval, r.data) == (TC_ACT_UNSPEC, reply_in)
    assert snapshot(dp) == before


@FAMILIES
def test_checks_from_strangers_or_for_another_host_are_not_answered(dp, family):
    add_peer(dp)
    dp.maps.set_plane(0, 1000, up=True, drained=True)
    for frame in (check_frame(family, src=P.STRANGER[family]), check_frame(family, mac_dst=P.MAC_LOCAL)):
        r = ingress(dp, frame)
        assert (r.retval, r.data) == (TC_ACT_UNSPEC, frame)


@FAMILIES
def test_near_checks_are_left_to_the_normal_ingress(dp, family):
    """Only kind CHECK with kind_swap CHECK_REPLY is answered: the drain exemption
    cannot be used to make a drained plane send an agent REPLY."""
    add_peer(dp)
    dp.maps.set_plane(0, 1000, up=True, drained=True)
    cases = {
        "check_swapping_to_reply": probe.FORMAT.pack(probe.MAGIC, probe.CHECK, probe.REPLY, SESSION, SEQ, SENT_NS),
        "check_swapping_to_itself": probe.FORMAT.pack(probe.MAGIC, probe.CHECK, probe.CHECK, SESSION, SEQ, SENT_NS),
        "check_reply_kind_to_probe_port": _check_reply_payload(),
        "short_check": probe.check_request(SESSION, SEQ, SENT_NS)[:-1],
    }
    for kind, payload in cases.items():
        frame = probe_frame(family, payload=payload)
        dp.maps.clear_seen(P.PEER_ID)
        r = ingress(dp, frame)
        assert (r.retval, r.data) == (TC_ACT_UNSPEC, frame), kind
        assert dp.maps.last_seen(P.PEER_ID)[0] > 0, "%s was not handled as traffic" % kind
    other_port = bytes(Ether(src=P.MAC_PEER, dst=MAC_HOST) / P.ip(family, P.PEER[family][0], P.LOCAL[family][0])
                       / UDP(sport=40000, dport=probe.PORT + 1) / probe.check_request(SESSION, SEQ, SENT_NS))
    r = ingress(dp, other_port)
    assert (r.retval, r.data) == (TC_ACT_UNSPEC, other_port)


@FAMILIES
def test_checks_leave_egress_unsteered(dp, family):
    """The peer is steered off plane 0, plane 0 is down and drained here: our check
    requests and the reflector's check replies still leave on plane 0, untouched."""
    add_peer(dp, active_plane=1, down_planes=[0])
    dp.maps.set_plane(0, 1000, up=False, drained=True)
    assert prog_test_run(dp.fd(0, "egress"), P.to_peer(family, plane=0)).retval == TC_ACT_REDIRECT
    dp.maps.clear_seen(P.PEER_ID)
    before = dp.maps.plane_counters(0)
    request = bytes(Ether(src=P.MAC_LOCAL, dst=P.MAC_PEER) / P.ip(family, P.LOCAL[family][0], P.PEER[family][0])
                    / UDP(sport=40000, dport=probe.PORT) / probe.check_request(SESSION, SEQ, SENT_NS))
    reply = bytes(Ether(src=P.MAC_LOCAL, dst=P.MAC_PEER) / P.ip(family, P.LOCAL[family][0], P.PEER[family][0])
                  / UDP(sport=probe.PORT, dport=40000) / _check_reply_payload())
    for frame in (request, reply):
        r = prog_test_run(dp.fd(0, "egress"), frame)
        assert (r.retval, r.data) == (TC_ACT_UNSPEC, frame)
    assert dp.maps.plane_counters(0) == before
    assert dp.maps.last_sent(P.PEER_ID) == [0, 0, 0, 0]


def test_the_agent_and_the_check_never_take_each_others_replies():
    reply, check_reply = _reply_payload(), _check_reply_payload()
    assert probe.parse_reply(reply) == (SESSION, SEQ, SENT_NS) and probe.parse_check_reply(reply) is None
    assert probe.parse_check_reply(check_reply) == (SESSION, SEQ, SENT_NS) and probe.parse_reply(check_reply) is None
    # Requests are not replies, whatever their kind.
    for payload in (probe.request(SESSION, SEQ, SENT_NS), probe.check_request(SESSION, SEQ, SENT_NS)):
        assert probe.parse_reply(payload) is None and probe.parse_check_reply(payload) is None
    assert probe.check_request(SESSION, SEQ, SENT_NS)[4:8] == bytes.fromhex("63716370")  # "cq", "cp"
