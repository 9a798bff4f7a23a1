"""Failover addresses of routed planes in the multihome declaration and diff: pure data, no kernel."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.multihome import changes, spec
from ansible_collections.edgeft.failover.plugins.module_utils.multihome import record as rec

A = {"name": "a", "interface": "fab0", "ipv4": "198.18.1.11/24", "ipv6": "fd0e:d6ef:7a00:1::b/64",
     "gateway4": "198.18.1.1", "failover4": "198.18.255.1", "failover6": "fd0e:d6ef:7a00:ff::1"}
B = {"name": "b", "interface": "fab1", "ipv4": "198.19.1.11/24", "ipv6": "fd0e:d6ef:7b00:1::b/64",
     "gateway4": "198.19.1.1", "failover4": "198.19.255.1", "failover6": "fd0e:d6ef:7b00:ff::1"}
FAILOVER = {"fab0": ["198.18.255.1/32", "fd0e:d6ef:7a00:ff::1/128"], "fab1": ["198.19.255.1/32", "fd0e:d6ef:7b00:ff::1/128"]}


def declared(*planes):
    normalized = spec.normalize_planes([copy.deepcopy(p) for p in planes])
    return spec.build_plan(normalized), spec.failover_addresses(normalized)


def fresh_live():
    values = {key: "0" for nic in ("fab0", "fab1") for key in spec.nic_sysctls(nic)}
    values[changes.ARP_IGNORE_ALL] = "0"
    return {"links": {"fab0": {"mtu": 1500, "up": True}, "fab1": {"mtu": 1500, "up": True}},
            "addresses": {"fab0": [A["ipv4"], A["ipv6"]], "fab1": [B["ipv4"], B["ipv6"]]},
            "routes": [], "rules": [], "sysctls": values, "failover_ready": set()}


def test_failover_addresses_are_host_routes_beside_the_plan_with_source_rules_in_it():
    plan, failover = declared(A, B)
    assert failover == FAILOVER
    fab1 = plan["interfaces"][1]
    assert fab1["addresses"] == ["198.19.1.11/24", "fd0e:d6ef:7b00:1::b/64"]  # never persisted as plain addresses
    assert fab1["rules"] == [
        {"family": 4, "from": "198.19.1.11/32", "table": 60902, "priority": 32701},
        {"family": 6, "from": "fd0e:d6ef:7b00:1::b/128", "table": 60902, "priority": 32701},
        {"family": 4, "from": "198.19.255.1/32", "table": 60902, "priority": 32701},
        {"family": 6, "from": "fd0e:d6ef:7b00:ff::1/128", "table": 60902, "priority": 32701}]


def test_planes_without_failover_addresses_are_unchanged():
    plain = [{k: v for k, v in p.items() if not k.startswith("failover")} for p in (A, B)]
    plan, failover = declared(*plain)
    assert failover == {} and all(len(i["rules"]) == 2 for i in plan["interfaces"])


@pytest.mark.parametrize("index, key, value, message", [
    (1, "failover4", "198.19.255.1/32", r"planes\[1\].failover4: '198.19.255.1/32' is not an IP address \(give it without a prefix length\)"),
    (1, "failover4", "bogus", r"planes\[1\].failover4: 'bogus' is not an IP address"),
    (1, "failover4", "fd0e:d6ef:7b00:ff::1", r"planes\[1\].failover4: fd0e:d6ef:7b00:ff::1 is not an IPv4 address"),
    (1, "failover6", "198.19.255.1", r"planes\[1\].failover6: 198.19.255.1 is not an IPv6 address"),
    (1, "failover4", "198.19.1.11", r"planes\[1\].failover4: 198.19.1.11 is this host's own address \(planes\[1\].ipv4\)"),
    (1, "failover4", "198.19.1.200", r"planes\[1\].failover4: 198.19.1.200 is inside the native subnet 198.19.1.0/24"),
    (1, "failover4", "198.18.1.77", r"planes\[1\].failover4: .* native subnet 198.18.1.0/24 \(planes\[0\].ipv4\)"),
    (1, "failover6", "fd0e:d6ef:7a00:1::99", r"planes\[1\].failover6: .* native subnet fd0e:d6ef:7a00:1::/64"),
    (1, "failover4", "198.18.255.1", r"planes\[1\].failover4: 198.18.255.1 is also planes\[0\].failover4"),
    (1, "failover6", "fe80::1", r"planes\[1\].failover6: fe80::1 is not a global unicast address"),
    (1, "ipv4", None, r"planes\[1\].failover4: a failover address needs the plane's own address of that family"),
])
def test_bad_failover_addresses_are_refused_naming_the_option(index, key, value, message):
    planes = [copy.deepcopy(A), copy.deepcopy(B)]
    if value is None:
        planes[index].pop(key)
        planes[index].pop("gateway4")
    else:
        planes[index][key] = value
    with pytest.raises(spec.OptionError, match="^" + message):
        spec.normalize_planes(planes)


def test_fresh_host_gets_the_failover_addresses_flagged_with_their_rules_and_records_them():
    plan, failover = declared(A, B)
    ch = changes.compute(plan, fresh_live(), rec.empty(), failover=failover)
    adds = [s for s in ch.steps if s["op"] == "addr_add"]
    assert [(s["dev"], s["cidr"], s.get("failover")) for s in adds] == [
        ("fab0", "198.18.255.1/32", True), ("fab0", "fd0e:d6ef:7a00:ff::1/128", True),
        ("fab1", "198.19.255.1/32", True), ("fab1", "fd0e:d6ef:7b00:ff::1/128", True)]
    added = ch.summary()[0]
    assert "32701: from fd0e:d6ef:7b00:ff::1/128 lookup 60902" in added["rules"]
    assert ch.record["interfaces"]["fab1"]["addresses"] == [B["ipv4"], B["ipv6"], "198.19.255.1/32", "fd0e:d6ef:7b00:ff::1/128"]
    assert "fd0e:d6ef:7b00:ff::1/128" in ch.after["fab1"]["addresses"]
    assert "fd0e:d6ef:7b00:ff::1/128" not in ch.before["fab1"]["addresses"]

    after = changes.simulate(fresh_live(), ch.steps)
    again = changes.compute(plan, after, ch.record, failover=failover)
    assert not again.changed and again.record == ch.record


def test_an_ipv6_failover_address_without_its_flags_is_put_back_with_them():
    plan, failover = declared(A, B)
    ch = changes.compute(plan, fresh_live(), rec.empty(), failover=failover)
    after = changes.simulate(fresh_live(), ch.steps)
    after["failover_ready"].discard(("fab1", "fd0e:d6ef:7b00:ff::1/128"))  # as if added by hand, preferred
    fix = changes.compute(plan, after, ch.record, failover=failover)
    assert [(s["op"], s["cidr"], s.get("failover")) for s in fix.steps] == [
        ("addr_del", "fd0e:d6ef:7b00:ff::1/128", None), ("addr_add", "fd0e:d6ef:7b00:ff::1/128", True)]
    # without flag information (an older reader), presence is enough
    del after["failover_ready"]
    assert not changes.compute(plan, after, ch.record, failover=failover).changed


def test_dropped_failover_addresses_and_their_rules_are_removed():
    plan, failover = declared(A, B)
    ch = changes.compute(plan, fresh_live(), rec.empty(), failover=failover)
    after = changes.simulate(fresh_live(), ch.steps)
    plain = [{k: v for k, v in p.items() if not k.startswith("failover")} for p in (A, B)]
    plan2, failover2 = declared(*plain)
    drop = changes.compute(plan2, after, ch.record, failover=failover2)
    _added, removed, _s, _l = drop.summary()
    assert sorted(removed["addresses"]) == sorted("%s dev %s" % (c, nic) for nic, cidrs in FAILOVER.items() for c in cidrs)
    assert len(removed["rules"]) == 4 and all("255" in r or "ff::" in r for r in removed["rules"])

    gone = changes.compute(spec.empty_plan(), after, ch.record)
    assert {"198.19.255.1/32 dev fab1", "fd0e:d6ef:7b00:ff::1/128 dev fab1"} <= set(gone.summary()[1]["addresses"])
