"""Failover address allocation of routed planes: pure functions, no kernel."""

from __future__ import annotations

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils import failover_addresses as fa
from ansible_collections.edgeft.failover.plugins.module_utils.failover_addresses import (
    FailoverAddressError,
    allocate,
    plan,
)

V4 = "198.19.255.0/24"
V6 = "fd0e:d6ef:7b00:ff::/64"
HOSTS = ["r2h1", "r1h2", "r1h1", "r2h2"]


def test_hosts_sorted_by_name_take_addresses_in_order_from_network_plus_one():
    assert allocate(V4, HOSTS) == {"r1h1": "198.19.255.1", "r1h2": "198.19.255.2",
                                   "r2h1": "198.19.255.3", "r2h2": "198.19.255.4"}


def test_allocation_does_not_depend_on_input_order_or_repeats():
    assert allocate(V4, HOSTS) == allocate(V4, sorted(HOSTS, reverse=True)) == allocate(V4, HOSTS + ["r1h1"])


def test_ipv6_skips_the_subnet_router_anycast_address():
    assert allocate(V6, ["b", "a"]) == {"a": "fd0e:d6ef:7b00:ff::1", "b": "fd0e:d6ef:7b00:ff::2"}


def test_given_addresses_are_kept_and_skipped_by_the_others():
    got = allocate(V4, HOSTS, given={"r2h1": "198.19.255.1", "r1h1": "198.19.254.7"})
    assert got == {"r1h1": "198.19.254.7", "r1h2": "198.19.255.2", "r2h1": "198.19.255.1", "r2h2": "198.19.255.3"}


def test_given_address_of_a_host_not_listed_is_still_skipped_but_not_returned():
    assert allocate(V4, ["a"], given={"other": "198.19.255.1"}) == {"a": "198.19.255.2"}


def test_slash_30_has_two_usable_addresses():
    assert allocate("198.19.255.0/30", ["a", "b"]) == {"a": "198.19.255.1", "b": "198.19.255.2"}
    with pytest.raises(FailoverAddressError, match=r"^pfx: 198.19.255.0/30 has 2 usable addresses .* 3 hosts"):
        allocate("198.19.255.0/30", ["a", "b", "c"], option="pfx")


def test_given_addresses_inside_the_prefix_count_against_it():
    with pytest.raises(FailoverAddressError, match="2 usable addresses \\(1 of them given in inventory\\) but 2 hosts"):
        allocate("198.19.255.0/30", ["a", "b", "c"], given={"c": "198.19.255.2"})


def test_slash_31_and_slash_32_hand_out_every_address():
    assert allocate("198.19.255.0/31", ["a", "b"]) == {"a": "198.19.255.0", "b": "198.19.255.1"}
    assert allocate("198.19.255.7/32", ["a"]) == {"a": "198.19.255.7"}
    with pytest.raises(FailoverAddressError, match="1 usable addresses"):
        allocate("198.19.255.7/32", ["a", "b"])


def test_host_bits_are_refused_with_the_network_to_write():
    with pytest.raises(FailoverAddressError, match=r"^edgeft_x: 198.19.255.1/24 has host bits set; write the network, 198.19.255.0/24"):
        allocate("198.19.255.1/24", ["a"], option="edgeft_x")


@pytest.mark.parametrize("prefix", ["nonsense", "198.19.255.0/33", 42])
def test_a_prefix_that_is_no_network_is_refused(prefix):
    with pytest.raises(FailoverAddressError, match="^failover prefix: "):
        allocate(prefix, ["a"])


def test_a_prefix_overlapping_a_native_subnet_is_refused():
    with pytest.raises(FailoverAddressError, match="overlaps the native subnet 198.19.1.0/24; pick a prefix outside"):
        allocate("198.19.0.0/16", ["a"], native=["198.19.1.11/24", "fd0e:d6ef:7b00:1::b/64"])
    # networks count as well, other families are not compared
    with pytest.raises(FailoverAddressError, match="overlaps"):
        allocate(V6, ["a"], native=["fd0e:d6ef:7b00::/56"])
    assert allocate(V4, ["a"], native=["198.19.1.11/24", "fd0e:d6ef:7b00:1::b/64"]) == {"a": "198.19.255.1"}


