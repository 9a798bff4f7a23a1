"""The agent's pure logic: judgement, dampening, probe accounting, timers, formats."""

from __future__ import annotations

import ipaddress
import struct

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.agent import exposition, netlink
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import probe
from ansible_collections.edgeft.failover.plugins.module_utils.fabric import icmp, routes
from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import Config, ConfigError
from ansible_collections.edgeft.failover.plugins.module_utils.agent.judge import Dampening, Judge
from ansible_collections.edgeft.failover.plugins.module_utils.agent.path import Path
from ansible_collections.edgeft.failover.plugins.module_utils.agent.wheel import TimerWheel

MS = 1000000
HOLD = 1000 * MS


def judge(up=True, **damp):
    return Judge(up, HOLD, Dampening(**damp), 0)


# ---------------------------------------------------------------- judge
def test_failback_needs_the_whole_hold_down_without_a_break():
    j = judge()
    j.observe(False, 10 * MS)
    assert j.fail(10 * MS)
    j.observe(True, 100 * MS)
    assert not j.recover(100 * MS + HOLD - 1)
    j.observe(False, 500 * MS)  # a new failure restarts the hold-down
    j.observe(True, 600 * MS)
    assert not j.recover(100 * MS + HOLD + 1)
    assert j.recover(600 * MS + HOLD)
    assert j.up


def test_a_flapping_thing_fails_over_once():
    j = judge()
    failovers = 0
    t = 0
    for _flap in range(15):  # 5 Hz for 3 s: 100 ms dead, 100 ms alive
        j.observe(False, t)
        failovers += j.fail(t)
        t += 100 * MS
        j.observe(True, t)
        assert not j.recover(t)
        t += 100 * MS
    assert failovers == 1
    assert not j.recover(t + HOLD)  # stable for the hold-down, but suppressed by dampening
    assert j.damp.suppressed(t + HOLD)
    later = t + j.damp.reuse_in_ns(t + HOLD) + HOLD
    assert j.recover(later)


def test_dampening_decays_and_caps():
    d = Dampening(penalty=1000, suppress=2000, reuse=750, half_life_ms=1000, max_suppress_ms=4000)
    for i in range(3):
        d.failed(i)
    assert d.suppressed(3)
    assert d.penalty(1000 * MS + 2) == pytest.approx(3000 / 2.0, rel=1e-3)
    for i in range(100):
        d.failed(10 + i)
    assert d.penalty(200) <= 750 * 2 ** 4 + 1  # capped: reuse after at most max_suppress_ms
    assert not d.suppressed(4000 * MS + 300)


def test_dampening_off_never_suppresses():
    d = Dampening(enabled=False)
    for i in range(50):
        d.failed(i)
    assert not d.suppressed(100) and d.penalty(100) == 0


# ---------------------------------------------------------------- path
def make_path(multiplier=3):
    return Path(7, 0, 4, "198.18.2.11", judge(), multiplier)


def test_path_dies_after_multiplier_unanswered_probes():
    p = make_path()
    t = 0
    for _probe in range(3):
        p.check(t)
        p.request(1, t)
        t += 10 * MS
    assert p.judge.alive
    p.check(t)  # the third unanswered probe
    assert not p.judge.alive and p.misses == 3


def test_a_late_reply_resets_the_misses():
    p = make_path()
    first = p.next_probe(0)
    p.check(10 * MS)
    p.next_probe(10 * MS)
    p.check(20 * MS)
    assert p.misses == 2
    assert p.replied(*first, 25 * MS)  # the first probe, late: the path works
    assert p.misses == 0 and p.rtt_last_ns == 25 * MS


def test_an_agent_stall_is_not_a_network_failure():
    """Nothing sent while the loop stalled: only the last probe is judged, once."""
    p = make_path()
    p.replied(*p.next_probe(0), 1 * MS)
    p.check(500 * MS)
    p.check(510 * MS)
    assert p.misses == 0 and p.judge.alive


def test_replies_to_probes_never_sent_are_ignored():
    p = make_path()
    _seq, token = p.next_probe(0)
    assert not p.replied(5, token, 1 * MS)
    assert not p.replied(0, token, 1 * MS)
    assert p.received == 0 and p.rejected == 2


def test_a_forged_or_replayed_reply_does_not_count():
    """The reply must carry the probe's token, answers it once, and only while it is outstanding
    (one of the last multiplier probes): guessing sequence numbers, or sending a captured reply
    again, keeps nothing alive."""
    p = make_path(multiplier=3)
    seq, token = p.next_probe(0)
    assert not p.replied(seq, token ^ 1, 1 * MS)  # a guess of the token
    assert not p.replied(seq, 0, 1 * MS)
    assert p.replied(seq, token, 1 * MS)
    assert not p.replied(seq, token, 2 * MS)  # the same reply again
    old = p.next_probe(10 * MS)
    for i in range(3):  # three newer probes, all unanswered: the old one was judged missed
        p.check((20 + 10 * i) * MS)
        p.next_probe((20 + 10 * i) * MS)
    assert not p.replied(*old, 60 * MS)
    assert (p.received, p.rejected) == (1, 4)


