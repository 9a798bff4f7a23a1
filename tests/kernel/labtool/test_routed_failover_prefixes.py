"""Failover prefixes of routed planes: defaults, validation, the routes that carry the hosts'
failover addresses, the inventory's edgeft_failover_prefixes, and real packets between two
failover addresses across a routed plane."""

from __future__ import annotations

import copy
import subprocess
from ipaddress import ip_address, ip_interface, ip_network

import pytest
import yaml
from edgeft_lab import Lab, TopologyError, load_topology
from edgeft_lab.addressing import failover_library
from edgeft_lab.fabric import install_routes
from edgeft_lab.plan import Route, plan_fabric
from edgeft_lab.topology import from_dict
from lab_helpers import assert_nothing_left, needs_root, unique_name

ROUTED = {
    "name": "edgeft",
    "fabric": {"kind": "leaf-spine", "mode": "routed"},
    "racks": 2,
    "hosts_per_rack": 2,
    "planes": [
        {"name": "a", "nic": "fab0", "ipv4": "198.18.0.0/16", "ipv6": "fd0e:d6ef:7a00::/56"},
        {"name": "b", "nic": "fab1", "ipv4": "198.19.0.0/16", "ipv6": "fd0e:d6ef:7b00::/56"},
    ],
}


def _routed(**plane_b: object) -> dict:
    """ROUTED with plane b's keys changed (None deletes one)."""
    doc = copy.deepcopy(ROUTED)
    for key, value in plane_b.items():
        if value is None:
            doc["planes"][1].pop(key, None)
        else:
            doc["planes"][1][key] = value
    return doc


# ----------------------------------------------------------------------------- topology


def test_routed_planes_default_to_their_last_subnet():
    topology = from_dict(ROUTED, "t.yml")
    a, b = topology.planes
    assert (a.failover_ipv4, a.failover_ipv6) == (ip_network("198.18.255.0/24"), ip_network("fd0e:d6ef:7a00:ff::/64"))
    assert (b.failover_ipv4, b.failover_ipv6) == (ip_network("198.19.255.0/24"), ip_network("fd0e:d6ef:7b00:ff::/64"))
    # routed.yml spells the defaults out: the same fabric, the same fingerprint.
    shipped = load_topology("routed")
    assert shipped.planes == topology.planes
    assert shipped.fingerprint() == topology.fingerprint()
    assert all("failover_ipv4" not in plane for plane in shipped.to_dict()["planes"])


def test_smaller_planes_default_to_their_own_last_subnet():
    doc = _routed(ipv4="198.19.0.0/18", ipv6="fd0e:d6ef:7b00::/60")
    plane = from_dict(doc, "t.yml").planes[1]
    assert (plane.failover_ipv4, plane.failover_ipv6) == (
        ip_network("198.19.63.0/24"), ip_network("fd0e:d6ef:7b00:f::/64"))


def test_explicit_prefixes_round_trip_and_change_the_fingerprint():
    doc = _routed(failover_ipv4="198.19.200.0/25", failover_ipv6="fd0e:d6ef:7b00:80::/64")
    topology = from_dict(doc, "t.yml")
    assert topology.planes[1].failover_ipv4 == ip_network("198.19.200.0/25")
    written = topology.to_dict()["planes"][1]
    assert (written["failover_ipv4"], written["failover_ipv6"]) == ("198.19.200.0/25", "fd0e:d6ef:7b00:80::/64")
    assert from_dict(topology.to_dict(), "t.yml") == topology
    assert topology.fingerprint() != from_dict(ROUTED, "t.yml").fingerprint()


def test_l2_planes_have_no_failover_prefixes():
    for name in ("default", "flat"):
        topology = load_topology(name)
        assert all(p.failover_ipv4 is None and p.failover_ipv6 is None for p in topology.planes)
        assert all(p.failover4 is None and p.failover6 is None for h in plan_fabric(topology).hosts for p in h.ports)


def _l2(key: str, value: str) -> dict:
    doc = _routed(**{key: value})
    doc["fabric"]["mode"] = "l2"
    return doc


