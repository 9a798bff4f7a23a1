"""The switch maintenance model, guards, verdicts and report, on the lab inventory's data."""

from __future__ import annotations

import copy

import pytest
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader

from ansible_collections.edgeft.failover.plugins.filter import maintenance
from ansible_collections.edgeft.failover.plugins.module_utils.maintenance import batches, guards, model, report, verify
from repo import REPO

LAB_INVENTORY = REPO / "inventories" / "lab" / "hosts.yml"


@pytest.fixture(scope="module")
def lab():
    inv = InventoryManager(loader=DataLoader(), sources=[str(LAB_INVENTORY)])
    groups = {name: [h.name for h in g.get_hosts()] for name, g in inv.groups.items()}
    hostvars = {h.name: dict(h.get_vars()) for h in inv.get_hosts()}
    return {"groups": groups, "hostvars": hostvars}


def test_tor_drains_its_rack_and_the_other_rack_steers_around_it(lab):
    plan = model.maintenance_plan("tor-r1-a", lab)
    p = plan["plans"]["tor-r1-a"]
    assert (p["role"], p["plane"]) == ("tor", "a")
    assert p["hosts"] == ["r1h1", "r1h2"]
    assert p["peers"] == ["r2h1", "r2h2"]
    assert p["backup_planes"] == {"r1h1": ["b"], "r1h2": ["b"]}
    assert p["switch_of"]["r1h1"] == {"a": "tor-r1-a", "b": "tor-r1-b"}
    assert plan["hosts"] == ["r1h1", "r1h2", "r2h1", "r2h2"]


def test_spine_drains_its_plane_fabric_wide(lab):
    p = model.maintenance_plan(["spine-b"], lab)["plans"]["spine-b"]
    assert p["hosts"] == ["r1h1", "r1h2", "r2h1", "r2h2"] and p["peers"] == []


def test_groups_and_lists_resolve_in_order_without_repeats(lab):
    inv = copy.deepcopy(lab)
    inv["groups"]["tors"] = ["tor-r2-a", "tor-r1-a"]
    assert model.resolve_switches("tors, tor-r1-a,spine-a", inv) == ["tor-r2-a", "tor-r1-a", "spine-a"]
    assert model.resolve_switches(["tor-r1-b", ["tor-r2-b"]], inv) == ["tor-r1-b", "tor-r2-b"]


@pytest.mark.parametrize("targets, text", [
    ("tor-r9-a", "'tor-r9-a' is neither a switch of the inventory nor a group of switches (switches: tor-r1-a"),
    ("", "edgeft_switch: name at least one switch"),
    (None, "edgeft_switch: name at least one switch"),
    ("rack_r1", "group 'rack_r1' holds r1h1, r1h2, which are no switch: neither in group 'switches' nor named by a host's "
                "edgeft_planes[].switch"),
    (42, "edgeft_switch: give a switch name"),
])
def test_bad_switch_names_are_refused(lab, targets, text):
    with pytest.raises(model.MaintenanceError, match=None) as e:
        model.maintenance_plan(targets, lab)
    assert text in str(e.value)


def test_an_empty_group_is_refused(lab):
    inv = copy.deepcopy(lab)
    inv["groups"]["empty_tors"] = []
    with pytest.raises(model.MaintenanceError) as e:
        model.resolve_switches("empty_tors", inv)
    assert "group 'empty_tors' is empty" in str(e.value)


def test_a_switch_without_plane_or_hosts_is_refused(lab):
    # A spine: no host names it, so its plane comes from edgeft_switch_plane only.
    inv = copy.deepcopy(lab)
    del inv["hostvars"]["spine-a"]["edgeft_switch_plane"]
    with pytest.raises(model.MaintenanceError, match="spine-a: set edgeft_switch_plane"):
        model.switch_plan("spine-a", inv)
    inv = copy.deepcopy(lab)
    inv["groups"]["switch_tor_r1_a"] = []
    with pytest.raises(model.MaintenanceError, match="group 'switch_tor_r1_a' .* is missing or empty"):
        model.switch_plan("tor-r1-a", inv)
    # A switch of group 'switches' that no host names and no group lists.
    inv = copy.deepcopy(lab)
    inv["groups"]["switches"].append("tor-r9-a")
    inv["hostvars"]["tor-r9-a"] = {"edgeft_switch_plane": "a", "edgeft_switch_role": "tor"}
    with pytest.raises(model.MaintenanceError, match="tor-r9-a: group 'switch_tor_r9_a' .* is missing or empty, and no "
                                                     "host names the switch"):
        model.switch_plan("tor-r9-a", inv)


