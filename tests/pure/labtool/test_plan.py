"""The address plan and the derived fabric (pure: no namespaces)."""

from __future__ import annotations

from ipaddress import ip_interface, ip_network

from edgeft_lab import load_topology
from edgeft_lab.plan import Route, plan_fabric


def test_l2_host_addresses_use_the_plane_prefix_length():
    plan = plan_fabric(load_topology("default"))
    r1h1 = plan.host("r1h1")
    assert r1h1.netns == "edgeft-r1h1"
    a, b = r1h1.port("a"), r1h1.port("b")
    assert (a.ifname, a.ipv4, a.ipv6, a.switch) == (
        "fab0", ip_interface("198.18.1.11/16"), ip_interface("fd0e:d6ef:7a00:1::b/56"), "tor-r1-a")
    assert (b.ifname, b.ipv4, b.ipv6, b.switch) == (
        "fab1", ip_interface("198.19.1.11/16"), ip_interface("fd0e:d6ef:7b00:1::b/56"), "tor-r1-b")
    assert a.gateway4 is None and r1h1.routes == ()
    assert plan.host("r2h2").port("a").ipv4 == ip_interface("198.18.2.12/16")


def test_l2_switches_are_bridges_with_peer_named_ports():
    plan = plan_fabric(load_topology("default"))
    assert [s.name for s in plan.switches] == ["tor-r1-a", "tor-r2-a", "spine-a", "tor-r1-b", "tor-r2-b", "spine-b"]
    tor = plan.switch("tor-r1-a")
    assert tor.ports == ("r1h1", "r1h2", "spine-a")
    assert [(b.name, b.ports, b.addresses) for b in tor.bridges] == [("br0", tor.ports, ())]
    assert plan.switch("spine-a").ports == ("tor-r1-a", "tor-r2-a")
    assert plan.switch("spine-a").hosts == ("r1h1", "r1h2", "r2h1", "r2h2")
    link = plan.host_link("r1h1", "a")
    assert (link.a.netns, link.a.ifname, link.b.netns, link.b.ifname) == (
        "edgeft-r1h1", "fab0", "edgeft-tor-r1-a", "r1h1")
    assert len(plan.links) == 12


def test_routed_plan_gateways_transit_links_and_routes():
    plan = plan_fabric(load_topology("routed"))
    port = plan.host("r2h1").port("a")
    assert port.ipv4 == ip_interface("198.18.2.11/24")
    assert port.ipv6 == ip_interface("fd0e:d6ef:7a00:2::b/64")
    assert (str(port.gateway4), str(port.gateway6)) == ("198.18.2.1", "fd0e:d6ef:7a00:2::1")
    # A plane carries only its own prefixes: host routes per plane via that plane's gateway.
    assert plan.host("r2h1").routes == (
        Route(ip_network("198.18.0.0/16"), port.gateway4, "fab0"),
        Route(ip_network("fd0e:d6ef:7a00::/56"), port.gateway6, "fab0"),
        Route(ip_network("198.19.0.0/16"), plan.host("r2h1").port("b").gateway4, "fab1"),
        Route(ip_network("fd0e:d6ef:7b00::/56"), plan.host("r2h1").port("b").gateway6, "fab1"),
    )
    tor = plan.switch("tor-r2-a")
    assert tor.bridges[0].name == "br-r2" and tor.bridges[0].ports == ("r2h1", "r2h2")
    assert [str(a) for a in tor.bridges[0].addresses] == ["198.18.2.1/24", "fd0e:d6ef:7a00:2::1/64"]
    # Transit link k (= rack) is the k-th /31 (/127) of subnet 0: spine even, ToR odd.
    assert dict(tor.port_addresses)["spine-a"] == (ip_interface("198.18.0.5/31"), ip_interface("fd0e:d6ef:7a00::5/127"))
    spine = plan.switch("spine-a")
    assert dict(spine.port_addresses)["tor-r2-a"] == (
        ip_interface("198.18.0.4/31"), ip_interface("fd0e:d6ef:7a00::4/127"))
    assert Route(ip_network("198.18.2.0/24"), ip_interface("198.18.0.5/31").ip, "tor-r2-a") in spine.routes
    # Plane a routers know nothing of plane b.
    for switch in plan.switches:
        if switch.plane == "a":
            for route in switch.routes:
                assert route.dst.subnet_of(ip_network("198.18.0.0/16") if route.dst.version == 4
                                           else ip_network("fd0e:d6ef:7a00::/56"))


def test_flat_plan_has_one_switch_per_plane():
    plan = plan_fabric(load_topology("flat"))
    assert [s.name for s in plan.switches] == ["sw-a", "sw-b"]
    assert plan.switch("sw-a").ports == ("r1h1", "r1h2", "r2h1", "r2h2")
    assert plan.switch("sw-a").neighbors == ()
    assert plan.host("r2h1").port("b").switch == "sw-b"
    assert len(plan.links) == 8


def test_renamed_lab_prefixes_every_namespace():
    plan = plan_fabric(load_topology("default").renamed("t-abc"))
    assert all(ns.startswith("t-abc-") for ns in plan.namespaces)
    assert len(plan.namespaces) == 10
