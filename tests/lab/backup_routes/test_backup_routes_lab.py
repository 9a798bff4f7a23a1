"""Kernel backup routes on a lab fabric: install, fail over under traffic, idempotence,
exact set, check mode.

r1h1 and r2h1 (different racks) get backup routes to each other's plane-a address
(/32 and /128): via fab0 (metric 100), else via fab1 (metric 200). On fab1 the IPv4
route is on-link: the peer answers ARP on fab1 for its fab0 address (arp_ignore 0,
Linux's default, checked below). The IPv6 one goes via the peer's plane-b address:
Linux answers a neighbour solicitation only for addresses of the interface it
arrives on (shown below as well). Run with -s to see the figures.
"""

from __future__ import annotations

import socket
import subprocess
import time

import pytest
from routes_lab import apply_routes

from edgeft_lab import netns
from edgeft_lab.traffic import UdpStream
from lab_helpers import fault_after

pytestmark = pytest.mark.slow

A, B = "r1h1", "r2h1"
PPS = 10_000
RTO_MIN_MS = 50
# The primary route goes away (admin-down NIC) or is skipped (no carrier) in the same
# kernel operation that takes the link down, and the backup path needs one ARP/ND round
# trip on a veth (well under 1 ms). Measured on the 2-core test machine, 60 faults (20 each:
# IPv4 host side, IPv4 switch side, IPv6 host side): max gap median 1.7 ms, worst 6.9 ms,
# and every gap equal to the sender's own longest pause - the network added nothing
# measurable. 50 ms leaves room for scheduler noise when other suites share the machine
# (docs/lab.md: 5-50 ms stalls of unprivileged senders) and is still 20x below what a
# host without backup routes loses (the whole fault, or about 1 s of ARP retries).
MAX_GAP_MS = 50
# Packets already on fab0 or in its queue when it is cut are lost with it: at most 13 in
# the 60 faults above (1.3 ms of traffic).
MAX_LOST = 50


def ip(lab, host, *args):
    return subprocess.run(["ip", "-n", lab.netns(host), *args], check=True, capture_output=True, text=True).stdout


def addr(lab, host, plane, family):
    port = lab.plan.host(host).port(plane)
    return str((port.ipv4 if family == 4 else port.ipv6).ip)


def declared(lab, hosts=(A, B), families=(4, 6)):
    """Each host's backup routes to the other's plane-a address."""
    out = {}
    for host, peer in ((A, B), (B, A)):
        if host not in hosts:
            continue
        routes = []
        if 4 in families:
            routes.append({"dst": addr(lab, peer, "a", 4) + "/32", "src": addr(lab, host, "a", 4), "rto_min_ms": RTO_MIN_MS,
                           "via": [{"interface": "fab0"}, {"interface": "fab1"}]})
        if 6 in families:
            routes.append({"dst": addr(lab, peer, "a", 6) + "/128", "src": addr(lab, host, "a", 6), "rto_min_ms": RTO_MIN_MS,
                           "via": [{"interface": "fab0"}, {"interface": "fab1", "gateway": addr(lab, peer, "b", 6)}]})
        out[host] = routes
    return out


def edgeft_routes(lab, host):
    """(family, dst, metric, dev, gateway, rto_min) of every proto-237 route of host, read with pyroute2."""
    out = set()
    with lab.ipr(host) as ipr:
        names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
        for family in (socket.AF_INET, socket.AF_INET6):
            for r in ipr.get_routes(family=family, proto=237):
                metrics = r.get_attr("RTA_METRICS")
                rto = metrics.get_attr("RTAX_RTO_MIN") if metrics is not None else None
                out.add((4 if family == socket.AF_INET else 6, "%s/%d" % (r.get_attr("RTA_DST"), r["dst_len"]),
                         r.get_attr("RTA_PRIORITY"), names[r.get_attr("RTA_OIF")], r.get_attr("RTA_GATEWAY"), rto))
    return out


def host_state(lab):
    """Everything the module may change on both hosts: routes (all, as `ip route` prints) and the sysctls."""
    out = {}
    for host in (A, B):
        ns = lab.netns(host)
        out[host] = [ip(lab, host, f, "route", "show", "table", "all") for f in ("-4", "-6")]
        out[host].append({k: netns.read_sysctl(ns, k) for k in (
            "net.ipv4.conf.fab0.ignore_routes_with_linkdown", "net.ipv4.conf.fab1.ignore_routes_with_linkdown",
            "net.ipv6.conf.fab0.ignore_routes_with_linkdown", "net.ipv6.conf.fab1.ignore_routes_with_linkdown")})
    return out