def _without_switch_groups(lab, keep_switches=True):
    """The lab inventory as a user may write it: group fabric (and the switches), nothing per rack,
    plane or switch."""
    inv = copy.deepcopy(lab)
    for name in list(inv["groups"]):
        if name.startswith(("switch_", "rack_", "plane_")) or name == "switches" and not keep_switches:
            del inv["groups"][name]
    return inv


def test_switches_and_their_hosts_come_from_the_hosts_planes_without_groups(lab):
    derived = _without_switch_groups(lab)
    for switch in ("tor-r1-a", "tor-r2-b", "spine-a", "spine-b"):
        assert model.switch_plan(switch, derived) == model.switch_plan(switch, lab), switch
    # Without group 'switches' too: the ToRs are the switches the hosts name.
    bare = _without_switch_groups(lab, keep_switches=False)
    assert model.known_switches(bare) == ["tor-r1-a", "tor-r1-b", "tor-r2-a", "tor-r2-b"]
    assert model.switch_plan("tor-r1-a", bare) == model.switch_plan("tor-r1-a", lab)
    assert model.maintenance_plan("tor-r2-a", bare)["hosts"] == ["r2h1", "r2h2", "r1h1", "r1h2"]
    with pytest.raises(model.MaintenanceError, match="'spine-a' is neither a switch of the inventory"):
        model.maintenance_plan("spine-a", bare)


def test_a_switch_named_for_two_planes_or_against_its_plane_is_refused(lab):
    inv = _without_switch_groups(lab)
    inv["hostvars"]["r1h2"]["edgeft_planes"][1]["switch"] = "tor-r1-a"
    with pytest.raises(model.MaintenanceError, match="tor-r1-a: r1h1 names it as the switch of plane 'a', r1h2 as the "
                                                     "switch of plane 'b'"):
        model.maintenance_plan("tor-r2-a", inv)
    inv = _without_switch_groups(lab)
    inv["hostvars"]["tor-r1-a"]["edgeft_switch_plane"] = "b"
    with pytest.raises(model.MaintenanceError, match="tor-r1-a: edgeft_switch_plane is 'b', but r1h1 names it as the "
                                                     "switch of plane 'a'"):
        model.switch_plan("tor-r1-a", inv)


def test_a_single_homed_host_cannot_lose_its_switch(lab):
    inv = copy.deepcopy(lab)
    inv["hostvars"]["r1h2"]["edgeft_planes"] = inv["hostvars"]["r1h2"]["edgeft_planes"][:1]
    with pytest.raises(model.MaintenanceError, match="r1h2 has no plane but 'a'"):
        model.switch_plan("tor-r1-a", inv)


def test_switches_of_one_batch_must_not_serve_a_host_twice(lab):
    plan = model.maintenance_plan("tor-r1-a,tor-r1-b,tor-r2-a", lab)
    conflicts = batches.shared_hosts([plan["plans"][s] for s in plan["switches"]])
    assert conflicts == [
        "tor-r1-a and tor-r1-b are in the same batch and both serve r1h1 (planes a and b): maintain them in different batches (serial)",
        "tor-r1-a and tor-r1-b are in the same batch and both serve r1h2 (planes a and b): maintain them in different batches (serial)",
    ]
    assert batches.shared_hosts([plan["plans"]["tor-r1-a"], plan["plans"]["tor-r2-a"]]) == []


# ---------------------------------------------------------------- reports
def _report(drained=(), unusable=(), tx=None, ages=None, down=None, drained_for=None, skipped=0, learned=None):
    tx = tx or {}
    planes = []
    for i, name in enumerate("ab"):
        planes.append({"name": name, "index": i, "interface": "fab%d" % i, "usable": name not in unusable and name not in drained,
                       "up": name not in unusable, "drained": name in drained,
                       "counters": {"tx_packets": tx.get(name, 0), "steer_skipped": skipped},
                       "nic": {"tx_dropped": 0, "rx_dropped": 0}})
    peers = []
    for peer in ("r1h1", "r1h2", "r2h1", "r2h2"):
        peers.append({"name": peer, "down_planes": (down or {}).get(peer, []), "learned_planes": (learned or {}).get(peer, []),
                      "drained_planes": (drained_for or {}).get(peer, []),
                      "last_seen_age_ms": (ages or {}).get(peer, {"a": None, "b": 5})})
    return {"planes": planes, "peers": peers}


