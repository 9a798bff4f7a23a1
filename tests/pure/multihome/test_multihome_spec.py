"""Validation and plan normalisation of the multihome declaration: pure functions, no kernel."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.multihome import spec

A = {"name": "a", "interface": "fab0", "ipv4": "198.18.1.11/16", "ipv6": "fd0e:d6ef:7a00:1::b/64", "mtu": 9000,
     "gateway4": "198.18.1.1", "gateway6": "fd0e:d6ef:7a00:1::1", "switch": "tor-r1-a"}
B = {"name": "b", "interface": "fab1", "ipv4": "198.19.1.11/16", "ipv6": "fd0e:d6ef:7b00:1::b/64"}
LINKS = {"lo": {"mtu": 65536, "min_mtu": 0, "max_mtu": 0},
         "fab0": {"mtu": 1500, "min_mtu": 68, "max_mtu": 9216},
         "fab1": {"mtu": 1500, "min_mtu": 68, "max_mtu": 65535}}


def planes(*changes):
    """[A, B] with changes applied: (index, key, value); value None deletes the key."""
    out = [copy.deepcopy(A), copy.deepcopy(B)]
    for index, key, value in changes:
        if value is None:
            out[index].pop(key, None)
        else:
            out[index][key] = value
    return out


def test_the_model_declaration_becomes_the_documented_plan():
    plan = spec.build_plan(spec.normalize_planes(planes(), LINKS))
    assert plan == {
        "interfaces": [
            {
                "name": "fab0", "kind": "ethernet", "mtu": 9000,
                "addresses": ["198.18.1.11/16", "fd0e:d6ef:7a00:1::b/64"],
                "accept_ra": False,
                "routes": [
                    {"dst": "198.18.0.0/16", "table": 60901, "scope": "link"},
                    {"dst": "fd0e:d6ef:7a00:1::/64", "table": 60901, "scope": "link"},
                    {"dst": "0.0.0.0/0", "gateway": "198.18.1.1", "table": 60901},
                    {"dst": "::/0", "gateway": "fd0e:d6ef:7a00:1::1", "table": 60901},
                ],
                "rules": [
                    {"family": 4, "from": "198.18.1.11/32", "table": 60901, "priority": 32700},
                    {"family": 6, "from": "fd0e:d6ef:7a00:1::b/128", "table": 60901, "priority": 32700},
                ],
                "bond": None, "master": None,
            },
            {
                "name": "fab1", "kind": "ethernet", "mtu": None,
                "addresses": ["198.19.1.11/16", "fd0e:d6ef:7b00:1::b/64"],
                "accept_ra": False,
                "routes": [
                    {"dst": "198.19.0.0/16", "table": 60902, "scope": "link"},
                    {"dst": "fd0e:d6ef:7b00:1::/64", "table": 60902, "scope": "link"},
                ],
                "rules": [
                    {"family": 4, "from": "198.19.1.11/32", "table": 60902, "priority": 32701},
                    {"family": 6, "from": "fd0e:d6ef:7b00:1::b/128", "table": 60902, "priority": 32701},
                ],
                "bond": None, "master": None,
            },
        ],
        "sysctls": {
            "net.ipv4.conf.fab0.rp_filter": "2", "net.ipv4.conf.fab0.arp_ignore": "1",
            "net.ipv4.conf.fab0.arp_announce": "2", "net.ipv4.conf.fab0.ignore_routes_with_linkdown": "1",
            "net.ipv6.conf.fab0.ignore_routes_with_linkdown": "1", "net.ipv6.conf.fab0.accept_ra": "0",
            "net.ipv4.conf.fab1.rp_filter": "2", "net.ipv4.conf.fab1.arp_ignore": "1",
            "net.ipv4.conf.fab1.arp_announce": "2", "net.ipv4.conf.fab1.ignore_routes_with_linkdown": "1",
            "net.ipv6.conf.fab1.ignore_routes_with_linkdown": "1", "net.ipv6.conf.fab1.accept_ra": "0",
        },
    }


def test_addresses_are_normalised_and_families_optional():
    p = spec.normalize_planes([{"name": "a", "interface": "fab0", "ipv6": "FD0E:D6EF:7A00:0001:0000::B/64", "accept_ra": "yes"},
                               {"name": "b", "interface": "fab1", "ipv4": "198.19.1.11/24", "mtu": "1500"}])
    plan = spec.build_plan(p, table_base=100, priority_base=1000, sysctls=False)
    fab0, fab1 = plan["interfaces"]
    assert fab0["addresses"] == ["fd0e:d6ef:7a00:1::b/64"] and fab0["accept_ra"] is True
    assert [r["family"] for r in fab0["rules"]] == [6] and fab0["rules"][0]["table"] == 100
    assert fab1["addresses"] == ["198.19.1.11/24"] and fab1["mtu"] == 1500
    assert fab1["routes"] == [{"dst": "198.19.1.0/24", "table": 101, "scope": "link"}]
    assert fab1["rules"] == [{"family": 4, "from": "198.19.1.11/32", "table": 101, "priority": 1001}]
    assert plan["sysctls"] == {}


def test_accept_ra_and_dotted_interface_names_in_sysctls():
    p = spec.normalize_planes([{"name": "a", "interface": "fab0.100", "ipv4": "198.18.1.11/16", "accept_ra": True}])
    sysctls = spec.build_plan(p)["sysctls"]
    assert sysctls["net.ipv6.conf.fab0/100.accept_ra"] == "1"
    assert spec.sysctl_path("net.ipv4.conf.fab0/100.rp_filter") == "/proc/sys/net/ipv4/conf/fab0.100/rp_filter"


def test_link_local_ipv6_gateway_is_on_link():
    p = spec.normalize_planes(planes((0, "gateway6", "fe80::1")), LINKS)
    assert {"dst": "::/0", "gateway": "fe80::1", "table": 60901} in spec.build_plan(p)["interfaces"][0]["routes"]


@pytest.mark.parametrize("declared, message", [
    ([], "planes: at least one plane is required"),
    ("fab0", "planes: at least one plane is required"),
    (["fab0"], "planes[0]: expected a dict"),
    (planes((1, "name", "a")), "planes[1].name: plane 'a' is already declared at planes[0]"),
    (planes((1, "name", None)), "planes[1].name: a plane name is required"),
    (planes((1, "interface", "fab0")), "planes[1].interface: 'fab0' already carries plane 'a' (planes[0])"),
    (planes((1, "interface", None)), "planes[1].interface: an interface name is required"),
    (planes((1, "interface", "a-very-long-interface")), "planes[1].interface: 'a-very-long-interface' is not a valid interface name"),
    (planes((0, "interface", "x")), "planes[0].interface: no interface 'x' on this host (it has: fab0, fab1, lo)"),
    (planes((1, "ipv4", "198.18.200.12/16")), "planes[1].ipv4: 198.18.0.0/16 overlaps planes[0].ipv4 198.18.0.0/16"),
    (planes((1, "ipv6", "fd0e:d6ef:7a00:1::c/56")), "planes[1].ipv6: fd0e:d6ef:7a00::/56 overlaps planes[0].ipv6 fd0e:d6ef:7a00:1::/64"),
    (planes((1, "ipv4", "198.19.1.300/16")), "planes[1].ipv4: '198.19.1.300/16' is not an address with prefix length"),
    (planes((1, "ipv4", "198.19.1.11")), "planes[1].ipv4: '198.19.1.11' needs a prefix length"),
    (planes((1, "ipv4", "fd0e::1/64")), "planes[1].ipv4: fd0e::1/64 is not an IPv4 address"),
    (planes((1, "ipv6", "198.19.1.11/16")), "planes[1].ipv6: 198.19.1.11/16 is not an IPv6 address"),
    (planes((1, "ipv4", "198.19.0.0/16")), "planes[1].ipv4: 198.19.0.0 is the network address of 198.19.0.0/16"),
    (planes((1, "ipv4", "198.19.255.255/16")), "planes[1].ipv4: 198.19.255.255 is the broadcast address"),
    (planes((1, "ipv4", "198.19.1.11/0")), "planes[1].ipv4: 198.19.1.11/0: a /0 prefix is not a subnet"),
    (planes((1, "ipv4", "127.0.0.2/8")), "planes[1].ipv4: 127.0.0.2 is not a unicast host address"),
    (planes((1, "ipv6", "fe80::b/64")), "planes[1].ipv6: fe80::b is link-local"),
    (planes((1, "ipv6", "ff02::b/64")), "planes[1].ipv6: ff02::b is not a unicast host address"),
    (planes((1, "ipv4", None), (1, "ipv6", None)), "planes[1]: plane 'b' declares no address: give ipv4, ipv6 or both"),
    (planes((0, "gateway4", "198.20.0.1")), "planes[0].gateway4: 198.20.0.1 is outside the plane's prefix 198.18.0.0/16 (planes[0].ipv4)"),
    (planes((0, "gateway6", "fd0e:d6ef:7b00::1")), "planes[0].gateway6: fd0e:d6ef:7b00::1 is outside the plane's prefix"),
    (planes((0, "gateway4", "198.18.1.11")), "planes[0].gateway4: 198.18.1.11 is this host's own address (planes[0].ipv4)"),
    (planes((0, "gateway4", "198.18.255.255")), "planes[0].gateway4: 198.18.255.255 is the network or broadcast address"),
    (planes((0, "gateway4", "198.18.1.1/16")), "planes[0].gateway4: '198.18.1.1/16' is not an IP address (no prefix length)"),
    (planes((0, "gateway4", "fd0e:d6ef:7a00:1::1")), "planes[0].gateway4: fd0e:d6ef:7a00:1::1 is not an IPv4 address"),
    (planes((1, "gateway4", "198.19.1.1"), (1, "ipv4", None)), "planes[1].gateway4: a gateway needs the plane's address of that family (planes[1].ipv4)"),
    (planes((0, "mtu", 67)), "planes[0].mtu: 67 is out of range (68..65535)"),
    (planes((0, "mtu", 65536)), "planes[0].mtu: 65536 is out of range (68..65535)"),
    (planes((0, "mtu", "jumbo")), "planes[0].mtu: 'jumbo' is not an integer"),
    (planes((0, "mtu", 1000)), "planes[0].mtu: 1000 is below 1280, the IPv6 minimum"),
    (planes((0, "mtu", 9500)), "planes[0].mtu: 9500 is outside what fab0 supports (68..9216)"),
    (planes((0, "accept_ra", "maybe")), "planes[0].accept_ra: 'maybe' is not a boolean"),
])
def test_bad_declarations_name_the_option(declared, message):
    with pytest.raises(spec.OptionError) as err:
        spec.normalize_planes(declared, LINKS)
    assert message in str(err.value)


def test_mtu_below_1280_is_fine_without_ipv6():
    p = spec.normalize_planes(planes((1, "ipv6", None), (1, "mtu", 1000)), LINKS)
    assert p[1]["mtu"] == 1000


@pytest.mark.parametrize("table_base, priority_base, message", [
    (0, 32700, "table_base: 0 is out of range"),
    (253, 32700, "table_base: the plane tables 253..254 would include table 253 (default)"),
    (60918, 32700, "table_base: the plane tables 60918..60919 would include table 60919 (the agent's backup routes)"),
    (0xFFFFFFFF, 32700, "table_base: 2 planes need tables 4294967295..4294967296"),
    (60901, 0, "rule_priority_base: 0 is out of range (1..32765)"),
    (60901, 32765, "rule_priority_base: 2 planes need rule priorities 32765..32766; they must lie within 32692..32765"),
    (60901, 32690, "rule_priority_base: 2 planes need rule priorities 32690..32691; they must lie within 32692..32765"),
    ("x", 32700, "table_base: 'x' is not an integer"),
])
def test_bad_numbers_name_the_option(table_base, priority_base, message):
    with pytest.raises(spec.OptionError) as err:
        spec.check_numbers(table_base, priority_base, 2)
    assert message in str(err.value)


def test_default_numbers():
    assert spec.check_numbers(None, None, 4) == (60901, 32700)
