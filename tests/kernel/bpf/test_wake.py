"""The wake records (edgeft_wake_v1): a peer's first packet on a plane after an idle time tells
the agent, through a ring buffer it polls, that traffic with the peer resumed (BPF_PROG_TEST_RUN,
real kernel, both loaders; the records are read as the agent reads them, with ringbuf.py)."""

from __future__ import annotations

import time

import pytest
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

import bpf_packets as P
from bpf_packets import FAMILIES, add_peer
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout, probe, ringbuf
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.testrun import TC_ACT_UNSPEC, prog_test_run

IDLE_NS = layout.TUNABLES["EDGEFT_WAKE_IDLE_NS"]


@pytest.fixture
def ring(dp):
    """The host's wake ring, emptied of what earlier tests left in it."""
    r = ringbuf.RingBuffer(dp.maps.wake.fd)
    try:
        r.consume()
        yield r
    finally:
        r.close()


def wakes(ring) -> list:
    return [(w.peer_id, w.plane, w.dir) for w in map(layout.Wake.from_buffer_copy, ring.consume())]


def send(dp, family, plane=0):
    r = prog_test_run(dp.fd(plane, "egress"), P.to_peer(family, plane=plane))
    assert r.retval == TC_ACT_UNSPEC


def receive(dp, family, plane=0):
    r = prog_test_run(dp.fd(plane, "ingress"), P.from_peer(family, plane=plane))
    assert r.retval == TC_ACT_UNSPEC


@FAMILIES
def test_the_first_packet_to_a_peer_wakes_the_agent_once(dp, ring, family):
    add_peer(dp)
    send(dp, family, plane=1)
    assert wakes(ring) == [(P.PEER_ID, 1, layout.WAKE_TX)]
    for _repeat in range(3):  # traffic that goes on is not news
        send(dp, family, plane=1)
    time.sleep(0.001)  # past the stamps' resolution: the stamp moves, still no record
    send(dp, family, plane=1)
    assert wakes(ring) == []


@FAMILIES
def test_traffic_from_a_peer_wakes_the_agent_too(dp, ring, family):
    add_peer(dp)
    receive(dp, family, plane=0)
    assert wakes(ring) == [(P.PEER_ID, 0, layout.WAKE_RX)]
    receive(dp, family, plane=0)
    assert wakes(ring) == []


def test_traffic_after_the_idle_time_wakes_again_and_shorter_gaps_do_not(dp, ring):
    add_peer(dp)
    slot = layout.seen_slot(P.PEER_ID, 0)
    now = time.monotonic_ns()
    dp.maps.sent.put(slot, now - IDLE_NS // 2)  # half the idle time ago: still talking
    send(dp, 4)
    assert wakes(ring) == []
    assert dp.maps.last_sent(P.PEER_ID)[0] >= now  # the stamp moved all the same
    dp.maps.sent.put(slot, now - IDLE_NS - 1000000)  # idle for longer than that
    send(dp, 4)
    assert wakes(ring) == [(P.PEER_ID, 0, layout.WAKE_TX)]


def test_other_destinations_neighbour_discovery_and_probes_wake_nothing(dp, ring):
    """A probe tests a plane and is not traffic: the agent's own probes of an idle peer, and the
    peer's of us, must not make the peer look active."""
    add_peer(dp)
    prog_test_run(dp.fd(0, "egress"), P.udp(4, P.LOCAL[4][0], P.STRANGER[4]))
    prog_test_run(dp.fd(0, "ingress"), P.neighbour_solicitation(P.PEER[6][0], P.LOCAL[6][0]))
    request = UDP(sport=40000, dport=probe.PORT) / probe.request(0xA1B2C3D4, 1, 0)
    prog_test_run(dp.fd(0, "egress"), bytes(Ether(src=P.MAC_LOCAL, dst=P.MAC_PEER) / P.ip(4, P.LOCAL[4][0], P.PEER[4][0])
                                            / request))
    prog_test_run(dp.fd(0, "ingress"), bytes(Ether(src=P.MAC_PEER, dst=P.MAC_LOCAL) / P.ip(4, P.PEER[4][0], P.LOCAL[4][0])
                                             / request))
    assert wakes(ring) == []
    assert dp.maps.last_traffic([P.PEER_ID]) == {P.PEER_ID: 0}
