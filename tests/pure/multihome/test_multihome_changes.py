"""The multihome diff: plan + live state + record -> ordered steps, record, views. Pure data, no kernel."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.multihome import changes, spec
from ansible_collections.edgeft.failover.plugins.module_utils.multihome import record as rec

A = {"name": "a", "interface": "fab0", "ipv4": "198.18.1.11/16", "ipv6": "fd0e:d6ef:7a00:1::b/56"}
B = {"name": "b", "interface": "fab1", "ipv4": "198.19.1.11/16", "ipv6": "fd0e:d6ef:7b00:1::b/56"}
NICS = ("fab0", "fab1")


def plan_of(*planes, **kw):
    return spec.build_plan(spec.normalize_planes(list(planes)), **kw)


def fresh_live(addresses=None):
    """A lab host before edgeft: the plane addresses are there, nothing else."""
    values = {}
    for nic in NICS:
        for key in spec.nic_sysctls(nic):
            values[key] = "0"
    values[changes.ARP_IGNORE_ALL] = "0"
    return {
        "links": {"lo": {"mtu": 65536, "up": True}, "fab0": {"mtu": 1500, "up": True}, "fab1": {"mtu": 1500, "up": True}},
        "addresses": copy.deepcopy(addresses if addresses is not None else
                                   {"fab0": [A["ipv4"], A["ipv6"]], "fab1": [B["ipv4"], B["ipv6"]]}),
        "routes": [],
        "rules": [],
        "sysctls": values,
    }


def ops(ch):
    return [s["op"] for s in ch.steps]


def converge(plan, live, record):
    """compute, then what the host and record look like after the steps."""
    ch = changes.compute(plan, live, record)
    return ch, changes.simulate(live, ch.steps), ch.record


def test_fresh_host_adopts_addresses_and_adds_tables_rules_sysctls_in_order():
    plan = plan_of(A, B)
    ch = changes.compute(plan, fresh_live(), rec.empty())
    added, removed, sysctls, links = ch.summary()
    assert added["addresses"] == []  # already there: adopted
    assert added["routes"] == ["198.18.0.0/16 dev fab0 table 60901 scope link", "fd0e:d6ef:7a00::/56 dev fab0 table 60901",
                               "198.19.0.0/16 dev fab1 table 60902 scope link", "fd0e:d6ef:7b00::/56 dev fab1 table 60902"]
    assert added["rules"] == ["32700: from 198.18.1.11/32 lookup 60901", "32700: from fd0e:d6ef:7a00:1::b/128 lookup 60901",
                              "32701: from 198.19.1.11/32 lookup 60902", "32701: from fd0e:d6ef:7b00:1::b/128 lookup 60902"]
    assert removed == {"addresses": [], "routes": [], "rules": []} and links == {}
    # accept_ra is already 0: nothing to write, nothing recorded.
    assert sorted(sysctls) == sorted(k for k, v in plan["sysctls"].items() if v != "0")
    assert ops(ch) == ["sysctl"] * 10 + ["route_add"] * 4 + ["rule_add"] * 4
    assert ch.record["interfaces"]["fab0"]["addresses"] == [A["ipv4"], A["ipv6"]]
    assert ch.record["sysctls"] == {k: "0" for k in sysctls}
    assert len(ch.record["routes"]) == 4 and len(ch.record["rules"]) == 4
    assert ch.before["fab0"]["routes"] == [] and ch.after["fab0"]["routes"] == sorted(added["routes"][:2])
    assert ch.after["fab1"]["sysctls"]["net.ipv4.conf.fab1.rp_filter"] == "2"


def test_converged_host_needs_nothing():
    plan = plan_of(A, B)
    ch, live, record = converge(plan, fresh_live(), rec.empty())
    again = changes.compute(plan, live, record)
    assert again.steps == [] and not again.changed
    assert again.record == record
    assert again.before == again.after


def test_missing_addresses_are_added_and_unmanaged_ones_left_alone():
    live = fresh_live({"fab0": ["203.0.113.5/24"], "fab1": []})
    ch = changes.compute(plan_of(A, B), live, rec.empty())
    added, removed, _s, _l = ch.summary()
    assert added["addresses"] == ["198.18.1.11/16 dev fab0", "fd0e:d6ef:7a00:1::b/56 dev fab0",
                                  "198.19.1.11/16 dev fab1", "fd0e:d6ef:7b00:1::b/56 dev fab1"]
    assert removed["addresses"] == []
    assert ch.after["fab0"]["addresses"] == ["198.18.1.11/16", "203.0.113.5/24", "fd0e:d6ef:7a00:1::b/56"]
    assert "203.0.113.5/24" not in ch.record["interfaces"]["fab0"]["addresses"]


def test_a_recorded_address_no_longer_declared_goes_with_its_route_and_rule_only():
    plan = plan_of(A, B)
    _ch, live, record = converge(plan, fresh_live(), rec.empty())
    ch = changes.compute(plan_of(A, dict(B, ipv6=None)), live, record)
    added, removed, sysctls, links = ch.summary()
    assert added == {"addresses": [], "routes": [], "rules": []} and sysctls == {} and links == {}
    assert removed == {"addresses": ["fd0e:d6ef:7b00:1::b/56 dev fab1"], "routes": ["fd0e:d6ef:7b00::/56 dev fab1 table 60902"],
                       "rules": ["32701: from fd0e:d6ef:7b00:1::b/128 lookup 60902"]}
    assert ops(ch) == ["rule_del", "route_del", "addr_del"]  # removals last, the address after what uses it
    assert ch.record["interfaces"]["fab1"]["addresses"] == [B["ipv4"]]


def test_unrecorded_undeclared_things_are_never_removed():
    live = fresh_live()
    live["addresses"]["fab1"].append("198.51.100.7/24")
    live["routes"].append({"family": 4, "table": 60902, "dst": "192.0.2.0/24", "gateway": None, "dev": "fab1",
                           "scope": "link", "metric": 0, "proto": 4})
    live["rules"].append({"family": 4, "from": "198.51.100.7/32", "table": 60902, "priority": 32701, "proto": 0})
    ch = changes.compute(plan_of(A, B), live, rec.empty())
    _a, removed, _s, _l = ch.summary()
    assert removed == {"addresses": [], "routes": [], "rules": []}
    assert "192.0.2.0/24 dev fab1 table 60902 scope link" in ch.after["fab1"]["routes"]
    assert "32701: from 198.51.100.7/32 lookup 60902" in ch.after["fab1"]["rules"]


def test_declared_ip_with_another_prefix_on_the_nic_is_replaced_first():
    live = fresh_live({"fab0": ["198.18.1.11/24", "fd0e:d6ef:7a00:1::b/64"], "fab1": [B["ipv4"], B["ipv6"]]})
    ch = changes.compute(plan_of(A, B), live, rec.empty())
    steps = [(s["op"], s.get("cidr")) for s in ch.steps if s["op"].startswith("addr")]
    assert steps == [("addr_del", "198.18.1.11/24"), ("addr_del", "fd0e:d6ef:7a00:1::b/64"),
                     ("addr_add", "198.18.1.11/16"), ("addr_add", "fd0e:d6ef:7a00:1::b/56")]


def test_declared_address_on_an_unmanaged_nic_is_refused():
    live = fresh_live({"fab0": [A["ipv6"]], "fab1": [B["ipv4"], B["ipv6"]], "eth9": ["198.18.1.11/32"]})
    live["links"]["eth9"] = {"mtu": 1500, "up": True}
    with pytest.raises(spec.OptionError) as err:
        changes.compute(plan_of(A, B), live, rec.empty(), {("fab0", "198.18.1.11/16"): "planes[0].ipv4"})
    assert "planes[0].ipv4: 198.18.1.11 is already on interface eth9, which edgeft does not manage" in str(err.value)


def test_plane_moved_to_another_nic_moves_everything():
    live = fresh_live({"fab0": [], "fab1": []})
    live["links"]["fab2"] = {"mtu": 1500, "up": True}
    for key in spec.nic_sysctls("fab2"):
        live["sysctls"][key] = "0"
    _ch, live, record = converge(plan_of(A, B), live, rec.empty())
    ch = changes.compute(plan_of(A, dict(B, interface="fab2")), live, record)
    added, removed, sysctls, _l = ch.summary()
    # The old NIC's addresses and routes are in the way of the new ones (same IPs, same table slots): they go first.
    assert ops(ch)[:13] == ["sysctl"] * 5 + ["addr_del"] * 2 + ["route_del"] * 2 + ["addr_add"] * 2 + ["route_add"] * 2
    assert "rule_add" not in ops(ch) and "rule_del" not in ops(ch)  # same source, table and priority: kept
    assert {r["dev"] for r in ch.record["rules"] if r["table"] == 60902} == {"fab2"}
    assert added["addresses"] == ["198.19.1.11/16 dev fab2", "fd0e:d6ef:7b00:1::b/56 dev fab2"]
    assert removed["addresses"] == ["198.19.1.11/16 dev fab1", "fd0e:d6ef:7b00:1::b/56 dev fab1"]
    assert removed["routes"] == ["198.19.0.0/16 dev fab1 table 60902 scope link", "fd0e:d6ef:7b00::/56 dev fab1 table 60902"]
    assert {k for k, v in sysctls.items() if v["after"] == "0"} == {k for k in spec.nic_sysctls("fab1") if "accept_ra" not in k}
    assert "fab1" not in ch.record["interfaces"]
    assert not [k for k in ch.record["sysctls"] if ".fab1." in k]


def test_a_foreign_route_in_the_slot_of_a_declared_one_is_replaced():
    live = fresh_live()
    stale = {"family": 4, "table": 60901, "dst": "0.0.0.0/0", "gateway": "198.18.1.254", "dev": "fab0", "scope": None,
             "metric": 0, "proto": 4}
    live["routes"].append(stale)
    ch = changes.compute(plan_of(dict(A, gateway4="198.18.1.1"), B), live, rec.empty())
    route_steps = [(s["op"], s["route"].get("gateway")) for s in ch.steps if s["op"].startswith("route") and s["route"]["dst"] == "0.0.0.0/0"]
    assert route_steps == [("route_del", "198.18.1.254"), ("route_add", "198.18.1.1")]
    assert ops(ch).index("route_del") < ops(ch).index("route_add")


def test_sysctl_old_values_are_recorded_once_and_restored_when_no_longer_managed():
    plan = plan_of(A, B)
    _ch, live, record = converge(plan, fresh_live(), rec.empty())
    live["sysctls"]["net.ipv4.conf.fab0.rp_filter"] = "1"  # someone changed it since
    ch = changes.compute(plan, live, record)
    assert ch.summary()[2] == {"net.ipv4.conf.fab0.rp_filter": {"before": "1", "after": "2"}}
    assert ch.record["sysctls"]["net.ipv4.conf.fab0.rp_filter"] == "0"  # the value before edgeft, not "1"
    live = changes.simulate(live, ch.steps)
    off = changes.compute(plan_of(A, B, sysctls=False), live, ch.record)
    assert {k: v["after"] for k, v in off.summary()[2].items()} == record["sysctls"]
    assert off.record["sysctls"] == {}
    assert ops(off) == ["sysctl"] * len(record["sysctls"])


def test_mtu_and_link_state_are_recorded_and_put_back():
    live = fresh_live()
    live["links"]["fab0"] = {"mtu": 1500, "up": False}
    ch, live, record = converge(plan_of(dict(A, mtu=9000), B), live, rec.empty())
    assert ch.summary()[3] == {"fab0": {"mtu": {"before": 1500, "after": 9000}, "up": {"before": False, "after": True}}}
    assert record["interfaces"]["fab0"]["mtu_before"] == 1500 and record["interfaces"]["fab0"]["down_before"] is True
    assert ops(ch).index("link") > ops(ch).index("mtu") > max(i for i, op in enumerate(ops(ch)) if op == "sysctl")
    # MTU no longer declared: back to 1500; the NIC stays up while it is a plane NIC.
    ch2, live, record = converge(plan_of(A, B), live, record)
    assert ch2.summary()[3] == {"fab0": {"mtu": {"before": 9000, "after": 1500}}}
    assert record["interfaces"]["fab0"]["mtu_before"] is None and record["interfaces"]["fab0"]["down_before"] is True
    absent = changes.compute(spec.empty_plan(), live, record)
    assert absent.summary()[3] == {"fab0": {"up": {"before": True, "after": False}}}
    assert ops(absent) == ["rule_del"] * 4 + ["route_del"] * 4 + ["addr_del"] * 4 + ["link"] + ["sysctl"] * 10


def test_absent_undoes_exactly_the_record():
    plan = plan_of(A, B)
    _ch, live, record = converge(plan, fresh_live(), rec.empty())
    live["addresses"]["fab0"].append("203.0.113.5/24")  # not ours
    ch = changes.compute(spec.empty_plan(), live, record)
    added, removed, sysctls, _l = ch.summary()
    assert added == {"addresses": [], "routes": [], "rules": []}
    assert sorted(removed["addresses"]) == sorted("%s dev %s" % (a, n) for n, p in (("fab0", A), ("fab1", B)) for a in (p["ipv4"], p["ipv6"]))
    assert len(removed["routes"]) == 4 and len(removed["rules"]) == 4
    assert {k: v["after"] for k, v in sysctls.items()} == record["sysctls"]
    assert rec.is_empty(ch.record)
    after = changes.simulate(live, ch.steps)
    assert after["addresses"]["fab0"] == ["203.0.113.5/24"] and after["routes"] == [] and after["rules"] == []
    assert after["sysctls"] == fresh_live()["sysctls"]


def test_intent_record_owns_old_and_new_together():
    plan = plan_of(A, B)
    _ch, live, record = converge(plan, fresh_live(), rec.empty())
    ch = changes.compute(plan_of(dict(A, ipv4="198.18.1.12/16"), B), live, record)
    intent = ch.intent_record(record)
    assert set(intent["interfaces"]["fab0"]["addresses"]) == {"198.18.1.11/16", "198.18.1.12/16", A["ipv6"]}
    assert {r["from"] for r in intent["rules"]} >= {"198.18.1.11/32", "198.18.1.12/32"}
    assert intent["sysctls"] == record["sysctls"]


def test_missing_sysctl_and_strict_arp_ignore_are_warned_about():
    live = fresh_live()
    live["sysctls"]["net.ipv6.conf.fab1.accept_ra"] = None
    live["sysctls"][changes.ARP_IGNORE_ALL] = "2"
    ch = changes.compute(plan_of(A, B), live, rec.empty())
    assert any("net.ipv6.conf.fab1.accept_ra: not available" in w for w in ch.warnings)
    assert any("net.ipv4.conf.all.arp_ignore is 2" in w for w in ch.warnings)


def test_main_table_routes_in_a_plan_are_not_multihome_s():
    plan = plan_of(A, B)
    plan["interfaces"][0]["routes"].append({"dst": "198.18.2.11/32", "gateway": None, "metric": 100})
    ch = changes.compute(plan, fresh_live(), rec.empty())
    assert all(s["route"]["table"] != 254 and s["route"].get("table") for s in ch.steps if s["op"] == "route_add")
    assert len([s for s in ch.steps if s["op"] == "route_add"]) == 4
