"""The labs' reservations in the machine's neighbour tables: raised while labs that need it are
up, back to the values found when the last one is down. On a /proc/sys tree and a run root of
the test's own (the machine's thresholds are a lab's to change only while it is up: the
kernel test of a real 16-host lab is tests/kernel/labtool/test_big_lab_neighbour_limits.py)."""

from __future__ import annotations

import pytest
from ansible_collections.edgeft.failover.plugins.module_utils import procsys
from edgeft_lab.neighbours import RECORD, NeighbourLimits, lab_entries

FOUND = {4: (128, 512, 1024), 6: (128, 512, 1024)}


@pytest.fixture
def machine(tmp_path, monkeypatch):
    # Regular files stand in for /proc/sys, where a write replaces the whole value.
    monkeypatch.setattr(procsys, "write_value", lambda path, value: open(path, "w").write(str(value)))
    proc = tmp_path / "proc"
    for family, levels in FOUND.items():
        folder = proc / ("net/ipv%d/neigh/default" % family)
        folder.mkdir(parents=True)
        for level, value in enumerate(levels, start=1):
            (folder / ("gc_thresh%d" % level)).write_text("%d\n" % value)
    run_root = tmp_path / "run"
    run_root.mkdir()

    def read(family):
        folder = proc / ("net/ipv%d/neigh/default" % family)
        return tuple(int((folder / ("gc_thresh%d" % level)).read_text()) for level in (1, 2, 3))

    def lab(name):
        (run_root / name).mkdir()  # an up lab has its run directory
        return name

    return NeighbourLimits(run_root, str(proc)), read, lab, run_root


def test_a_lab_entries_count_every_local_host_for_every_peer_and_plane():
    assert lab_entries(32, 32, {4: 2, 6: 2}) == {4: 1984, 6: 1984}
    assert lab_entries(0, 2, {4: 2, 6: 2}) == {4: 0, 6: 0}  # two VMs: their entries are in their kernels


def test_small_labs_fit_the_machine_and_change_nothing(machine):
    limits, read, lab, run_root = machine
    assert limits.hold(lab("a"), lab_entries(4, 4, {4: 2, 6: 2})) == {}
    assert limits.hold(lab("b"), lab_entries(4, 4, {4: 2, 6: 2})) == {}
    assert read(4) == FOUND[4] and read(6) == FOUND[6]
    assert limits.release("a") == {} and limits.release("b") == {}
    assert not (run_root / RECORD).exists()


def test_big_labs_raise_while_up_and_the_last_down_restores_what_was_found(machine):
    limits, read, lab, run_root = machine
    big = lab_entries(32, 32, {4: 2, 6: 2})[4]
    assert limits.hold(lab("big"), lab_entries(32, 32, {4: 2, 6: 2})) == {
        "net.ipv4.neigh.default.gc_thresh2": big + 256, "net.ipv4.neigh.default.gc_thresh3": 2 * (big + 256),
        "net.ipv6.neigh.default.gc_thresh2": big + 256, "net.ipv6.neigh.default.gc_thresh3": 2 * (big + 256)}
    limits.hold(lab("small"), lab_entries(4, 4, {4: 2, 6: 2}))
    assert read(4) == (128, big + 24 + 256, 2 * (big + 24 + 256))  # the two labs together
    limits.release("big")
    assert read(4) == FOUND[4]  # the small lab alone fits what was found
    assert (run_root / RECORD).exists()
    limits.release("small")
    assert read(4) == FOUND[4] and read(6) == FOUND[6]
    assert not (run_root / RECORD).exists()


def test_a_holder_whose_lab_is_gone_is_dropped_at_the_next_change(machine):
    limits, read, lab, run_root = machine
    limits.hold(lab("crashed"), lab_entries(32, 32, {4: 2, 6: 2}))
    (run_root / "crashed").rmdir()  # its run was killed and its directory removed by hand
    limits.hold(lab("next"), lab_entries(4, 4, {4: 2, 6: 2}))
    assert read(4) == FOUND[4]
    limits.release("next")
    assert not (run_root / RECORD).exists()
