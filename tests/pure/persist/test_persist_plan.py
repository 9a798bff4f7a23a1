"""The network plan's checks and normalisation, and what each renderer cannot express of it."""

from __future__ import annotations

import copy

import pytest

import persist_render as rendering

from ansible_collections.edgeft.failover.plugins.module_utils.persist.gaps import gaps_for
from ansible_collections.edgeft.failover.plugins.module_utils.persist.plan import PlanError, normalize_plan


def fabric():
    return rendering.load_plan("fabric")


def test_normalised_plan():
    plan = normalize_plan(fabric())
    fab0, fab1, bond0, fab2, _fab3 = plan["interfaces"]
    assert fab0["addresses"] == [{"address": "198.18.1.11/16", "family": 4}, {"address": "fd0e:d6ef:7a00:1::b/64", "family": 6}]
    assert fab0["routes"][0] == {"dst": "198.18.0.0/16", "family": 4, "gateway": None, "table": 60901, "metric": None, "scope": "link",
                                 "onlink": False, "src": None, "rto_min": None, "nexthops": []}
    assert fab0["routes"][3]["nexthops"] == [{"gateway": "198.18.1.1", "dev": "fab0", "weight": 1, "onlink": False},
                                             {"gateway": "198.19.1.1", "dev": "fab1", "weight": 2, "onlink": False}]
    assert fab1["routes"][3]["dst"] == "::/0" and fab1["routes"][3]["family"] == 6
    assert fab1["rules"][1] == {"family": 6, "from": "fd0e:d6ef:7b00:1::b/128", "table": 60902, "priority": 32701}
    assert bond0["ports"] == ["fab2", "fab3"] and bond0["bond"]["arp_ip_target"] == ["198.18.64.1", "198.18.64.2"]
    assert fab2["master"] == "bond0" and fab2["ports"] == [] and fab2["bond"] is None
    assert plan["sysctls"]["net.ipv4.conf.fab0.rp_filter"] == "2"


def test_minimal_plan_gets_every_key():
    plan = normalize_plan({"interfaces": [{"name": "fab0", "routes": [{"dst": "198.18.2.0/24", "nexthops": [{"gateway": "198.18.1.1"}]}]}]})
    iface = plan["interfaces"][0]
    assert (iface["kind"], iface["mtu"], iface["accept_ra"], iface["rules"], iface["bond"], iface["master"]) == ("ethernet", None, False, [], None, None)
    assert iface["routes"][0]["nexthops"] == [{"gateway": "198.18.1.1", "dev": "fab0", "weight": None, "onlink": False}]
    assert normalize_plan(None) == {"interfaces": [], "sysctls": {}}


def _set(path, value):
    def change(plan):
        node = plan
        for key in path[:-1]:
            node = node[key]
        if value is KeyError:
            del node[path[-1]]
        else:
            node[path[-1]] = value
    return change


