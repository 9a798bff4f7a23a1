"""The uninstall's pure logic: which rules, routes and neighbours are edgeft's to remove, which
attach points to detach, why a host is refused, which multihome addresses are kept. No kernel."""

from __future__ import annotations

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.multihome import record as rec
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.spec import OptionError
from ansible_collections.edgeft.failover.plugins.module_utils.uninstall import addresses, footprint, steering

TABLE, PRIORITY = 60919, 32690


def rule(family, priority, table, proto=237, suppress=None):
    return {"family": family, "priority": priority, "table": table, "proto": proto, "suppress": suppress}


def route(family, table, dst, proto=237):
    return {"family": family, "table": table, "dst": dst, "proto": proto}


EDGEFT_RULES = [rule(f, PRIORITY - 1, TABLE + 1) for f in (4, 6)] + [rule(f, PRIORITY, 254, suppress=0) for f in (4, 6)] \
    + [rule(f, PRIORITY + 1, TABLE) for f in (4, 6)]


def test_the_agents_rules_and_table_routes_are_removed():
    routes = [route(4, TABLE, "198.18.2.11/32"), route(6, TABLE + 1, "fd0e:d6ef:7a00:2::b/128")]
    found = steering.plan(EDGEFT_RULES, routes, {}, set(), TABLE, PRIORITY)
    assert len(found["rules"]) == 6 and found["routes"] == sorted(routes, key=lambda r: (r["family"], r["table"], r["dst"]))
    assert found["kept"] == [] and found["neighbors"] == []
    assert steering.rule_text(found["rules"][1]) == "IPv4 32690: lookup main suppress_prefixlength 0 proto 237"


def test_addresses_the_agent_kept_local_are_removed_and_the_kernels_own_are_not_listed():
    kept = route(6, 255, "fd0e:d6ef:7a00:2::b/128")
    kernel = [route(6, 255, "fd0e:d6ef:7a00:2::b/128", proto=2), route(4, 255, "198.18.2.11/32", proto=2)]
    found = steering.plan([], [kept] + kernel, {}, set(), TABLE, PRIORITY)
    assert found["routes"] == [kept] and found["kept"] == []


def test_what_edgeft_did_not_add_stays():
    others = [
        rule(4, PRIORITY, 254),                # main at our priority, but not in the agent's form
        rule(4, PRIORITY - 1, 100),            # another table at our priority
        rule(4, PRIORITY + 1, TABLE, proto=4),  # the agent's form, added by someone else
        rule(4, 32766, 254, proto=2),          # the kernel's
        rule(4, PRIORITY + 5, TABLE),          # another priority
    ]
    routes = [route(4, TABLE, "198.18.2.11/32", proto=4), route(4, 254, "198.18.0.0/16", proto=2)]
    found = steering.plan(others, routes, {}, set(), TABLE, PRIORITY)
    assert found["rules"] == [] and found["routes"] == []
    assert found["kept"] == ["rule IPv4 32691: lookup 60919 proto 4: not added by edgeft (protocol 4)",
                             "route IPv4 198.18.2.11/32 table 60919 proto 4: not added by edgeft"]


def test_the_agents_configured_table_and_priority_are_honoured():
    rules = [rule(4, 32600, 1001), rule(4, 32601, 254, suppress=0), rule(4, 32602, 1000)] + EDGEFT_RULES
    found = steering.plan(rules, [route(4, 1000, "198.18.2.11/32"), route(4, TABLE, "198.18.2.12/32")], {}, set(), 1000, 32601)
    assert [r["priority"] for r in found["rules"]] == [32600, 32601, 32602]
    assert [r["dst"] for r in found["routes"]] == ["198.18.2.11/32"]


def test_only_recorded_neighbours_still_managed_are_removed():
    recorded = {("198.18.2.11", "fab0"), ("198.18.2.12", "fab0"), ("198.18.2.13", "fab0")}
    now = {("198.18.2.11", "fab0"): {"managed": True}, ("198.18.2.12", "fab0"): {"managed": False},
           ("198.18.9.9", "fab0"): {"managed": True}}
    assert steering.plan([], [], now, recorded, TABLE, PRIORITY)["neighbors"] == [("198.18.2.11", "fab0")]


@pytest.mark.parametrize("table, priority, message", [
    (254, PRIORITY, "table: 254 must be the agent's backup table"),
    (252, PRIORITY, "table: 252 must be the agent's backup table"),  # its held table would be 253
    (True, PRIORITY, "table: True"),
    (TABLE, 1, "priority: 1 must be the agent's backup rule priority"),
    (TABLE, 32765, "priority: 32765"),
])
def test_bad_steering_options_are_named(monkeypatch, table, priority, message):
    monkeypatch.setattr(steering.os, "geteuid", lambda: 0)
    with pytest.raises(steering.SteeringError, match="^" + message.replace("(", r"\(")):
        steering.check_options({"state_dir": "/var/lib/edgeft", "table": table, "priority": priority})


def test_not_root_is_refused_with_the_fix(monkeypatch):
    monkeypatch.setattr(steering.os, "geteuid", lambda: 1000)
    with pytest.raises(steering.SteeringError, match="must run as root .*: use become: true"):
        steering.check_options({"state_dir": "/var/lib/edgeft", "table": TABLE, "priority": PRIORITY})
    monkeypatch.setattr(footprint.os, "geteuid", lambda: 1000)
    with pytest.raises(footprint.FootprintError, match="must run as root .*: use become: true"):
        footprint.check_options({"state_dir": "/var/lib/edgeft"})


