"""Drain and undrain a plane under real traffic, on a lab deployed with playbooks/site.yml.

r1h1 sends to r2h1 (another rack, so through both ToRs and a spine of each plane) a 10 kpps
UDP stream and a 50 Mbit/s TCP stream per family, all addressed to r2h1's plane-a addresses
(IPv4 and IPv6 through the same drain: the peer's state is one for both families). Draining
plane a on r1h1 with playbooks/plane_state.yml must move both directions to plane b (r1h1
steers, r2h1 learns from the first steered packet and steers its replies too) without losing
one UDP packet or resetting the TCP connection; undraining must move both back, again
without loss. The move is proven three ways: the per-plane counters of both hosts, the
packet counters of the switch ports (what really crossed each plane), and the peer state
the plane_state module reports. On the default (L2) fabric and on the routed one, where
plane b does not carry plane a's prefixes and the move translates to failover addresses.
Run with -s to see the figures.
"""

from __future__ import annotations

import contextlib
import time

import pytest
from deployed import counters, delta, peer, plane, port_packets, query, xlat_counters
from deploy_helpers import run_playbook

from edgeft_lab.traffic import TcpStream, UdpStream

SRC, DST = 'r1h1', 'r2h1'
PPS = 10_000
TCP_RATE = 50e6
WARMUP = 0.5  # streams run this long before the drain
SETTLE = 0.3  # after a playbook returns, before a measuring window starts
WINDOW = 0.7  # each measuring window
# Packets an idle plane may still carry in a window: ARP and neighbour discovery of the
# managed neighbour entries (never steered), nothing else.
NOISE = 20
# Switch ports whose rx counters show what each host sent into each plane.
PORTS = {('r1h1', 'a'): ('tor-r1-a', 'r1h1'), ('r1h1', 'b'): ('tor-r1-b', 'r1h1'),
         ('r2h1', 'a'): ('tor-r2-a', 'r2h1'), ('r2h1', 'b'): ('tor-r2-b', 'r2h1')}


@pytest.fixture(params=['default', 'default_bcc', 'routed'])
def lab(request):
    """The run's shared deployed lab of that topology (tests/lab/conftest.py), reset; the
    default one also as the bcc loader deploys it."""
    deployed = request.getfixturevalue('shared_%s_deployment' % request.param).neutral()
    deployed.fabric = request.param.replace('_bcc', '')
    return deployed


def set_plane_a(lab, state):
    """playbooks/plane_state.yml on r1h1: plane a drained or active; must change exactly r1h1."""
    rc, out, recap = run_playbook(lab.inventory_path, 'playbooks/plane_state.yml', '-e', 'edgeft_hosts=%s' % SRC,
                                  '-e', 'edgeft_plane=a', '-e', 'edgeft_plane_state=%s' % state)
    assert rc == 0, out[-4000:]
    assert recap == {SRC: (1, 0)}, 'plane_state.yml %s: expected one change on %s:\n%s' % (state, SRC, out[-4000:])


def switch_plane_a(lab, streams, state, action):
    """Drain or undrain plane a on r1h1 with the streams marked around it; then the snapshots
    that open and close a measuring window once the switch has settled."""
    for stream in streams:
        stream.mark(action)
    set_plane_a(lab, state)
    for stream in streams:
        stream.mark(action + 'ed')
    time.sleep(SETTLE)
    opened = snapshot(lab)
    time.sleep(WINDOW)
    return opened, snapshot(lab)


def snapshot(lab):
    """Per-plane data path counters of both hosts and switch port rx counters, at one moment."""
    snap = {'t': time.monotonic(), SRC: counters(lab, SRC), DST: counters(lab, DST)}
    snap['ports'] = {key: port_packets(lab, switch, port)[0] for key, (switch, port) in PORTS.items()}
    return snap


