"""Bond diff -> ordered steps, the record, and the network plan (pure).

The order is what the bonding driver requires (plugins/module_utils/bond/changes.py);
it runs against the real driver in the project's VM scenario, since this kernel has none.
"""

from __future__ import annotations

import copy

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.bond import changes, spec

AB = {"name": "bond0", "ports": ["fab0", "fab1"], "primary": "fab0"}
LINKS = {"fab0": {"up": True}, "fab1": {"up": False}, "fab2": {"up": True}}


def declared(**params):
    return spec.normalize_bond(dict(AB, **params))


def current_of(bond, up=True, mtu=1500, addresses=()):
    """A bond read back from the kernel that matches a declaration."""
    cur = copy.deepcopy(bond)
    cur.update(ifindex=9, up=up, mtu=mtu, addresses=list(addresses))
    return cur


def texts(steps):
    return [changes.step_text(s) for s in steps]


def test_create_enslaves_down_ports_then_brings_the_bond_up():
    steps = changes.present_steps(declared(mtu=9000, addresses=["198.18.1.11/16"]), None, LINKS, {})
    assert texts(steps) == [
        "create bond bond0 (arp_all_targets=0, arp_interval=0, arp_ip_target=[], arp_validate=0, downdelay=0, miimon=100, "
        "mode=1, primary=fab0, updelay=0)",
        "set fab0 down", "enslave fab0",  # the driver enslaves only ports that are down
        "enslave fab1",                   # already down
        "set mtu 9000 on bond0",
        "set bond0 up",
        "add address 198.18.1.11/16 on bond0",
    ]


def test_nothing_to_do_when_the_kernel_matches():
    bond = declared(addresses=["198.18.1.11/16"])
    assert changes.present_steps(bond, current_of(bond, addresses=["198.18.1.11/16"]), LINKS, {}) == []
    # mtu and addresses left out of the declaration are left alone
    assert changes.present_steps(declared(), current_of(declared(), mtu=9000, addresses=["198.18.9.9/16"]), LINKS, {}) == []


def test_an_option_change_sends_only_what_changed():
    steps = changes.present_steps(declared(miimon=50, updelay=100), current_of(declared()), LINKS, {})
    assert steps == [{"op": "set_options", "name": "bond0",
                      "args": {"bond_miimon": 50, "bond_updelay": 100, "bond_downdelay": 0},
                      "undo": {"bond_miimon": 100, "bond_updelay": 0, "bond_downdelay": 0}}]


def test_switching_to_the_arp_monitor_turns_miimon_off_in_the_same_request():
    arp = declared(arp_interval=100, arp_ip_target=["198.18.1.1"], arp_validate="all")
    (step,) = changes.present_steps(arp, current_of(declared()), LINKS, {})
    assert step["args"] == {"bond_miimon": 0, "bond_arp_interval": 100, "bond_arp_ip_target": ["198.18.1.1"], "bond_arp_validate": 3}
    assert step["undo"] == {"bond_miimon": 100, "bond_updelay": 0, "bond_downdelay": 0, "bond_arp_interval": 0,
                            "bond_arp_ip_target": [], "bond_arp_validate": 0}


def test_ports_added_and_removed_restoring_the_recorded_admin_state():
    record = {"ports": {"fab0": {"up": True}, "fab1": {"up": False}}}
    steps = changes.present_steps(declared(ports=["fab0", "fab2"]), current_of(declared()), LINKS, record)
    assert texts(steps) == ["release fab1", "set fab2 down", "enslave fab2"]
    steps = changes.present_steps(declared(ports=["fab1"], primary=None), current_of(declared()), LINKS, record)
    assert texts(steps) == ["release fab0", "set fab0 up", "set options of bond bond0 (primary=0)"]


def test_a_mode_change_takes_the_bond_down_and_rebuilds_it():
    record = {"ports": {"fab0": {"up": True}, "fab1": {"up": True}}}
    lacp = declared(mode="802.3ad", primary=None, ports=["fab1", "fab2"], lacp_rate="fast")
    steps = changes.present_steps(lacp, current_of(declared()), LINKS, record)
    assert texts(steps) == [
        "set bond0 down",
        "release fab0", "set fab0 up",  # leaves the bond: back to how it was
        "release fab1",                 # stays: enslaved again below
        "set options of bond bond0 (ad_lacp_rate=1, downdelay=0, miimon=100, mode=4, updelay=0, xmit_hash_policy=0)",
        "enslave fab1", "set fab2 down", "enslave fab2",
        "set bond0 up",
    ]


def test_lacp_rate_changes_only_while_the_bond_is_down():
    lacp = declared(mode="802.3ad", primary=None)
    steps = changes.present_steps(declared(mode="802.3ad", primary=None, lacp_rate="fast"), current_of(lacp), LINKS, {})
    assert texts(steps) == ["set bond0 down", "set options of bond bond0 (ad_lacp_rate=1)", "set bond0 up"]
    steps = changes.present_steps(declared(mode="802.3ad", primary=None, xmit_hash_policy="layer3+4"), current_of(lacp), LINKS, {})
    assert texts(steps) == ["set options of bond bond0 (xmit_hash_policy=1)"]  # allowed while up