def test_given_addresses_are_checked():
    with pytest.raises(FailoverAddressError, match="'a'.*is an IPv6 address; give an IPv4 address"):
        allocate(V4, ["a"], given={"a": "fd0e::1"})
    with pytest.raises(FailoverAddressError, match="without a prefix length"):
        allocate(V4, ["a"], given={"a": "198.19.255.9/32"})
    with pytest.raises(FailoverAddressError, match="lies in the native subnet 198.19.1.0/24"):
        allocate(V4, ["a"], given={"a": "198.19.1.99"}, native=["198.19.1.11/24"])
    with pytest.raises(FailoverAddressError, match="also given for host 'a'"):
        allocate(V4, ["a", "b"], given={"a": "198.19.255.9", "b": "198.19.255.9"})


# ------------------------------------------------------------------ plan
def planes(host_number, **failover):
    a = {"name": "a", "interface": "fab0", "ipv4": "198.18.%d.11/24" % host_number,
         "ipv6": "fd0e:d6ef:7a00:%d::b/64" % host_number}
    b = {"name": "b", "interface": "fab1", "ipv4": "198.19.%d.11/24" % host_number,
         "ipv6": "fd0e:d6ef:7b00:%d::b/64" % host_number}
    b.update(failover)
    return [a, b]


PREFIXES = {"a": {"ipv4": "198.18.255.0/24", "ipv6": "fd0e:d6ef:7a00:ff::/64"}, "b": {"ipv4": V4}}


def test_plan_gives_every_host_plane_and_family_with_a_prefix_its_address():
    got = plan({"h2": planes(2), "h1": planes(1)}, PREFIXES)
    assert got == {
        "h1": {"a": {"ipv4": "198.18.255.1", "ipv6": "fd0e:d6ef:7a00:ff::1"}, "b": {"ipv4": "198.19.255.1"}},
        "h2": {"a": {"ipv4": "198.18.255.2", "ipv6": "fd0e:d6ef:7a00:ff::2"}, "b": {"ipv4": "198.19.255.2"}},
    }


def test_plan_keeps_given_addresses_even_without_a_prefix():
    got = plan({"h1": planes(1, failover6="fd0e:d6ef:7b00:fe::9"), "h2": planes(2)}, PREFIXES)
    assert got["h1"]["b"] == {"ipv4": "198.19.255.1", "ipv6": "fd0e:d6ef:7b00:fe::9"}
    assert got["h2"]["b"] == {"ipv4": "198.19.255.2"}
    assert plan({"h1": planes(1)}, {}) == {}


def test_plan_checks_prefixes_against_every_hosts_native_subnets():
    with pytest.raises(FailoverAddressError, match=r"^edgeft_failover_prefixes.b.ipv4: 198.19.2.0/24 overlaps the native subnet"):
        plan({"h1": planes(1), "h2": planes(2)}, {"b": {"ipv4": "198.19.2.0/24"}})
    with pytest.raises(FailoverAddressError, match="native subnet of another plane"):
        plan({"h1": planes(1)}, {"b": {"ipv4": "198.18.1.0/25"}})


def test_plan_refuses_unknown_planes_and_bad_types():
    with pytest.raises(FailoverAddressError, match="edgeft_failover_prefixes.c: no host has a plane named 'c'"):
        plan({"h1": planes(1)}, {"c": {"ipv4": V4}})
    with pytest.raises(FailoverAddressError, match="^edgeft_failover_prefixes: expected a mapping"):
        plan({"h1": planes(1)}, ["198.19.255.0/24"])
    with pytest.raises(FailoverAddressError, match=r"^edgeft_failover_prefixes.b: unknown key\(s\) ipv5"):
        plan({"h1": planes(1)}, {"b": {"ipv5": V4}})
    with pytest.raises(FailoverAddressError, match=r"^edgeft_failover_prefixes.b.ipv4: 24 is not a CIDR string"):
        plan({"h1": planes(1)}, {"b": {"ipv4": 24}})
    # Each host's planes go through the plane model (host/planes.py): its messages, after the host.
    with pytest.raises(FailoverAddressError, match=r"^host h1: edgeft_planes\[1\].failover4: 7 is not an IP address"):
        plan({"h1": planes(1, failover4=7)}, {})
    with pytest.raises(FailoverAddressError, match=r"^host h1: edgeft_planes\[0\]: expected a dict with name, interface"):
        plan({"h1": ["a"]}, {})