def test_a_request_carries_its_token_and_the_reply_gives_it_back():
    p = make_path()
    payload = p.request(0xEDF7, 5 * MS)
    # The peer's data path answers by swapping the two kind halves and nothing else.
    reply = payload[:4] + payload[6:8] + payload[4:6] + payload[8:]
    session, seq, token = probe.parse_reply(reply)
    assert (session, seq) == (0xEDF7, p.seq) and token == p.outstanding[seq][0] and token != 5 * MS
    assert p.replied(seq, token, 6 * MS) and p.rtt_last_ns == 1 * MS


def test_loss_ratio_over_the_window():
    p = make_path(multiplier=1000)
    for i in range(10):
        p.check(i * 10 * MS)
        sent = p.next_probe(i * 10 * MS)
        if i % 2:
            p.replied(*sent, i * 10 * MS + 1)
    p.check(100 * MS)
    assert p.loss_ratio() == pytest.approx(0.5)


# ---------------------------------------------------------------- wheel
def wheel_of(deadlines_ms, cancelled_ms):
    """An 8-slot wheel of 1 ms ticks with a timer per deadline, each noting its deadline in
    `fired` when it runs, and one more that is cancelled."""
    w = TimerWheel(0, tick_ns=MS, slots=8)
    fired = []
    for d in deadlines_ms:
        w.schedule(d * MS, lambda t, d=d: fired.append(d))
    w.schedule(cancelled_ms * MS, lambda t: fired.append("x")).cancel()
    return w, fired


def test_wheel_fires_in_deadline_order_and_across_turns():
    w, fired = wheel_of((5, 3, 20, 3, 100), cancelled_ms=4)
    assert w.next_deadline() == 3 * MS
    for t in w.expire(10 * MS):
        t.callback(10 * MS)
    assert fired == [3, 3, 5]
    assert w.next_deadline() == 20 * MS
    for t in w.expire(99 * MS):
        t.callback(0)
    assert fired == [3, 3, 5, 20]
    assert [t.deadline for t in w.expire(1000 * MS)] == [100 * MS]
    assert w.next_deadline() is None


def test_wheel_keeps_timers_beyond_a_turn_out_of_the_slots_until_they_come_near():
    w, fired = wheel_of((1000, 30, 9, 7, 500), cancelled_ms=600)
    assert sum(len(slot) for slot in w.slots) == 1  # only 7 ms is within the first turn
    assert w.next_deadline() == 7 * MS
    for now in range(0, 1001):  # a loop turn every millisecond
        for t in w.expire(now * MS):
            t.callback(now)
            fired.append(now)
        assert sum(len(slot) for slot in w.slots) <= 2
    assert fired == [7, 7, 9, 9, 30, 30, 500, 500, 1000, 1000]
    assert w.next_deadline() is None and w.count == 0