def test_a_bond_found_down_is_brought_up():
    assert texts(changes.present_steps(declared(), current_of(declared(), up=False), LINKS, {})) == ["set bond0 up"]


def test_addresses_removed_only_if_recorded():
    bond = declared(addresses=["198.18.1.11/16"])
    cur = current_of(bond, addresses=["198.18.1.12/16", "198.18.1.13/16"])
    steps = changes.present_steps(bond, cur, LINKS, {"addresses": ["198.18.1.12/16"]})
    assert texts(steps) == ["add address 198.18.1.11/16 on bond0", "remove address 198.18.1.12/16 on bond0"]


def test_absent_deletes_then_restores_ports():
    cur = current_of(declared())
    assert texts(changes.absent_steps(cur, {"ports": {"fab0": {"up": True}, "fab1": {"up": False}}})) == [
        "delete bond bond0", "set fab0 up"]
    assert changes.absent_steps(None, {}) == []


def test_record_keeps_the_first_known_admin_state_of_each_port():
    bond = declared(ports=["fab0", "fab1", "fab2"], addresses=["198.18.1.11/16"])
    links = dict(LINKS, fab1={"up": True})  # enslaved already: the driver holds it up
    entry = changes.record_after(bond, current_of(declared()), links, {"created": True, "ports": {"fab1": {"up": False}}})
    assert entry == {"created": True, "ports": {"fab0": {"up": True}, "fab1": {"up": False}, "fab2": {"up": True}},
                     "addresses": ["198.18.1.11/16"]}
    assert changes.record_after(declared(), None, LINKS, {})["created"] is True


def test_plan_shape():
    plan = changes.build_plan(declared(arp_interval=100, arp_ip_target=["198.18.1.1"], arp_validate="all", miimon=0,
                                       addresses=["198.18.1.11/16"]))
    bond, fab0, fab1 = plan["interfaces"]
    assert bond == {"name": "bond0", "kind": "bond", "mtu": None, "addresses": ["198.18.1.11/16"], "accept_ra": False,
                    "routes": [], "rules": [], "master": None,
                    "bond": {"mode": "active-backup", "miimon": None, "arp_interval": 100, "arp_ip_target": ["198.18.1.1"],
                             "arp_validate": "all", "lacp_rate": None, "primary": "fab0",
                             "updelay": 0, "downdelay": 0, "xmit_hash_policy": None}}
    assert fab0 == {"name": "fab0", "kind": "bond-port", "master": "bond0", "mtu": None, "addresses": [], "routes": [],
                    "rules": [], "bond": None, "accept_ra": False}
    assert fab1["name"] == "fab1" and plan["sysctls"] == {}
    assert changes.build_plan(None) == {"interfaces": [], "sysctls": {}}
    # not a key of the shared shape: present only when it is not the kernel's default
    all_targets = changes.build_plan(declared(arp_interval=100, arp_ip_target=["198.18.1.1"], arp_all_targets="all"))
    assert all_targets["interfaces"][0]["bond"]["arp_all_targets"] == "all"


@pytest.mark.parametrize("params", [
    {}, {"miimon": 50, "updelay": 100, "mtu": 9000, "addresses": ["198.18.1.11/16"]},
    {"arp_interval": 100, "arp_ip_target": ["198.18.1.1"], "arp_validate": "all"},
    {"mode": "802.3ad", "primary": None, "lacp_rate": "fast", "xmit_hash_policy": "layer3+4"},
    {"mode": "balance-xor", "primary": None},
])
def test_the_persistence_renderer_accepts_the_plan(params):
    """Contract with plugins/module_utils/persist/plan.py, which refuses keys it cannot render."""
    persist = pytest.importorskip("ansible_collections.edgeft.failover.plugins.module_utils.persist.plan")
    bond = declared(**params)
    normalized = persist.normalize_plan(changes.build_plan(bond))
    assert normalized["interfaces"][0]["ports"] == ["fab0", "fab1"]
    for key, value in changes.plan_bond_options(bond["options"]).items():
        assert normalized["interfaces"][0]["bond"][key] == value


def test_arp_all_targets_is_never_dropped_silently_by_the_renderer():
    persist = pytest.importorskip("ansible_collections.edgeft.failover.plugins.module_utils.persist.plan")
    plan = changes.build_plan(declared(arp_interval=100, arp_ip_target=["198.18.1.1"], arp_all_targets="all"))
    try:
        normalized = persist.normalize_plan(plan)
    except persist.PlanError as e:
        assert "arp_all_targets" in str(e)  # refused, naming it: the role fails before writing
    else:
        assert normalized["interfaces"][0]["bond"]["arp_all_targets"] == "all"
