"""A lab too big for the machine's neighbour tables raises their limits while it is up and
restores the values found when it goes down (lab/edgeft_lab/neighbours.py). The thresholds are
machine-wide: the lab changes them only while it is up, as docs/lab.md says; a lab of 4 hosts
changes nothing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from edgeft_lab import Lab
from edgeft_lab.topology import load_topology
from lab_helpers import assert_nothing_left, needs_root, unique_name

pytestmark = needs_root

SYSCTLS = ["/proc/sys/net/ipv%d/neigh/default/gc_thresh%d" % (family, level) for family in (4, 6) for level in (1, 2, 3)]


def thresholds():
    return [int(Path(path).read_text()) for path in SYSCTLS]


def test_a_16_host_lab_raises_the_neighbour_limits_while_up_and_restores_them_when_down():
    before = thresholds()
    topology = replace(load_topology("default"), hosts_per_rack=(4, 4, 4, 4)).renamed(unique_name())
    lab = Lab(topology)
    try:
        lab.up()
        up = dict(zip(SYSCTLS, thresholds()))
        need = 16 * 15 * 2 + 256  # every host, every other host, both planes; room for the machine's own
        for family in (4, 6):
            assert up["/proc/sys/net/ipv%d/neigh/default/gc_thresh2" % family] >= need
            assert up["/proc/sys/net/ipv%d/neigh/default/gc_thresh3" % family] >= 2 * need
            # gc_thresh1 is left as it was.
            assert up["/proc/sys/net/ipv%d/neigh/default/gc_thresh1" % family] == before[(family // 6) * 3]
    finally:
        lab.down()
    assert_nothing_left(lab.name)
    assert thresholds() == before