BAD_CASES = [
    # (id, document, key path, part of the reason)
    ("overlaps-rack-subnet", _routed(failover_ipv4="198.19.2.0/24"), "planes[1].failover_ipv4",
     "overlaps the native subnet 198.19.2.0/24"),
    ("overlaps-transit-subnet", _routed(failover_ipv6="fd0e:d6ef:7b00::/62"), "planes[1].failover_ipv6",
     "overlaps the native subnet fd0e:d6ef:7b00::/64"),
    ("ipv4-too-small", _routed(failover_ipv4="198.19.255.0/30"), "planes[1].failover_ipv4",
     "has 2 usable addresses (0 of them given in inventory) but 4 hosts need one"),
    ("ipv6-too-small", _routed(failover_ipv6="fd0e:d6ef:7b00:ff::/126"), "planes[1].failover_ipv6",
     "has 3 usable addresses (0 of them given in inventory) but 4 hosts need one"),
    ("outside-the-plane", _routed(failover_ipv4="198.18.255.0/24"), "planes[1].failover_ipv4",
     "outside the plane's 198.19.0.0/16"),
    ("outside-the-lab-range", _routed(failover_ipv4="10.255.0.0/24"), "planes[1].failover_ipv4",
     "outside the plane's 198.19.0.0/16"),
    ("wrong-family", _routed(failover_ipv4="fd0e:d6ef:7b00:ff::/64"), "planes[1].failover_ipv4",
     "not an IPv4 prefix"),
    ("host-bits", _routed(failover_ipv4="198.19.255.1/24"), "planes[1].failover_ipv4", "has host bits set"),
    ("not-a-string", _routed(failover_ipv6=64), "planes[1].failover_ipv6", "must be an IPv6 prefix string"),
    ("ipv4-on-l2", _l2("failover_ipv4", "198.19.255.0/24"), "planes[1].failover_ipv4", "only routed fabrics"),
    ("ipv6-on-l2", _l2("failover_ipv6", "fd0e:d6ef:7b00:ff::/64"), "planes[1].failover_ipv6", "only routed fabrics"),
    # 3 racks fill a /22 (subnets 0..3) and a /62: no last subnet is left for a default.
    ("no-default-ipv4", {**_routed(ipv4="198.19.0.0/22"), "racks": 3}, "planes[1].failover_ipv4", "no default"),
    ("no-default-ipv6", {**_routed(ipv6="fd0e:d6ef:7b00::/62"), "racks": 3}, "planes[1].failover_ipv6", "no default"),
]


@pytest.mark.parametrize("doc,key_path,reason", [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES])
def test_bad_failover_prefix_is_rejected_naming_the_key(doc, key_path, reason):
    with pytest.raises(TopologyError) as caught:
        from_dict(doc, "bad.yml")
    assert caught.value.key_path == key_path
    assert reason in caught.value.reason
    assert str(caught.value).startswith(f"bad.yml: {key_path}: ")


def test_bad_failover_prefix_is_rejected_before_anything_exists(tmp_path):
    doc = _routed(failover_ipv4="198.19.1.0/24")
    doc["name"] = unique_name()
    path = tmp_path / "bad.yml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(TopologyError, match=r"planes\[1\]\.failover_ipv4: 198\.19\.1\.0/24 overlaps the native"):
        Lab(path)
    assert_nothing_left(doc["name"])


# ----------------------------------------------------------------------------- plan


def test_hosts_sorted_by_name_take_the_failover_addresses_in_order():
    plan = plan_fabric(load_topology("routed"))
    got = {h.name: (str(h.port("b").failover4), str(h.port("b").failover6)) for h in plan.hosts}
    assert got == {
        "r1h1": ("198.19.255.1", "fd0e:d6ef:7b00:ff::1"),
        "r1h2": ("198.19.255.2", "fd0e:d6ef:7b00:ff::2"),
        "r2h1": ("198.19.255.3", "fd0e:d6ef:7b00:ff::3"),
        "r2h2": ("198.19.255.4", "fd0e:d6ef:7b00:ff::4"),
    }
    assert str(plan.host("r2h2").port("a").failover4) == "198.18.255.4"


def test_tors_route_their_hosts_failover_addresses_to_the_hosts():
    plan = plan_fabric(load_topology("routed"))
    tor = plan.switch("tor-r2-b")
    assert tor.routes == (
        Route(ip_network("198.19.0.0/16"), ip_address("198.19.0.4"), "spine-b"),
        Route(ip_network("fd0e:d6ef:7b00::/56"), ip_address("fd0e:d6ef:7b00::4"), "spine-b"),
        Route(ip_network("198.19.255.3/32"), ip_address("198.19.2.11"), "br-r2"),
        Route(ip_network("fd0e:d6ef:7b00:ff::3/128"), ip_address("fd0e:d6ef:7b00:2::b"), "br-r2"),
        Route(ip_network("198.19.255.4/32"), ip_address("198.19.2.12"), "br-r2"),
        Route(ip_network("fd0e:d6ef:7b00:ff::4/128"), ip_address("fd0e:d6ef:7b00:2::c"), "br-r2"),
    )