def _all(**kw):
    return {h: _report(**kw) for h in ("r1h1", "r1h2", "r2h1", "r2h2")}


def test_guard_passes_a_healthy_fabric(lab):
    p = model.switch_plan("tor-r1-a", lab)
    checks = {h: {"b": {"healthy": True}} for h in p["hosts"]}
    assert guards.refusals(p, _all(), checks) == []


def test_guard_refuses_when_the_other_switch_of_the_rack_is_drained(lab):
    p = model.switch_plan("tor-r1-a", lab)
    reports = _all()
    reports["r1h1"] = _report(drained=("b",))
    out = guards.refusals(p, reports, {})
    assert out == ["tor-r1-a: r1h1's plane 'b' is already drained (switch tor-r1-b): draining tor-r1-a too would "
                   "leave r1h1 no plane; undrain that first"]


def test_guard_refuses_an_unhealthy_backup_plane(lab):
    p = model.switch_plan("tor-r1-a", lab)
    out = guards.refusals(p, _all(), {"r1h2": {"b": {"healthy": False, "unhealthy_peers": ["r2h1"]}}})
    assert out == ["tor-r1-a: r1h2's backup plane 'b' is unhealthy: check probes to r2h1 were lost; repair it before draining tor-r1-a"]
    reports = _all()
    reports["r1h1"] = _report(unusable=("b",))
    assert "r1h1's backup plane 'b' is not usable (NIC fab1 down" in guards.refusals(p, reports, {})[0]


def test_guard_refuses_when_a_peer_would_find_no_plane(lab):
    """A host behind the switch whose data path holds the backup plane down for a peer would leave
    its traffic for that peer on the switch (steer_skipped): refused, learned and judged alike."""
    p = model.switch_plan("tor-r1-b", lab)
    checks = {h: {"a": {"healthy": True}} for h in p["hosts"]}
    reports = _all()
    reports["r1h1"] = _report(down={"r1h2": ["a"]}, learned={"r1h2": ["a"]})
    reports["r1h2"] = _report(down={"r2h1": ["a"]})
    assert guards.refusals(p, reports, checks) == [
        "tor-r1-b: r1h1's traffic for r1h2 would have nowhere to go but plane 'b': it keeps off 'a' for r1h1 (learned "
        "from its packets); find out why (edgeft.failover.plane_state state=query on r1h1) before draining tor-r1-b",
        "tor-r1-b: r1h2's traffic for r2h1 would have nowhere to go but plane 'b': 'a' is down for it (judged by r1h2's "
        "agent, or drained for it); find out why (edgeft.failover.plane_state state=query on r1h2) before draining tor-r1-b"]
    # A peer with no address on the drained plane gets nothing of ours there; one down on the
    # drained plane only is what the drain is about.
    reports["r1h1"]["peers"][1]["addresses"] = {"planes": {"a": {"ipv4": "198.18.1.12", "ipv6": None}}}
    reports["r1h2"] = _report(down={"r2h1": ["b"]})
    assert guards.refusals(p, reports, checks) == []


def test_the_filter_reads_the_checks_from_reports_that_ran_them(lab):
    # plane_state with check_planes returns its checks in the report: the role passes no checks.
    p = model.switch_plan("tor-r1-a", lab)
    reports = _all()
    reports["r1h2"] = dict(reports["r1h2"], checks={"b": {"healthy": False, "unhealthy_peers": ["r2h1"]}})
    assert maintenance.maintenance_refusals(p, reports) == [
        "tor-r1-a: r1h2's backup plane 'b' is unhealthy: check probes to r2h1 were lost; repair it before draining tor-r1-a"]
    reports["r1h2"]["checks"]["b"] = {"healthy": True}
    assert maintenance.maintenance_refusals(p, reports) == []


def test_guard_refuses_unknown_hosts_and_stranded_peers(lab):
    p = model.switch_plan("tor-r1-a", lab)
    reports = _all()
    del reports["r1h2"]
    reports["r2h1"] = _report(unusable=("b",))
    out = guards.refusals(p, reports, {})
    assert out[0].startswith("tor-r1-a: no report from r1h2 (unreachable?)")
    assert out[1] == "tor-r1-a: r2h1 has no usable plane besides 'a', so its traffic for r1h1, r1h2 could not leave the switch"
    # Another host without a report (no preflight) is not refused: the drain's confirmation proves it.
    del reports["r2h1"]
    assert len(guards.refusals(p, reports, {})) == 1


