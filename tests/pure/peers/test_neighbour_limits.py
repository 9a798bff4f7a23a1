"""Room in the kernel's neighbour tables for the peer table's managed entries: the sizing, the
refusal, the record of the values found and the raise itself (written to a /proc/sys tree of
the test's own: the machine's thresholds are machine-wide and not a test's to change), and
the error a full table gives."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import iproute
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError
from ansible_collections.edgeft.failover.plugins.module_utils.peers import neighbour_limits as nl

DEFAULTS = {4: (128, 512, 1024), 6: (128, 512, 1024)}


def entries(peers, planes=2, family=4):
    base = "198.18.%d.%d" if family == 4 else "fd00:%x::%x"
    return [(base % (plane, peer), "fab%d" % plane) for plane in range(planes) for peer in range(1, peers + 1)]


def proc_tree(tmp_path):
    for family, levels in DEFAULTS.items():
        folder = tmp_path / ("net/ipv%d/neigh/default" % family)
        folder.mkdir(parents=True)
        for level, value in enumerate(levels, start=1):
            (folder / ("gc_thresh%d" % level)).write_text("%d\n" % value)
    return tmp_path


def test_the_entries_after_a_change_count_what_stays_what_comes_and_not_what_goes():
    current = {("198.18.0.1", "fab0"): {}, ("198.18.0.2", "fab0"): {}, ("fd00::1", "fab0"): {}}
    plan = SimpleNamespace(neigh_add=[("198.18.0.3", "fab0"), ("198.18.0.1", "fab0")], neigh_delete=[("fd00::1", "fab0")])
    assert nl.entries_after(current, plan) == {4: 3, 6: 0}


def test_a_fabric_of_up_to_128_peers_on_two_planes_fits_the_defaults_and_changes_nothing():
    assert nl.plan_limits(DEFAULTS, {4: 0, 6: 0}, "grow") == {}
    assert nl.plan_limits(DEFAULTS, {4: 256, 6: 256}, "grow") == {}


def test_a_large_fabric_raises_gc_thresh2_and_3_of_its_family_and_never_lowers_one():
    changes = nl.plan_limits({4: (128, 512, 1024), 6: (128, 512, 99999)}, {4: 8192, 6: 8192}, "grow")
    need = 8192 + nl.OTHER_NEIGHBOURS
    assert changes == {
        "net.ipv4.neigh.default.gc_thresh2": {"before": 512, "after": need},
        "net.ipv4.neigh.default.gc_thresh3": {"before": 1024, "after": 2 * need},
        "net.ipv6.neigh.default.gc_thresh2": {"before": 512, "after": need},
    }


def test_keep_refuses_a_table_over_gc_thresh3_naming_the_setting_and_lets_a_fitting_one_pass():
    with pytest.raises(OptionError, match=r"neighbor_limits: this host needs 8448 IPv4 neighbour entries .*"
                                          r"net.ipv4.neigh.default.gc_thresh3 is 1024; set neighbor_limits=grow"):
        nl.plan_limits(DEFAULTS, {4: 8192}, "keep")
    assert nl.plan_limits(DEFAULTS, {4: 600}, "keep") == {}


def test_an_unknown_mode_is_refused():
    with pytest.raises(OptionError, match="neighbor_limits: 'shrink' is not one of grow, keep"):
        nl.plan_limits(DEFAULTS, {4: 1}, "shrink")


def test_limits_are_read_where_visible_and_skipped_where_not(tmp_path):
    assert nl.read_limits(proc_tree(tmp_path / "init")) == DEFAULTS
    # Inside a network namespace other than the initial one the files do not exist.
    assert nl.read_limits(tmp_path / "netns") == {}


def test_the_raise_records_the_first_values_found_then_writes_thresh3_first(tmp_path, monkeypatch):
    # Regular files stand in for /proc/sys, where a write replaces the whole value.
    monkeypatch.setattr(nl.procsys, "write_value", lambda path, value: open(path, "w").write(str(value)))
    root, state = proc_tree(tmp_path / "proc"), tmp_path / "state"
    first = nl.plan_limits(nl.read_limits(root), {4: 1000, 6: 0}, "grow")
    nl.apply_limits(first, str(state), root=str(root))
    assert nl.read_limits(root)[4] == (128, 1256, 2512)
    second = nl.plan_limits(nl.read_limits(root), {4: 3000, 6: 0}, "grow")
    nl.apply_limits(second, str(state), root=str(root))
    assert nl.read_limits(root)[4] == (128, 3256, 6512)
    record = json.loads((state / nl.RECORD_FILE).read_text())
    assert record["original"] == {"net.ipv4.neigh.default.gc_thresh2": 512, "net.ipv4.neigh.default.gc_thresh3": 1024}
    assert nl.LimitsRecord(str(state)).original == record["original"]


def test_a_full_table_is_named_as_the_cause_not_the_kernel_version():
    added = entries(600)
    error = iproute.batch_error(added, "RTNETLINK answers: No buffer space available\nCommand failed -:1025\n", 1)
    assert isinstance(error, iproute.NeighbourTableFull)
    text = str(error)
    assert text.startswith("neigh replace %s dev %s managed failed after 1024 of 1200 entries" % added[1024])
    assert "IPv4 neighbour table is full" in text and "net.ipv4.neigh.default.gc_thresh3" in text
    assert "5.16" not in text


def test_other_failures_name_the_entry_and_blame_the_kernel_only_when_it_is_the_cause():
    added = entries(2, family=6)
    missing = iproute.batch_error(added, 'Cannot find device "fab1"\nCommand failed -:3\n', 1)
    assert str(missing) == ('neigh replace %s dev fab1 managed failed after 2 of 4 entries: Cannot find device "fab1"'
                            % added[2][0])
    old = iproute.batch_error(added, 'Error: either "to" is duplicate, or "managed" is a garbage.\nCommand failed -:1\n', 255)
    assert "need Linux >= 5.16 and iproute2 >= 5.16" in str(old) and "after 0 of 4 entries" in str(old)