def window(before, after):
    """What happened between two snapshots: counter deltas per host and plane, port deltas, seconds."""
    return {
        's': after['t'] - before['t'],
        SRC: delta(after[SRC], before[SRC]),
        DST: delta(after[DST], before[DST]),
        'ports': {key: after['ports'][key] - before['ports'][key] for key in PORTS},
    }


def describe(name, w):
    c1, c2, ports = w[SRC], w[DST], w['ports']
    return ('  %s window %.2f s: %s a tx +%d steered +%d | b tx +%d steered_in +%d | %s a rx +%d tx +%d steered +%d | '
            'b rx +%d tx +%d steered_in +%d | switch ports rx: %s' % (
                name, w['s'], SRC, c1['a']['tx_packets'], c1['a']['steered_packets'], c1['b']['tx_packets'],
                c1['b']['steered_in_packets'], DST, c2['a']['rx_packets'], c2['a']['tx_packets'],
                c2['a']['steered_packets'], c2['b']['rx_packets'], c2['b']['tx_packets'], c2['b']['steered_in_packets'],
                ', '.join('%s->%s +%d' % (host, p, n) for (host, p), n in sorted(ports.items()))))


def print_figures(results, windows, during, after):
    r2_view = [peer(during[DST], SRC), peer(after[DST], SRC)]
    for family, (udp, tcp) in results.items():
        print('\nIPv%d: drain/undrain of plane a on %s, traffic %s -> %s (%s)' % (family, SRC, SRC, DST, udp.address))
        print('  marks (ms from the UDP start): %s' % ', '.join('%s %.0f' % kv for kv in udp.marks.items()))
        print('  UDP %d pps: sent %d, received %d, lost %d, max gap %.1f ms at %.0f ms (sender max gap %.1f ms), '
              'reordered %d, duplicates %d, socket drops %d'
              % (PPS, udp.sent, udp.received, udp.lost, udp.max_gap_ms, udp.max_gap_at_ms, udp.sender_max_gap_ms,
                 udp.reordered, udp.duplicates, udp.socket_drops))
        print('  TCP %.0f Mbit/s: %.1f Mbit/s, max stall %.1f ms at %.0f ms, resets %d, timeouts %d, connections %d, '
              'survived %s' % (TCP_RATE / 1e6, tcp.goodput_mbps, tcp.max_stall_ms, tcp.max_stall_at_ms, tcp.resets,
                               tcp.timeouts, tcp.connections, tcp.survived))
    for name, w in windows.items():
        print(describe(name, w))
    for label, view in zip(('drained', 'undrained'), r2_view):
        print('  %s: %s sees %s: active plane %s, down %s, learned %s' % (
            label, DST, SRC, view['active_plane'], view['down_planes'], view['learned_planes']))