def expected_routes(lab, host, peer, families=(4, 6)):
    out = set()
    if 4 in families:
        dst = addr(lab, peer, "a", 4) + "/32"
        out |= {(4, dst, 100, "fab0", None, RTO_MIN_MS), (4, dst, 200, "fab1", None, RTO_MIN_MS)}
    if 6 in families:
        dst = addr(lab, peer, "a", 6) + "/128"
        out |= {(6, dst, 100, "fab0", None, RTO_MIN_MS), (6, dst, 200, "fab1", addr(lab, peer, "b", 6), RTO_MIN_MS)}
    return out


def ok(run):
    assert run.rc == 0, run.output[-4000:]
    return run


@pytest.fixture(scope="module")
def installed(routes_lab):
    """The preconditions checked, then the routes installed (after a --check run that changes nothing)."""
    lab = routes_lab
    for host in (A, B):
        ns = lab.netns(host)
        # The backup path depends on these Linux defaults in the lab's namespaces.
        assert netns.read_sysctl(ns, "net.ipv4.conf.fab1.arp_ignore") == "0"
        assert netns.read_sysctl(ns, "net.ipv4.conf.all.arp_ignore") == "0"
        assert "1" not in (netns.read_sysctl(ns, "net.ipv4.conf.all.rp_filter"), netns.read_sysctl(ns, "net.ipv4.conf.fab1.rp_filter"))
    before = host_state(lab)
    checked = ok(apply_routes(lab, declared(lab), "--check", "--diff"))
    assert checked.changed == {A: 1, B: 1}
    assert len(checked.results[A]["added"]) == 4 and host_state(lab) == before
    ok(apply_routes(lab, declared(lab)))
    return lab


def test_routes_installed_with_rto_min_and_idempotent(installed):
    lab = installed
    assert edgeft_routes(lab, A) == expected_routes(lab, A, B)
    assert edgeft_routes(lab, B) == expected_routes(lab, B, A)
    shown = ip(lab, A, "-4", "route", "show", addr(lab, B, "a", 4))
    assert "rto_min lock %dms" % RTO_MIN_MS in shown and "proto 237" in shown
    assert netns.read_sysctl(lab.netns(A), "net.ipv6.conf.fab0.ignore_routes_with_linkdown") == "1"
    before = host_state(lab)
    again = ok(apply_routes(lab, declared(lab)))
    assert again.changed == {A: 0, B: 0}
    assert again.results[A]["added"] == again.results[A]["removed"] == []
    assert host_state(lab) == before


def failover(lab, family, side):
    """UDP A -> B's plane-a address at 10 kpps; A's plane-a link goes down on `side` after 1 s."""
    with UdpStream(lab, A, B, plane="a", family=family, pps=PPS) as udp:
        fault_after(udp, 1.0)
        lab.link_down(A, "a", side=side)
        time.sleep(1.0)
    result = udp.result()
    print("\nIPv%d, %s-side link down of %s fab0: %s" % (family, side, A, result.summary()))
    return result


@pytest.mark.parametrize("family", [4, 6])
def test_traffic_continues_over_fab1_when_fab0_goes_down_host_side(installed, family):
    lab = installed
    try:
        result = failover(lab, family, "host")
        after_fault = result.received_between(result.marks["fault"] + 50, None)
        assert after_fault >= 0.8 * PPS * (result.duration_s * 1000 - result.marks["fault"] - 50) / 1000, result.summary()
        assert result.max_outage_ms <= MAX_GAP_MS, result.summary()
        assert result.lost <= MAX_LOST, result.summary()
        assert result.socket_drops == 0 and result.send_errors == {}
    finally:
        lab.repair_all()
    # The kernel deleted the routes through the NIC when it went down; the next run puts them back.
    back = ok(apply_routes(lab, declared(lab)))
    assert back.changed == {A: 1, B: 0}
    flushed = ["%s/%d dev fab0 src %s metric 100 rto_min %dms" % (addr(lab, B, "a", f), 32 if f == 4 else 128,
                                                                  addr(lab, A, "a", f), RTO_MIN_MS) for f in (4, 6)]
    assert sorted(back.results[A]["added"]) == sorted(flushed)
    assert edgeft_routes(lab, A) == expected_routes(lab, A, B)
    assert ok(apply_routes(lab, declared(lab))).changed == {A: 0, B: 0}