def test_wheel_catches_up_after_a_long_stall():
    w = TimerWheel(0, tick_ns=MS, slots=8)
    for d in (3, 50, 70, 900):
        w.schedule(d * MS, lambda t: None)
    assert [t.deadline // MS for t in w.expire(75 * MS)] == [3, 50, 70]
    assert w.next_deadline() == 900 * MS
    assert [t.deadline // MS for t in w.expire(2000 * MS)] == [900]


# ---------------------------------------------------------------- formats
def test_probe_request_and_reply():
    req = probe.request(0xDEADBEEF, 42, 123456789)
    assert len(req) == probe.SIZE == 24
    magic, kind, swap, session, seq, sent = probe.FORMAT.unpack(req)
    assert (magic, kind, swap) == (probe.MAGIC, probe.REQUEST, probe.REPLY)
    assert probe.parse_reply(req) is None  # a request is not a reply
    reply = probe.FORMAT.pack(magic, swap, kind, session, seq, sent)  # what the reflector makes of it
    assert probe.parse_reply(reply) == (0xDEADBEEF, 42, 123456789)
    assert probe.parse_reply(reply[:10]) is None


def test_netlink_link_messages():
    def msg(kind, index, flags):
        body = netlink.IFINFO.pack(0, 1, index, flags, 0) + b"\0" * 8  # + an attribute
        return netlink.NLMSG.pack(netlink.NLMSG.size + len(body), kind, 0, 0, 0) + body

    data = msg(netlink.RTM_NEWLINK, 5, netlink.IFF_UP | netlink.IFF_LOWER_UP) + msg(netlink.RTM_NEWLINK, 6, netlink.IFF_UP) \
        + msg(netlink.RTM_DELLINK, 7, 0) + msg(99, 8, 0)
    events = netlink.parse(data)
    assert events == [(5, netlink.IFF_UP | netlink.IFF_LOWER_UP), (6, netlink.IFF_UP), (7, None)]
    assert netlink.carrier(events[0][1]) and not netlink.carrier(events[1][1])
    assert netlink.parse(struct.pack("=I", 3)) == []


def test_exposition_renders_and_parses_back():
    fam = exposition.Family("edgeft_x_total", "counter", "X").add(3, plane="a", peer='we"ird').add(1.5, plane="b")
    gauge = exposition.Family("edgeft_up", "gauge", "Up").add(True).add(None, plane="c")
    text = exposition.render([fam, gauge])
    assert "# TYPE edgeft_x_total counter" in text
    assert 'edgeft_x_total{peer="we\\"ird",plane="a"} 3' in text
    assert "edgeft_up 1" in text and 'edgeft_up{plane="c"} NaN' in text
    parsed = exposition.parse(text)
    assert parsed[("edgeft_x_total", frozenset({"plane": "a", "peer": 'we"ird'}.items()))] == 3


def test_backup_routes_only_for_on_link_next_hops():
    planes = [{"index": 0, "interface": "fab0", 4: "198.18.1.11", 6: "fd0e:a::b"},
              {"index": 1, "interface": "fab1", 4: "198.19.1.11", 6: None}]
    peer = {"v4": ["198.18.2.11", "198.19.2.11", None, None], "v6": ["fd0e:a::2", "fd0e:b::2", None, None]}
    routed = {"v4": ["198.18.9.11", "10.9.0.1", None, None], "v6": [None] * 4}
    prefixes = {(0, 4): ipaddress.ip_network("198.18.0.0/16"), (1, 4): ipaddress.ip_network("198.19.0.0/16"),
                (0, 6): ipaddress.ip_network("fd0e:a::/64")}
    want = routes.desired({1: peer, 2: routed}, planes, prefixes)
    assert want == {  # (next hop, its NIC, our source address, plane of the destination)
        (4, "198.18.2.11"): ("198.19.2.11", "fab1", "198.18.1.11", 0),
        (4, "198.19.2.11"): ("198.18.2.11", "fab0", "198.19.1.11", 1),
        (4, "10.9.0.1"): ("198.18.9.11", "fab0", "198.19.1.11", 1),
    }  # no IPv6 on fab1 here; 10.9.0.1 is not on-link on fab1: nothing for 198.18.9.11


def test_backup_routes_onto_a_routed_plane_go_via_its_gateway():
    """A routed plane routes only its own prefixes: the peer's plane-a address is reached
    through plane b's first hop (and translated there by the data path), with our plane-a
    address as source, the one the data path has a failover address for."""
    planes = [{"index": 0, "interface": "fab0", 4: "198.18.1.11", 6: "fd0e:a:1::b", "gateway": {4: "198.18.1.1", 6: "fd0e:a:1::1"}},
              {"index": 1, "interface": "fab1", 4: "198.19.1.11", 6: "fd0e:b:1::b", "gateway": {4: "198.19.1.1", 6: None}}]
    peer = {"v4": ["198.18.2.11", "198.19.2.11", None, None], "v6": ["fd0e:a:2::b", "fd0e:b:2::b", None, None]}
    prefixes = {(0, 4): ipaddress.ip_network("198.18.1.0/24"), (1, 4): ipaddress.ip_network("198.19.1.0/24")}
    assert routes.desired({1: peer}, planes, prefixes, routed={1}) == {
        (4, "198.18.2.11"): ("198.19.1.1", "fab1", "198.18.1.11", 0),
        # plane a is not routed here and the peer's plane-a address is off-link: no route
    }  # no IPv6 gateway on plane b: nothing for fd0e:a:2::b
    both = routes.desired({1: peer}, planes, prefixes, routed={0, 1})
    assert both[(4, "198.19.2.11")] == ("198.18.1.1", "fab0", "198.19.1.11", 1)
    assert both[(6, "fd0e:b:2::b")] == ("fd0e:a:1::1", "fab0", "fd0e:b:1::b", 1)


def test_config_defaults_and_conversions():
    cfg = Config({"planes": [{"name": "a", "interface": "fab0", "ipv4": "198.18.1.11/16"}]})
    assert (cfg.interval_ms, cfg.multiplier, cfg.confirm_interval_ms, cfg.hold_down_ms, cfg.detection_ms) == (10, 3, 2, 1000, 6)
    assert (cfg.idle_interval_ms, cfg.active_window_ms) == (1000, 2000)
    assert cfg.metrics_listen == ("127.0.0.1", 9531)
    assert cfg.planes[0][4] == "198.18.1.11" and cfg.planes[0][6] is None
    assert cfg.dampening["enabled"] and cfg.backup_routes["table"] == 0xEDF7
    off = Config({"planes": cfg.planes[:0] or [{"name": "a", "interface": "x"}], "dampening": False, "metrics_listen": "[::1]:9000"})
    assert not off.dampening["enabled"] and off.metrics_listen == ("::1", 9000)
    with pytest.raises(ConfigError, match="^peers\\[0\\].planes\\[0\\].name"):
        Config({"planes": [{"name": "a", "interface": "x"}], "peers": [{"name": "p", "planes": [{"name": "z"}]}]})


# ---------------------------------------------------------------- first-hop echo
@pytest.mark.parametrize("family", [4, 6])
def test_echo_request_is_valid_icmp_and_its_reply_parses(family):
    """The request as scapy sees it (checksum valid for IPv4; IPv6's is the kernel's),
    and a router's reply (same payload, type echo-reply) parsed back."""
    from scapy.layers.inet import ICMP, IP
    from scapy.layers.inet6 import ICMPv6EchoReply, ICMPv6EchoRequest, IPv6

    from ansible_collections.edgeft.failover.plugins.module_utils.agent import echo

    session, seq, sent = 0x1234ABCD, 7, 123456789
    req = echo.request(family, session, session, seq, sent)
    if family == 4:
        pkt = ICMP(req)
        assert (pkt.type, pkt.id, pkt.seq) == (8, session & 0xFFFF, seq)
        assert icmp.checksum(req) == 0  # a valid checksum sums to zero
        reply = bytes(IP(src="198.18.1.1", dst="198.18.1.11") / ICMP(type=0, id=pkt.id, seq=pkt.seq) / bytes(pkt.payload))
    else:
        pkt = ICMPv6EchoRequest(req)
        assert (pkt.type, pkt.id, pkt.seq) == (128, session & 0xFFFF, seq)
        reply = bytes(ICMPv6EchoReply(id=pkt.id, seq=pkt.seq, data=pkt.data))
        assert IPv6  # the kernel strips the IPv6 header on raw sockets
    assert echo.parse_reply(family, reply, session) == (session, seq, sent)
    assert echo.parse_reply(family, reply, session + 1) is None  # another agent's identifier
    assert echo.parse_reply(family, req if family == 6 else bytes(IP() / ICMP(req)), session) is None  # a request


def test_held_table_covers_failed_paths_and_planes_judged_down():
    """The held table routes a peer's plane address through the other plane while its plane
    is judged down or drained, or while the path to that peer on it is failed over (a
    silent switch: the link is up, the kernel would keep resolving the peer on the plane)."""
    from ansible_collections.edgeft.failover.plugins.module_utils.agent.agent import Agent, PlaneState
    from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout

    agent = Agent.__new__(Agent)  # the route bookkeeping only: no maps, sockets or timers
    agent.planes = {0: PlaneState({"index": 0, "name": "a"}, judge(), layout.PLANE_UP),
                    1: PlaneState({"index": 1, "name": "b"}, judge(), layout.PLANE_UP)}
    agent.peers = {1: {"v4": ["198.18.2.11", "198.19.2.11"], "v6": ["fd0e:a::2", "fd0e:b::2"]},
                   2: {"v4": ["198.18.2.12", "198.19.2.12"], "v6": [None, None]}}
    agent.paths = {(pid, plane): Path(pid, plane, 4, agent.peers[pid]["v4"][plane], judge(), 3)
                   for pid in (1, 2) for plane in (0, 1)}
    peer1_on_a = [(4, "198.18.2.11"), (6, "fd0e:a::2")]
    assert agent._failed_path_addresses() == set()
    assert not any(agent._held(k, 0) for k in peer1_on_a)

    agent.paths[(1, 0)].judge.fail(0)  # the path to peer 1 on plane a fails over
    assert agent._failed_path_addresses() == set(peer1_on_a)
    assert all(agent._held(k, 0) for k in peer1_on_a)
    assert not agent._held((4, "198.18.2.12"), 0)  # peer 2 still answers on plane a
    assert not agent._held((4, "198.19.2.11"), 1)

    agent.planes[1].judge.fail(0)  # plane b judged down: all of its peer addresses
    assert agent._held((4, "198.19.2.11"), 1) and agent._held((4, "198.19.2.12"), 1)
    agent.planes[0].flags |= layout.PLANE_DRAINED  # a drained plane: all of them too
    assert agent._held((4, "198.18.2.12"), 0)