def test_spines_route_every_failover_address_to_its_rack():
    plan = plan_fabric(load_topology("routed"))
    spine = plan.switch("spine-a")
    failover = [r for r in spine.routes if r.dst.prefixlen == r.dst.max_prefixlen]
    assert failover == [
        Route(ip_network("198.18.255.1/32"), ip_address("198.18.0.3"), "tor-r1-a"),
        Route(ip_network("fd0e:d6ef:7a00:ff::1/128"), ip_address("fd0e:d6ef:7a00::3"), "tor-r1-a"),
        Route(ip_network("198.18.255.2/32"), ip_address("198.18.0.3"), "tor-r1-a"),
        Route(ip_network("fd0e:d6ef:7a00:ff::2/128"), ip_address("fd0e:d6ef:7a00::3"), "tor-r1-a"),
        Route(ip_network("198.18.255.3/32"), ip_address("198.18.0.5"), "tor-r2-a"),
        Route(ip_network("fd0e:d6ef:7a00:ff::3/128"), ip_address("fd0e:d6ef:7a00::5"), "tor-r2-a"),
        Route(ip_network("198.18.255.4/32"), ip_address("198.18.0.5"), "tor-r2-a"),
        Route(ip_network("fd0e:d6ef:7a00:ff::4/128"), ip_address("fd0e:d6ef:7a00::5"), "tor-r2-a"),
    ]
    # The rest of the plan is as before: rack routes first, hosts route only their planes' prefixes.
    assert spine.routes[0] == Route(ip_network("198.18.1.0/24"), ip_address("198.18.0.3"), "tor-r1-a")
    assert [r.dst for r in plan.host("r1h1").routes] == [
        ip_network("198.18.0.0/16"), ip_network("fd0e:d6ef:7a00::/56"),
        ip_network("198.19.0.0/16"), ip_network("fd0e:d6ef:7b00::/56"),
    ]


def test_flat_routed_switch_routes_failover_addresses_to_the_hosts():
    doc = _routed()
    doc["fabric"]["kind"] = "flat"
    plan = plan_fabric(from_dict(doc, "t.yml"))
    assert Route(ip_network("198.19.255.3/32"), ip_address("198.19.2.11"), "br-r2") in plan.switch("sw-b").routes
    assert len(plan.switch("sw-b").routes) == 8  # 4 hosts, 2 families


def test_l2_plans_are_unchanged():
    plan = plan_fabric(load_topology("default"))
    assert all(s.routes == () for s in plan.switches)
    assert all(h.routes == () for h in plan.hosts)


# ----------------------------------------------------------------------------- inventory


def test_routed_inventory_carries_the_prefixes_not_the_addresses():
    doc = Lab("routed", name="t-fo").inventory()["all"]
    assert doc["vars"]["edgeft_failover_prefixes"] == {
        "a": {"ipv4": "198.18.255.0/24", "ipv6": "fd0e:d6ef:7a00:ff::/64"},
        "b": {"ipv4": "198.19.255.0/24", "ipv6": "fd0e:d6ef:7b00:ff::/64"},
    }
    assert doc["vars"]["edgeft_lab"]["planes"][1] == {
        "name": "b", "nic": "fab1", "ipv4": "198.19.0.0/16", "ipv6": "fd0e:d6ef:7b00::/56",
        "failover_ipv4": "198.19.255.0/24", "failover_ipv6": "fd0e:d6ef:7b00:ff::/64",
    }
    for host in doc["children"]["fabric"]["hosts"].values():
        assert all("failover4" not in p and "failover6" not in p for p in host["edgeft_planes"])
    assert "edgeft_failover_prefixes" not in Lab("default", name="t-fo").inventory()["all"]["vars"]


def test_hosts_derive_the_addresses_the_fabric_routes():
    """What the multihome role computes from the inventory is what the lab's plan routes."""
    lab = Lab("routed", name="t-fo")
    doc = lab.inventory()["all"]
    hosts = doc["children"]["fabric"]["hosts"]
    derived = failover_library().plan(
        {name: host["edgeft_planes"] for name, host in hosts.items()}, doc["vars"]["edgeft_failover_prefixes"]
    )
    planned = {
        h.name: {p.plane: {"ipv4": str(p.failover4), "ipv6": str(p.failover6)} for p in h.ports}
        for h in lab.plan.hosts
    }
    assert derived == planned


