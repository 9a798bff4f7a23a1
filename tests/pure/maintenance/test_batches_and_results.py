"""A maintenance run's batches (edgeft_serial, edgeft_max_fail_percentage) and how a switch
reads what the hosts behind it registered, on the lab inventory's plans."""

from __future__ import annotations

import pytest
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader

from ansible_collections.edgeft.failover.plugins.module_utils.maintenance import batches, model, results
from repo import REPO


@pytest.fixture(scope="module")
def lab():
    inv = InventoryManager(loader=DataLoader(), sources=[str(REPO / "inventories" / "lab" / "hosts.yml")])
    return {"groups": {name: [h.name for h in g.get_hosts()] for name, g in inv.groups.items()},
            "hostvars": {h.name: dict(h.get_vars()) for h in inv.get_hosts()}}


@pytest.mark.parametrize("serial, total, sizes", [
    (1, 4, [1, 1, 1, 1]),
    ("2", 4, [2, 2]),
    (3, 4, [3, 1]),
    ("50%", 4, [2, 2]),
    ("10%", 4, [1, 1, 1, 1]),   # rounded down, at least one
    ("100%", 3, [3]),
    ([1, 2], 5, [1, 2, 2]),     # the last size repeats, as a play's serial
    ([1, "50%"], 4, [1, 2, 1]),
    (8, 3, [3]),
])
def test_batch_sizes_read_serial_as_a_play_does(serial, total, sizes):
    assert batches.batch_sizes(serial, total) == sizes


@pytest.mark.parametrize("serial, message", [
    (0, "edgeft_serial: 0 switches per batch would maintain nothing"),
    ("0%", "edgeft_serial: 0% is not a percentage of the switches from 1% to 100%"),
    ("150%", "edgeft_serial: 150% is not a percentage"),
    ("two", "edgeft_serial: 'two' is neither a switch count nor a percentage"),
    ([], "edgeft_serial: an empty list gives no batch size"),
    (-1, "edgeft_serial: -1 is out of range"),
])
def test_a_bad_serial_is_refused_naming_it(serial, message):
    with pytest.raises(model.MaintenanceError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        batches.batch_sizes(serial, 4)


def test_batches_keep_the_order_and_refuse_switches_sharing_a_host(lab):
    plan = model.maintenance_plan("tor-r1-a,tor-r2-a,tor-r1-b,tor-r2-b", lab)
    assert batches.batches(plan["switches"], plan["plans"], 2) == [["tor-r1-a", "tor-r2-a"], ["tor-r1-b", "tor-r2-b"]]
    with pytest.raises(model.MaintenanceError, match="tor-r1-a and tor-r1-b are in the same batch and both serve r1h1 "
                                                     r"\(planes a and b\)"):
        batches.batches(["tor-r1-a", "tor-r1-b"], plan["plans"], 2)


def test_two_switches_of_one_plane_sharing_hosts_go_in_different_batches(lab):
    plan = model.maintenance_plan("spine-b,tor-r1-b", lab)
    with pytest.raises(model.MaintenanceError, match="spine-b and tor-r1-b are in the same batch and both serve r1h1 "
                                                     r"\(plane b\): a host's plane is drained for one switch at a time"):
        batches.batches(plan["switches"], plan["plans"], 2)
    assert batches.batches(plan["switches"], plan["plans"], 1) == [["spine-b"], ["tor-r1-b"]]


def test_members_map_each_host_of_a_batch_to_its_switch(lab):
    plan = model.maintenance_plan("tor-r1-a,tor-r2-a", lab)
    assert batches.members(["tor-r1-a", "tor-r2-a"], plan["plans"]) == {
        "tor-r1-a": "tor-r1-a", "r1h1": "tor-r1-a", "r1h2": "tor-r1-a",
        "tor-r2-a": "tor-r2-a", "r2h1": "tor-r2-a", "r2h2": "tor-r2-a"}
    assert plan["served"] == ["r1h1", "r1h2", "r2h1", "r2h2"]


@pytest.mark.parametrize("batch, active, max_fail, stop", [
    (["s1"], ["s1", "h1"], 0, []),
    (["s1"], ["h1"], 0, ["s1"]),
    (["s1", "s2"], ["s2"], 50, []),           # 1 of 2 is 50 %: allowed
    (["s1", "s2", "s3"], ["s3"], 50, ["s1", "s2"]),
    (["s1", "s2"], [], 100, []),
])
def test_the_run_stops_only_past_max_fail_percentage(batch, active, max_fail, stop):
    assert batches.stop_after(batch, active, max_fail) == stop


def test_max_fail_percentage_is_checked():
    assert batches.max_fail_percentage("25") == 25
    with pytest.raises(model.MaintenanceError, match=r"edgeft_max_fail_percentage: 101 is out of range \(0 to 100\)"):
        batches.max_fail_percentage(101)


def test_a_switch_reads_only_this_steps_results_of_hosts_still_in_the_play():
    registered = {
        "h1": {"changed": False, "planes": []},
        "h2": {"failed": True, "msg": "plane_state: pin_root /x is not a bpffs"},
        "h3": {"skipped": True},
        "h4": {"planes": ["stale, from an earlier batch"]},   # left the play since
        "h5": None,
    }
    active = ["h1", "h2", "h3", "h5"]
    assert results.succeeded(registered, active) == {"h1": {"changed": False, "planes": []}}
    assert results.failures(registered, active) == [
        "h2: plane_state: pin_root /x is not a bpffs",
        "h4: unreachable, or failed before this step",
    ]


def test_a_loop_over_planes_is_read_per_plane():
    registered = {"h1": {"results": [
        {"item": "b", "healthy": True},
        {"item": "c", "failed": True, "healthy": False, "unhealthy_peers": ["h2", "h3"], "attempts": 3},
    ]}}
    assert results.succeeded(registered, ["h1"]) == {"h1": {"b": {"item": "b", "healthy": True}}}
    assert results.failures(registered, ["h1"]) == ["h1 plane c: check probes to h2, h3 were lost, 3 tries"]
