"""merge_network_plans: one plan per host from the modules' parts, each interface once."""

from __future__ import annotations

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.persist.merge import MergeError, merge_plans
from ansible_collections.edgeft.failover.plugins.module_utils.persist.plan import normalize_plan

MULTIHOME = {"interfaces": [
    {"name": "fab0", "kind": "ethernet", "mtu": 9000, "addresses": ["198.18.1.11/16"], "accept_ra": False,
     "routes": [{"dst": "198.18.0.0/16", "table": 60901, "scope": "link"}],
     "rules": [{"family": 4, "from": "198.18.1.11/32", "table": 60901, "priority": 32700}], "bond": None, "master": None},
    {"name": "bond0", "kind": "ethernet", "mtu": None, "addresses": ["198.19.1.11/16"], "accept_ra": False,
     "routes": [], "rules": [], "bond": None, "master": None}],
    "sysctls": {"net.ipv4.conf.fab0.rp_filter": "2"}}
BONDS = {"interfaces": [
    {"name": "bond0", "kind": "bond", "mtu": None, "addresses": [], "accept_ra": False, "routes": [], "rules": [],
     "bond": {"mode": "active-backup", "miimon": 100}, "master": None},
    {"name": "fab1", "kind": "bond-port", "master": "bond0", "mtu": None, "addresses": [], "accept_ra": False,
     "routes": [], "rules": [], "bond": None},
    {"name": "fab2", "kind": "bond-port", "master": "bond0", "mtu": None, "addresses": [], "accept_ra": False,
     "routes": [], "rules": [], "bond": None}],
    "sysctls": {}}
ROUTES = {"interfaces": [
    {"name": "fab0", "kind": "ethernet", "mtu": None, "addresses": [], "accept_ra": False,
     "routes": [{"dst": "198.18.2.11/32", "metric": 100}], "rules": [], "bond": None, "master": None}],
    "sysctls": {"net.ipv4.conf.fab0.rp_filter": "2"}}


def test_each_interface_once_with_everything_each_module_declared():
    merged = merge_plans([MULTIHOME, BONDS, None, {}, ROUTES])
    names = [i["name"] for i in merged["interfaces"]]
    assert names == ["fab0", "bond0", "fab1", "fab2"]
    fab0 = merged["interfaces"][0]
    assert fab0["mtu"] == 9000 and fab0["addresses"] == ["198.18.1.11/16"]
    assert fab0["routes"] == [{"dst": "198.18.0.0/16", "table": 60901, "scope": "link"}, {"dst": "198.18.2.11/32", "metric": 100}]
    bond0 = merged["interfaces"][1]
    assert bond0["kind"] == "bond" and bond0["bond"]["mode"] == "active-backup" and bond0["addresses"] == ["198.19.1.11/16"]
    assert merged["sysctls"] == {"net.ipv4.conf.fab0.rp_filter": "2"}
    normalize_plan(merged)  # what the renderers accept
    assert MULTIHOME["interfaces"][0]["routes"] == [{"dst": "198.18.0.0/16", "table": 60901, "scope": "link"}]  # inputs untouched


@pytest.mark.parametrize("other,message", [
    ({"interfaces": [{"name": "fab0", "mtu": 1500}]}, "interfaces fab0: mtu is 9000 in one plan and 1500 in another"),
    ({"interfaces": [{"name": "bond0", "kind": "bond-port", "master": "bond9"}]}, "interfaces bond0: kind is bond in one plan and bond-port"),
    ({"sysctls": {"net.ipv4.conf.fab0.rp_filter": "1"}}, "sysctls net.ipv4.conf.fab0.rp_filter is '2' in one plan and '1'"),
])
def test_disagreements_are_errors_naming_the_key(other, message):
    with pytest.raises(MergeError, match=message.replace("(", "\\(")):
        merge_plans([MULTIHOME, BONDS, other])


def test_a_plane_nic_with_addresses_cannot_become_a_bond_port():
    """The merge keeps both halves; the plan check then names what to move to the bond."""
    from ansible_collections.edgeft.failover.plugins.module_utils.persist.plan import PlanError

    port = {"interfaces": [{"name": "bond1", "kind": "bond", "bond": {"mode": "active-backup", "miimon": 100}},
                           {"name": "fab0", "kind": "bond-port", "master": "bond1"}]}
    merged = merge_plans([MULTIHOME, port])
    assert [i["kind"] for i in merged["interfaces"] if i["name"] == "fab0"] == ["bond-port"]
    with pytest.raises(PlanError, match="a bond port carries no addresses"):
        normalize_plan(merged)