# ----------------------------------------------------------------------------- real packets

R1H1_B = ("198.19.255.1", "fd0e:d6ef:7b00:ff::1")
R2H1_B = ("198.19.255.3", "fd0e:d6ef:7b00:ff::3")


def _add_failover_addresses(lab: Lab, host: str, plane: str) -> None:
    """By hand what the multihome role does on deploy: the plane's failover addresses on its NIC."""
    port = lab.plan.host(host).port(plane)
    with lab.ipr(host) as sock:
        index = sock.link_lookup(ifname=port.ifname)[0]
        for address in (port.failover4, port.failover6):
            sock.addr("add", index=index, address=str(address), prefixlen=address.max_prefixlen)


def _ping_from(lab: Lab, host: str, source: str, destination: str, deadline: int = 0) -> subprocess.CompletedProcess:
    """One echo answered within a second; with `deadline`, one echo a second until an answer or the
    deadline. A repaired path needs the deadline: a neighbour entry a router left resolving while its
    link was down asks again only on its retransmit timer, up to a second later."""
    family = ip_address(destination).version
    wait = ["-w", str(deadline)] if deadline else ["-W", "1"]
    argv = ["ping", f"-{family}", "-n", "-c", "1", *wait, "-I", source, destination]
    return subprocess.run(lab.exec_argv(host, argv), capture_output=True, text=True, check=False)


@needs_root
def test_failover_addresses_reach_each_other_across_routed_plane_b(make_lab):
    lab = make_lab("routed")
    assert lab.up()
    assert (tuple(str(a) for a in (lab.plan.host("r1h1").port("b").failover4, lab.plan.host("r1h1").port("b").failover6))
            == R1H1_B)
    # The routers carry the planned failover routes.
    with lab.ipr("tor-r2-b") as sock:
        (route,) = sock.get_routes(family=2, dst="198.19.255.3", dst_len=32)
        assert route.get_attr("RTA_GATEWAY") == "198.19.2.11"
    with lab.ipr("spine-b") as sock:
        (route,) = sock.get_routes(family=10, dst="fd0e:d6ef:7b00:ff::3", dst_len=128)
        assert route.get_attr("RTA_GATEWAY") == "fd0e:d6ef:7b00::5"
    for host in ("r1h1", "r2h1"):
        _add_failover_addresses(lab, host, "b")
    # Plane a has failed for r1h1: its traffic to r2h1 is translated onto plane b's failover addresses.
    lab.link_down("r1h1", "a", side="switch")
    for source, destination in zip(R1H1_B, R2H1_B):
        # The host routes plane b's prefix via plane b's gateway, which covers the failover prefix.
        result = _ping_from(lab, "r1h1", source, destination)
        assert result.returncode == 0, result.stdout + result.stderr
    # Control: without its ToR's route to the host, r2h1's failover address is unreachable.
    (to_r2h1,) = [r for r in lab.plan.switch("tor-r2-b").routes if str(r.dst) == "198.19.255.3/32"]
    with lab.ipr("tor-r2-b") as sock:
        sock.route("del", dst=str(to_r2h1.dst), gateway=str(to_r2h1.via))
        assert _ping_from(lab, "r1h1", R1H1_B[0], R2H1_B[0]).returncode != 0
        install_routes(sock, [to_r2h1])
    # A spine power cycle flushes the routes on its ports; the repair restores the failover ones too.
    lab.power_off("spine-b")
    assert _ping_from(lab, "r1h1", R1H1_B[0], R2H1_B[0]).returncode != 0
    lab.repair_all()
    for source, destination in zip(R1H1_B, R2H1_B):
        result = _ping_from(lab, "r1h1", source, destination, deadline=3)
        assert result.returncode == 0, result.stdout + result.stderr


def test_failover_addresses_are_in_the_lab_ranges():
    for h in plan_fabric(load_topology("routed")).hosts:
        for port in h.ports:
            assert ip_interface(f"{port.failover4}/32").network.subnet_of(ip_network("198.18.0.0/15"))
            assert ip_interface(f"{port.failover6}/128").network.subnet_of(ip_network("fc00::/7"))