def test_traffic_continues_over_fab1_when_fab0_loses_carrier(installed):
    """A switch-side cut: fab0 stays up without carrier, its routes stay; ignore_routes_with_linkdown skips them."""
    lab = installed
    try:
        result = failover(lab, 4, "switch")
        assert result.max_outage_ms <= MAX_GAP_MS, result.summary()
        assert result.lost <= MAX_LOST, result.summary()
        assert result.socket_drops == 0 and result.send_errors == {}
    finally:
        lab.repair_all()
    assert ok(apply_routes(lab, declared(lab))).changed == {A: 0, B: 0}  # carrier loss deletes no route


def test_ipv6_on_link_via_the_other_nic_does_not_resolve(installed):
    """Why the IPv6 backup route needs the peer's fab1 address as gateway: an on-link route to B's
    fab0 address through fab1 sends neighbour solicitations that B does not answer."""
    lab = installed
    target = addr(lab, B, "a", 6)
    onlink = {A: [{"dst": target + "/128", "via": [{"interface": "fab1"}]}]}
    run = ok(apply_routes(lab, onlink, hosts=(A,)))
    assert any("is not on-link on fab1" in w for w in run.results[A]["warnings"])
    try:
        rx = lab.socket(B, socket.AF_INET6, socket.SOCK_DGRAM)
        tx = lab.socket(A, socket.AF_INET6, socket.SOCK_DGRAM)
        try:
            rx.bind((target, 7611))
            rx.settimeout(0.2)
            received = 0
            for _attempt in range(15):  # about 3 s: the kernel's 3 solicitations, 1 s apart
                tx.sendto(b"probe", (target, 7611))
                try:
                    rx.recv(64)
                    received += 1
                except socket.timeout:
                    pass
            assert received == 0
            neigh = ip(lab, A, "-6", "neigh", "show", target, "dev", "fab1")
            assert "FAILED" in neigh or "INCOMPLETE" in neigh, neigh
        finally:
            rx.close()
            tx.close()
    finally:
        ok(apply_routes(lab, declared(lab)))
    assert edgeft_routes(lab, A) == expected_routes(lab, A, B)


def test_removing_one_route_from_the_declaration_removes_exactly_it(installed):
    lab = installed
    only_v4 = declared(lab, families=(4,))
    before_b = host_state(lab)[B]
    checked = ok(apply_routes(lab, {A: only_v4[A], B: declared(lab)[B]}, "--check"))
    assert checked.changed == {A: 1, B: 0} and len(checked.results[A]["removed"]) == 2
    assert edgeft_routes(lab, A) == expected_routes(lab, A, B)
    run = ok(apply_routes(lab, {A: only_v4[A], B: declared(lab)[B]}))
    assert run.changed == {A: 1, B: 0}
    assert sorted(run.results[A]["removed"]) == sorted([
        "%s/128 dev fab0 src %s metric 100 rto_min %dms" % (addr(lab, B, "a", 6), addr(lab, A, "a", 6), RTO_MIN_MS),
        "%s/128 via %s dev fab1 src %s metric 200 rto_min %dms" % (addr(lab, B, "a", 6), addr(lab, B, "b", 6), addr(lab, A, "a", 6),
                                                                   RTO_MIN_MS)])
    assert run.results[A]["added"] == []
    assert edgeft_routes(lab, A) == expected_routes(lab, A, B, families=(4,))
    assert host_state(lab)[B] == before_b
    state_a = host_state(lab)[A][2]
    assert state_a["net.ipv6.conf.fab0.ignore_routes_with_linkdown"] == "0"  # put back: no IPv6 route needs it
    assert state_a["net.ipv4.conf.fab0.ignore_routes_with_linkdown"] == "1"
    # and everything goes with an empty declaration
    ok(apply_routes(lab, {A: [], B: []}))
    assert edgeft_routes(lab, A) == edgeft_routes(lab, B) == set()