@pytest.mark.slow
def test_drain_and_undrain_move_both_directions_without_loss(lab):
    streams = {family: (UdpStream(lab, SRC, DST, plane='a', family=family, pps=PPS),
                        TcpStream(lab, SRC, DST, plane='a', family=family, rate_bps=TCP_RATE)) for family in (4, 6)}
    every = [stream for pair in streams.values() for stream in pair]
    with contextlib.ExitStack() as running:
        for stream in every:
            running.enter_context(stream)
        time.sleep(WARMUP)
        s0 = snapshot(lab)
        s1, s2 = switch_plane_a(lab, every, 'drained', 'drain')
        during = query(lab, [SRC, DST])
        s3, s4 = switch_plane_a(lab, every, 'active', 'undrain')
        after = query(lab, [SRC, DST])
    results = {family: (udp.result(), tcp.result()) for family, (udp, tcp) in streams.items()}
    windows = {'drained': window(s1, s2), 'undrained': window(s3, s4)}
    print_figures(results, windows, during, after)

    # The product promise: nothing lost, nothing reset, in either move, in either family.
    for u, t in results.values():
        assert u.lost == 0 and u.socket_drops == 0, u.summary()
        assert t.resets == 0 and t.timeouts == 0 and t.survived, t.summary()

    busy = 0.5 * PPS * WINDOW  # one UDP stream alone sends PPS * WINDOW in a window

    # Drained: r1h1 sends nothing to a peer on plane a: the drain routes the peers' plane-a
    # addresses via plane b (held table; on the routed fabric via plane b's gateway, translated
    # by plane b's egress), and what a socket's cached route still hands to plane a's NIC is
    # steered there, so it all leaves on b...
    w = windows['drained']
    assert w[SRC]['a']['tx_packets'] == 0, w[SRC]['a']
    assert w[SRC]['b']['tx_packets'] + w[SRC]['b']['steered_in_packets'] >= busy, w[SRC]['b']
    # ...r2h1 receives it on b, and its replies to r1h1 are steered off a onto b as well...
    assert w[DST]['b']['rx_packets'] >= busy and w[DST]['a']['rx_packets'] <= NOISE, w[DST]
    assert w[DST]['a']['tx_packets'] == 0 and w[DST]['a']['steered_packets'] > 0, w[DST]['a']
    # ...and the switches agree: plane a carries nothing from either host.
    assert w['ports'][(SRC, 'a')] <= NOISE and w['ports'][(SRC, 'b')] >= busy, w['ports']
    assert w['ports'][(DST, 'a')] <= NOISE and w['ports'][(DST, 'b')] > 0, w['ports']
    r1_plane_a = plane(during[SRC], 'a')
    assert r1_plane_a['drained'] and not r1_plane_a['usable'], r1_plane_a
    seen = peer(during[DST], SRC)
    assert (seen['active_plane'], seen['down_planes'], seen['learned_planes']) == ('b', ['a'], ['a']), seen

    # Undrained: everything is back on plane a, in both directions.
    w = windows['undrained']
    assert w[SRC]['a']['steered_packets'] == 0 and w[SRC]['a']['tx_packets'] >= busy, w[SRC]['a']
    assert w[SRC]['b']['tx_packets'] == 0, w[SRC]['b']
    assert w[DST]['a']['rx_packets'] >= busy and w[DST]['b']['rx_packets'] <= NOISE, w[DST]
    assert w[DST]['a']['steered_packets'] == 0 and w[DST]['a']['tx_packets'] > 0, w[DST]['a']
    assert w[DST]['b']['tx_packets'] == 0, w[DST]['b']
    assert w['ports'][(SRC, 'a')] >= busy and w['ports'][(SRC, 'b')] <= NOISE, w['ports']
    assert w['ports'][(DST, 'a')] > 0 and w['ports'][(DST, 'b')] <= NOISE, w['ports']
    assert not plane(after[SRC], 'a')['drained']
    seen = peer(after[DST], SRC)
    assert (seen['active_plane'], seen['down_planes'], seen['learned_planes']) == ('a', [], []), seen

    # r2h1 learned exactly once when the drain began and unlearned exactly once at the undrain
    # (no flapping); r1h1, which made the decisions, never learned anything from r2h1's echo.
    drain, undrain = window(s0, s2), window(s2, s4)
    assert (drain[DST]['b']['learned'], drain[DST]['a']['unlearned']) == (1, 0), drain[DST]
    assert (undrain[DST]['b']['learned'], undrain[DST]['a']['unlearned']) == (0, 1), undrain[DST]
    total = window(s0, s4)[SRC]
    assert all(total[p]['learned'] == 0 and total[p]['unlearned'] == 0 for p in ('a', 'b')), total
    if lab.fabric == 'routed':
        # Plane b routes only its own prefixes: every packet of the move went translated, both ways.
        moved = xlat_counters(lab, SRC, 'b'), xlat_counters(lab, DST, 'b')
        assert all(c['translated_out'] > 0 and c['translated_in'] > 0 and c['untranslatable'] == 0 for c in moved), moved