def test_plan_names_the_plane_entry_of_a_bad_given_address():
    with pytest.raises(FailoverAddressError, match=r"^host h2: edgeft_planes\[1\].failover4: 198.19.255.1 is also given for host 'h1'"):
        plan({"h1": planes(1, failover4="198.19.255.1"), "h2": planes(2, failover4="198.19.255.1")}, PREFIXES)
    with pytest.raises(FailoverAddressError, match=r"^host h1: edgeft_planes\[1\].failover4: .* native subnet 198.18.1.0/24"):
        plan({"h1": planes(1, failover4="198.18.1.200")}, {})


def test_plan_refuses_overlapping_failover_prefixes_of_two_planes():
    with pytest.raises(FailoverAddressError, match="overlaps the failover prefix"):
        plan({"h1": planes(1)}, {"a": {"ipv4": "198.17.0.0/24"}, "b": {"ipv4": "198.17.0.0/25"}})


# ---------------------------------------------------------------- the peer table's view of the fabric
L2_FABRIC = {
    "r1h1": [{"name": "a", "interface": "fab0", "ipv4": "198.18.1.11/16", "ipv6": "fd0e::11/64", "switch": "tor-r1-a"},
             {"name": "b", "interface": "fab1", "ipv4": "198.19.1.11/16"}],
    "r1h2": [{"name": "a", "interface": "fab0", "ipv4": "198.18.1.12/16"},
             {"name": "b", "interface": "fab1", "ipv4": "198.19.1.12/16", "accept_ra": "maybe"}],
    "bond-only": [],
}


def test_peer_entries_of_an_l2_fabric_carry_names_and_native_addresses_only():
    assert fa.peer_entries(L2_FABRIC, L2_FABRIC, {}) == ({
        "r1h1": [{"name": "a", "ipv4": "198.18.1.11/16", "ipv6": "fd0e::11/64", "failover4": None, "failover6": None},
                 {"name": "b", "ipv4": "198.19.1.11/16", "failover4": None, "failover6": None}],
        "r1h2": [{"name": "a", "ipv4": "198.18.1.12/16", "failover4": None, "failover6": None},
                 {"name": "b", "ipv4": "198.19.1.12/16", "failover4": None, "failover6": None}],
    }, "")


def test_an_l2_fabric_does_not_validate_one_hosts_planes_for_every_other_host():
    # r1h2's accept_ra is refused by r1h2's own validation; the others' tables still build.
    assert not fa.routed(L2_FABRIC, {})
    assert set(fa.peer_entries(L2_FABRIC, L2_FABRIC, {})[0]) == {"r1h1", "r1h2"}


def test_peer_entries_of_a_routed_fabric_carry_the_allocated_failover_addresses():
    planes = {host: [{"name": p["name"], "interface": p["interface"], "ipv4": p["ipv4"]} for p in entries]
              for host, entries in L2_FABRIC.items()}
    prefixes = {"a": {"ipv4": "198.20.0.0/24"}}
    table, error = fa.peer_entries(planes, planes, prefixes)
    assert error == ""
    allocated = fa.plan({host: entries for host, entries in planes.items() if entries}, prefixes)
    assert fa.routed(planes, prefixes)
    for host in ("r1h1", "r1h2"):
        assert table[host][0]["failover4"] == allocated[host]["a"]["ipv4"]
        assert table[host][1]["failover4"] is None


def test_a_failover_address_given_in_a_plane_entry_makes_the_fabric_routed():
    planes = {"r1h1": [{"name": "a", "interface": "fab0", "ipv4": "198.18.1.11/16", "failover4": "198.20.0.9"}]}
    assert fa.routed(planes, {})
    assert fa.peer_entries(planes, planes, {})[0]["r1h1"][0]["failover4"] == "198.20.0.9"


def test_a_fabric_whose_allocation_fails_keeps_its_entries_and_says_why():
    planes = {"r1h1": [{"name": "a", "interface": "fab0", "ipv4": "198.18.1.11/16"}],
              "r1h2": [{"name": "a", "interface": "fab0", "ipv4": "198.18.1.12/16", "failover4": "198.18.9.9"}]}
    table, error = fa.peer_entries(planes, planes, {})
    assert "198.18.9.9" in error and "r1h2" in error
    assert table["r1h1"] == [{"name": "a", "ipv4": "198.18.1.11/16", "failover4": None, "failover6": None}]
