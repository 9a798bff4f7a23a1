"""Failover on routed planes: traffic to a peer's plane-a address leaves on plane b
translated to the two hosts' plane-b failover addresses and is translated back by the
receiver (bpf/edgeft_xlat.h), with the agent, on the routed lab (fabric_routed.yml: each
plane a leaf-spine network that routes only its own prefixes).

The same bounds as on L2 planes (test_failover.py), on the network's outage: 10 ms for a
carrier loss, 100 ms for a silent ToR, TCP intact. IPv6 loses its carrier on the
switch side: an admin-down NIC makes its kept IPv6 addresses tentative, so no flow can
be sourced from them on any fabric (docs/datapath.md, routed mode).
"""

from __future__ import annotations

import time

import pytest
from edgeft_lab.traffic import TcpStream, UdpStream
from lab_helpers import fault_after

from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import DatapathMaps

FAMILIES = pytest.mark.parametrize("family", [4, 6], ids=["ipv4", "ipv6"])


def xlat(lab, host, plane):
    with DatapathMaps.open_pinned(str(lab.pin_root(host))) as maps:
        return maps.xlat_counters_of(plane)


def translations(lab):
    return {host: xlat(lab, host, 1) for host in ("r1h1", "r2h1")}


@FAMILIES
def test_carrier_loss_on_a_routed_plane_moves_traffic_translated(routed_agent_lab, family):
    lab, agents = routed_agent_lab
    agents.start_all()
    before = translations(lab)
    with UdpStream(lab, src="r1h1", dst="r2h1", plane="a", family=family, pps=10000) as udp, \
            TcpStream(lab, "r1h1", "r2h1", plane="a", rate_bps=50e6, family=family) as tcp:
        fault_after(udp, 0.5)
        lab.link_down("r1h1", "a", side="host" if family == 4 else "switch")
        time.sleep(1.0)
        udp.mark("repair")
        lab.repair_all()
        time.sleep(2.5)
    u, t = udp.result(), tcp.result()
    after = translations(lab)
    print("\nrouted, r1h1 plane-a link down (IPv%d): %s\n%s\ntranslations plane b: %s" % (family, u.summary(), t.summary(), after))
    assert u.socket_drops == 0
    assert u.max_outage_ms <= 10.0, u.summary()
    assert t.resets == 0 and t.survived, t.summary()
    # Both ways went through the failover addresses: r1h1's traffic and r2h1's replies.
    for host in ("r1h1", "r2h1"):
        assert after[host]["translated_out"] > before[host]["translated_out"], (host, after)
        assert after[host]["translated_in"] > before[host]["translated_in"], (host, after)
        assert after[host]["untranslatable"] == before[host]["untranslatable"], (host, after)


@FAMILIES
def test_silent_tor_on_a_routed_plane(routed_agent_lab, family):
    lab, agents = routed_agent_lab
    agents.start_all()
    with UdpStream(lab, src="r1h1", dst="r2h1", plane="a", family=family, pps=10000) as udp, \
            TcpStream(lab, "r1h1", "r2h1", plane="a", rate_bps=50e6, family=family) as tcp:
        fault_after(udp, 0.5)
        lab.silence("tor-r2-a")
        time.sleep(1.5)
        udp.mark("repair")
        lab.repair_all()
        time.sleep(2.5)
    u, t = udp.result(), tcp.result()
    print("\nrouted, silent tor-r2-a (IPv%d): %s\n%s" % (family, u.summary(), t.summary()))
    assert u.max_outage_ms <= 100.0, u.summary()
    assert t.resets == 0 and t.survived, t.summary()
    # The agent's metrics show the translation (its own counters from edgeft_xctr_v1).
    plane_b = frozenset({"plane": "b", "interface": "fab1"}.items())
    m = agents.metrics("r1h1")
    assert m[("edgeft_datapath_translated_out_total", plane_b)] > 0, sorted(k for k in m if "translat" in k[0])


def test_a_multi_rail_pair_keeps_both_flows_when_plane_a_fails(routed_agent_lab):
    """One native flow per plane between the same two hosts: plane b's flow is never
    touched, plane a's moves onto plane b translated, both TCP connections live on."""
    lab, agents = routed_agent_lab
    agents.start_all()
    with UdpStream(lab, src="r1h1", dst="r2h1", plane="a", family=4, pps=5000) as udp_a, \
            UdpStream(lab, src="r1h1", dst="r2h1", plane="b", family=4, pps=5000) as udp_b, \
            TcpStream(lab, "r1h1", "r2h1", plane="a", rate_bps=25e6) as tcp_a, \
            TcpStream(lab, "r1h1", "r2h1", plane="b", rate_bps=25e6) as tcp_b:
        time.sleep(0.5)
        lab.link_down("r1h1", "a", side="switch")
        time.sleep(1.0)
        lab.repair_all()
        time.sleep(2.5)
    a, b, ta, tb = udp_a.result(), udp_b.result(), tcp_a.result(), tcp_b.result()
    print("\nmulti-rail, plane a down at r1h1:\n%s\n%s\n%s\n%s" % (a.summary(), b.summary(), ta.summary(), tb.summary()))
    assert b.lost == 0 and b.max_outage_ms == 0, b.summary()
    assert a.max_outage_ms <= 10.0, a.summary()
    for t in (ta, tb):
        assert t.resets == 0 and t.survived, t.summary()