def _drains(p, unconfirmed=None):
    """Each host behind the switch's drain result, as plane_state returns it with confirm_ms."""
    return {h: {"confirmed": [], "unconfirmed": (unconfirmed or {}).get(h, [])} for h in p["hosts"]}


def test_verdict_names_hosts_still_on_the_drained_plane_and_peers_not_confirmed_off_it(lab):
    p = model.switch_plan("tor-r1-a", lab)
    before = _all(drained=("a",))
    after = {h: _report(drained=("a",)) for h in p["hosts"]}
    after["r1h1"] = _report(drained=("a",), tx={"a": 7}, ages={"r2h2": {"a": 300, "b": 1}})
    drains = _drains(p, {"r1h2": [{"name": "r2h2", "reason": "answered on the plane"},
                                  {"name": "r2h1", "reason": "no answer"}]})
    assert verify.still_used(p, before, after, 2000, drains) == [
        "r1h1: still sent 7 packets on plane 'a'",
        "r1h1: still receives from r2h2 on plane 'a' (300 ms ago)",
        "r2h2: still sends to r1h2 on plane 'a' (its answer to the drain's echo came back on it)",
        "r2h1: did not answer r1h2's echo after the drain (no answer), so it cannot be shown to keep off plane 'a'",
    ]
    after["r1h1"] = _report(drained=("a",))
    assert verify.still_used(p, before, after, 2000, _drains(p)) == []
    # The other hosts' reports are not needed, and a drain without its result is named.
    drains = _drains(p)
    del drains["r1h1"]
    assert verify.still_used(p, before, after, 2000, drains) == ["r1h1: no confirmation from its drain (not run?)"]


def test_verdict_names_packets_that_found_no_plane(lab):
    p = model.switch_plan("tor-r1-a", lab)
    before = _all(drained=("a",))
    after = _all(drained=("a",), skipped=3)
    out = verify.still_used(p, before, after, 2000, _drains(p))
    assert "r1h1: 6 packets found no plane to move to and stayed on their own" in out and len(out) == 2


def test_report_counts_as_lost_only_what_found_no_plane_after_the_verification(lab):
    p = model.switch_plan("tor-r1-a", lab)
    before, verified, after = _all(), _all(skipped=1), _all(skipped=3)
    row = report.switch_row(p, before, after, verified=verified)
    # The hosts behind the switch: the others are not read.
    assert (row["lost_packets"], row["unsteered_during_drain"]) == (2 * 2 * 2, 2 * 2 * 1)


def test_undrain_verdict_names_leftovers(lab):
    p = model.switch_plan("tor-r1-a", lab)
    after = {h: _report() for h in p["hosts"]}
    after["r1h2"] = _report(drained=("a",))
    assert verify.leftovers(p, after) == ["r1h2: plane 'a' is still drained"]
    del after["r1h1"]
    assert verify.leftovers(p, after) == ["r1h1: no report (unreachable?)", "r1h2: plane 'a' is still drained"]
    assert verify.leftovers(p, _all()) == []


def test_report_counts_skipped_packets_as_lost_and_shows_nic_drops_apart(lab):
    p = model.switch_plan("tor-r1-a", lab)
    before = _all()
    after = _all(skipped=1)
    after["r1h1"]["planes"][1]["nic"] = {"tx_dropped": 2, "rx_dropped": 1}
    after["r1h1"]["planes"][0]["nic"] = {"tx_dropped": 5, "rx_dropped": 0}
    row = report.switch_row(p, before, after, 100.0, 112.34)
    assert row["lost_packets"] == row["steer_skipped"] == 2 * 2  # steer_skipped on both planes of the 2 hosts behind
    assert row["unsteered_during_drain"] == 0
    assert (row["backup_plane_drops"], row["drained_plane_drops"]) == (3, 5)
    assert row["drained_seconds"] == 12.3 and row["hosts_affected"] == 4
    text = report.render([row, report.switch_row(p, before, before, status="refused", failures=["r1h1 down"])])
    assert text.splitlines()[0].split() == ["switch", "plane", "hosts", "drained", "s", "lost", "status"]
    assert "2 switch(es), 4 packets lost (counters), 1 failed" in text
    assert "  tor-r1-a: r1h1 down" in text