def test_footprint_options_must_be_absolute(monkeypatch):
    monkeypatch.setattr(footprint.os, "geteuid", lambda: 0)
    with pytest.raises(footprint.FootprintError, match="^state_dir: 'edgeft' must be an absolute path"):
        footprint.check_options({"state_dir": "edgeft"})
    with pytest.raises(footprint.FootprintError, match="^pin_root: 'bpf' must be an absolute path"):
        footprint.check_options({"state_dir": "/var/lib/edgeft", "pin_root": "bpf"})


def test_attach_points_come_from_the_recorded_arguments_and_the_clsact_record():
    datapath = {"ebpf_program": {"attach": [{"interface": "fab0", "direction": "egress", "plane": 0, "priority": 7},
                                            {"interface": "fab0", "direction": "ingress", "plane": 0}]}}
    points = footprint.attach_points(datapath, {"fab0", "fab1"})
    assert points == [{"interface": "fab0", "direction": "egress", "priority": 7}, {"interface": "fab0", "direction": "ingress"},
                      {"interface": "fab1", "direction": "egress"}, {"interface": "fab1", "direction": "ingress"}]
    assert footprint.attach_points({}, set()) == []


def test_a_host_that_steers_traffic_is_refused_naming_plane_and_peer():
    up, drained = layout.PLANE_UP, layout.PLANE_UP | layout.PLANE_DRAINED
    planes = [(0, 3, drained), (1, 4, 0), (2, 0, 0)]
    problems = footprint.steering_problems(planes, [(1, 0b01), (2, 0)], ["a", "b"], {1: "r2h1"})
    assert problems[0].startswith("plane a is drained: ") and "plane_state.yml -e edgeft_plane_state=active" in problems[0]
    assert problems[1].startswith("plane b is down ")
    assert problems[2].startswith("peer r2h1 is steered off plane a ")
    assert len(problems) == 3
    assert footprint.steering_problems([(0, 3, up), (1, 4, up)], [(1, 0)], ["a", "b"], {}) == []
    assert footprint.steering_problems([], [(7, 0b10)], [], {})[0].startswith("peer #7 is steered off plane 1 ")


def test_kept_addresses_leave_the_multihome_record():
    record = rec.empty()
    record["interfaces"] = {"fab0": {"addresses": ["198.18.1.11/16", "198.18.255.1/32", "fd0e:d6ef:7a00:1::b/56"],
                                     "mtu_before": None, "down_before": False}}
    ips = addresses.keep_ips(["198.18.1.11/16", "fd0e:d6ef:7a00:1::b"])
    mine, kept = addresses.trimmed(record, ips)
    assert mine["interfaces"]["fab0"]["addresses"] == ["198.18.255.1/32"]
    assert kept == ["198.18.1.11/16 dev fab0", "fd0e:d6ef:7a00:1::b/56 dev fab0"]
    assert record["interfaces"]["fab0"]["addresses"][0] == "198.18.1.11/16"  # the caller's record is untouched
    with pytest.raises(OptionError, match=r"^keep_addresses\[1\]: 'fab0' is not an IP address"):
        addresses.keep_ips(["198.18.1.11", "fab0"])


def test_the_uninstall_puts_back_the_neighbour_limits_peer_table_found(tmp_path, monkeypatch):
    """On a /proc/sys tree of the test's own: the machine's thresholds are not a test's to change."""
    from ansible_collections.edgeft.failover.plugins.module_utils.peers import neighbour_limits as nl
    from ansible_collections.edgeft.failover.plugins.module_utils.uninstall import steering

    # Regular files stand in for /proc/sys, where a write replaces the whole value.
    monkeypatch.setattr(nl.procsys, "write_value", lambda path, value: open(path, "w").write(str(value)))
    proc, state = tmp_path / "proc", tmp_path / "state"
    for family in (4, 6):
        folder = proc / ("net/ipv%d/neigh/default" % family)
        folder.mkdir(parents=True)
        for level, value in ((1, 128), (2, 512), (3, 1024)):
            (folder / ("gc_thresh%d" % level)).write_text("%d\n" % value)
    raised = nl.plan_limits(nl.read_limits(str(proc)), {4: 8192, 6: 0}, "grow")
    nl.apply_limits(raised, str(state), root=str(proc))
    assert nl.read_limits(str(proc))[4] == (128, 8448, 16896)

    changes = steering.limits_to_restore(str(state), proc_sys=str(proc))
    assert changes == {"net.ipv4.neigh.default.gc_thresh2": {"before": 8448, "after": 512},
                       "net.ipv4.neigh.default.gc_thresh3": {"before": 16896, "after": 1024}}
    steering.restore_limits(changes, proc_sys=str(proc))
    assert nl.read_limits(str(proc)) == {4: (128, 512, 1024), 6: (128, 512, 1024)}
    assert steering.limits_to_restore(str(state), proc_sys=str(proc)) == {}
    # Nothing recorded, or a namespace that cannot see the thresholds: nothing to put back.
    assert steering.limits_to_restore(str(tmp_path / "none"), proc_sys=str(proc)) == {}
    assert steering.limits_to_restore(str(state), proc_sys=str(tmp_path / "netns")) == {}