BAD = [
    (_set(["interfaces", 0, "routes", 0, "via"], "198.18.1.1"), "plan.interfaces[0].routes[0]: unknown key(s) via"),
    (_set(["interfaces", 0, "routes", 0, "dst"], "198.18.1.0/16"), "plan.interfaces[0].routes[0].dst: '198.18.1.0/16' is not an IP prefix"),
    (_set(["interfaces", 0, "routes", 0, "dst"], None), "plan.interfaces[0].routes[0].dst: is required"),
    (_set(["interfaces", 1, "routes", 1, "gateway"], "fd0e::1"), "plan.interfaces[1].routes[1].gateway: fd0e::1 is IPv6, expected IPv4"),
    (_set(["interfaces", 0, "rules", 0, "family"], 6), "plan.interfaces[0].rules[0].from: 198.18.1.11/32 is IPv4 but the rule's family is 6"),
    (_set(["interfaces", 0, "rules", 0, "table"], None), "plan.interfaces[0].rules[0].table: is required"),
    (_set(["interfaces", 1, "name"], "fab0"), "plan.interfaces[1].name: fab0 is declared twice"),
    (_set(["interfaces", 0, "name"], "fab0; reboot"), "plan.interfaces[0].name: 'fab0; reboot' is not an interface name"),
    (_set(["interfaces", 0, "addresses", 0], "198.18.1.11"), "plan.interfaces[0].addresses[0]: '198.18.1.11' needs a prefix length"),
    (_set(["interfaces", 0, "mtu"], 20), "plan.interfaces[0].mtu: 20 is out of range 68..65535"),
    (_set(["interfaces", 0, "kind"], "team"), "plan.interfaces[0].kind: 'team' is not one of ethernet, bond, bond-port"),
    (_set(["interfaces", 3, "master"], "fab0"), "plan.interfaces[3].master: fab0 is not a bond of the plan"),
    (_set(["interfaces", 3, "addresses"], ["198.18.64.12/24"]), "plan.interfaces[3].addresses: a bond port carries no addresses"),
    (_set(["interfaces", 2, "bond", "primary"], "fab0"), "plan.interfaces[2].bond.primary: fab0 is not a port of bond0 (ports: fab2, fab3)"),
    (_set(["interfaces", 2, "bond", "mode"], None), "plan.interfaces[2].bond.mode: is required"),
    (_set(["interfaces", 2, "bond", "miimon"], 100), "plan.interfaces[2].bond: miimon and arp_interval exclude each other"),
    (_set(["interfaces", 2, "bond", "arp_ip_target"], []), "plan.interfaces[2].bond.arp_ip_target: ARP monitoring (arp_interval) needs"),
    (_set(["interfaces", 2, "bond", "xmit_hash_policy"], "layer5"), "plan.interfaces[2].bond.xmit_hash_policy: 'layer5' is not one of"),
    (_set(["interfaces", 0, "bond"], {"mode": "active-backup"}), "plan.interfaces[0].bond: only an interface of kind bond has bond settings"),
    (_set(["interfaces", 0, "routes", 3, "gateway"], "198.18.1.1"), "plan.interfaces[0].routes[3]: a multipath route has nexthops and no gateway"),
    (_set(["interfaces", 0, "routes", 3, "nexthops", 0, "weight"], 0), "plan.interfaces[0].routes[3].nexthops[0].weight: 0 is out of range 1..256"),
    (_set(["interfaces", 0, "routes", 3, "nexthops", 1, "dev"], "fab2"), "plan.interfaces[0].routes[3].nexthops[1].dev: fab2 is a bond port"),
    (_set(["interfaces", 0, "routes", 2, "onlink"], True), "plan.interfaces[0].routes[2].onlink: onlink needs a gateway"),
    (_set(["interfaces", 0, "routes", 2, "rto_min"], "fast"), "plan.interfaces[0].routes[2].rto_min: must be an integer"),
    (_set(["sysctls", "net.ipv4.conf.fab0.rp_filter"], "2\nnet.ipv4.ip_forward = 1"), "plan.sysctls['net.ipv4.conf.fab0.rp_filter']: value"),
    (_set(["sysctls", "net.ipv4.conf.fab0.rp_filter = 2"], "2"), "plan.sysctls['net.ipv4.conf.fab0.rp_filter = 2']: is not a sysctl key"),
    (_set(["routes"], []), "plan: unknown key(s) routes"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[m.split(":")[0] + "/" + str(i) for i, (_c, m) in enumerate(BAD)])
def test_bad_plans_are_refused_naming_the_path(change, message):
    plan = fabric()
    change(plan)
    with pytest.raises(PlanError) as err:
        normalize_plan(plan)
    assert str(err.value).startswith(message), str(err.value)


def test_gaps_of_the_fabric_plan():
    plan = normalize_plan(fabric())
    assert gaps_for(plan, "ifupdown") == []
    assert gaps_for(plan, "networkmanager") == []
    assert gaps_for(plan, "networkd", 255) == []
    old = gaps_for(plan, "networkd", 252)
    assert old == [
        "plan.interfaces[0].routes[3] (fab0 198.18.3.0/24): rto_min 20 ms: systemd-networkd 252 has no per-route RTO minimum"
        " (TCPRetransmissionTimeoutSec= needs systemd 255)",
        "plan.interfaces[1].routes[4] (fab1 198.18.2.11/32): rto_min 20 ms: systemd-networkd 252 has no per-route RTO minimum"
        " (TCPRetransmissionTimeoutSec= needs systemd 255)"]
    assert gaps_for(plan, "netplan") == [
        "plan.interfaces[0].routes[3] (fab0 198.18.3.0/24): rto_min 20 ms: netplan has no per-route RTO minimum",
        "plan.interfaces[0].routes[3] (fab0 198.18.3.0/24): netplan has no multipath routes (2 next hops)",
        "plan.interfaces[1].routes[4] (fab1 198.18.2.11/32): rto_min 20 ms: netplan has no per-route RTO minimum"]
    assert gaps_for(plan, "none") == []


def test_gaps_of_other_plans():
    plan = fabric()
    fab0 = plan["interfaces"][0]
    fab0["routes"].append({"dst": "fd0e:d6ef:7a00:3::/64", "nexthops": [{"gateway": "fd0e:d6ef:7a00:1::1"}, {"gateway": "fd0e:d6ef:7b00:1::1", "dev": "fab1"}]})
    fab0["routes"].append({"dst": "198.18.4.0/24", "nexthops": [{"dev": "fab0"}, {"gateway": "198.19.9.1", "dev": "fab9", "onlink": True}]})
    plan["interfaces"][2]["bond"]["arp_validate"] = "filter"
    plan["interfaces"].append({"name": "fab9", "addresses": ["fd0e:d6ef:7d00:1::b/64"]})
    plan = normalize_plan(plan)
    assert gaps_for(plan, "networkd", 255) == [
        "plan.interfaces[0].routes[5] (fab0 198.18.4.0/24): nexthops[0]: MultiPathRoute= needs a gateway address, this next hop has only dev fab0",
        "plan.interfaces[0].routes[5] (fab0 198.18.4.0/24): nexthops[1]: MultiPathRoute= has no per-next-hop onlink flag",
        "plan.interfaces[2].bond (bond0): arp_validate filter: systemd-networkd 255 knows only none, active, backup, all"]
    assert gaps_for(plan, "networkmanager") == [
        "plan.interfaces[5] (fab9): NetworkManager applies IPv4 routes and rules only to a profile with an IPv4 address (ipv4.method=manual)",
        "plan.interfaces[0].routes[4] (fab0 fd0e:d6ef:7a00:3::/64): NetworkManager merges only IPv4 routes into multipath (weight is IPv4 only)",
        "plan.interfaces[0].routes[5] (fab0 198.18.4.0/24): NetworkManager merges next hops into one multipath route only when all share"
        " the onlink flag"]
    assert [g for g in gaps_for(plan, "netplan") if "arp_validate" in g] == [
        "plan.interfaces[2].bond (bond0): arp_validate filter: netplan knows only none, active, backup, all"]
    assert gaps_for(copy.deepcopy(plan), "ifupdown") == []
