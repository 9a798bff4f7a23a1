"""A ToR drained and powered off under traffic on a 16-host lab (4 racks of 4), with a lab of its
own (the test is about a fabric larger than the shared one): the drain's host steps run on the 4
hosts behind the switch only, the 12 others learn it in-band, and no datagram is lost, neither by
peers streaming through the drain nor by peers idle towards the hosts behind the switch until
after the power-off, of both families: what the drain's echo taught them in-band (no module ran
on them) carries every packet over plane b."""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace

import pytest

from deploy_helpers import run_maintenance, run_playbook
from deployed import undeployed_lab
from edgeft_lab.topology import load_topology
from edgeft_lab.traffic import UdpStream

SWITCH = 'tor-r1-a'
BEHIND = {'r1h1', 'r1h2', 'r1h3', 'r1h4'}


@pytest.fixture
def fabric16(tmp_path):
    topology = replace(load_topology('default'), hosts_per_rack=(4, 4, 4, 4))
    with undeployed_lab(tmp_path, 'f16', 'the 16-host maintenance test', topology=topology) as lab:
        yield lab


def maintain(lab, playbook, work_dir):
    """(return code, output, recap, [(switch, status, lost packets)] of the report)."""
    rc, out, recap, report = run_maintenance(lab, playbook, SWITCH, work_dir)
    return rc, out, recap, [(r['switch'], r['status'], r.get('lost_packets')) for r in report or []]


def test_a_drained_tor_is_powered_off_under_traffic_without_a_loss(fabric16, tmp_path):
    lab = fabric16
    # Every host at once: the rollout's canary and batches are site.yml's tests' concern.
    rc, out, recap = run_playbook(lab.inventory_path, 'playbooks/site.yml', '-e', 'edgeft_rollout_canary=false',
                                  '-e', 'edgeft_rollout_batch=100%')
    assert rc == 0 and len(recap) == 16, out[-6000:]
    # Streams to hosts behind the switch on its plane's addresses, from other racks, both families.
    through = [UdpStream(lab, 'r2h1', 'r1h1', plane='a', family=4, pps=1000),
               UdpStream(lab, 'r3h2', 'r1h2', plane='a', family=6, pps=1000),
               UdpStream(lab, 'r4h3', 'r1h3', plane='a', family=4, pps=1000)]
    # Idle towards the hosts behind the switch through the whole drain; they start sending once
    # it is off.
    late = [UdpStream(lab, 'r4h4', 'r1h4', plane='a', family=6, pps=1000),
            UdpStream(lab, 'r2h4', 'r1h3', plane='a', family=4, pps=1000)]
    with contextlib.ExitStack() as streams:
        for stream in through:
            streams.enter_context(stream)
        rc, out, recap, report = maintain(lab, 'switch_drain', tmp_path / 'drain')
        assert rc == 0, out[-6000:]
        assert report == [(SWITCH, 'drained', 0)], report
        assert set(recap) - {'localhost'} == BEHIND | {SWITCH}, sorted(recap)  # no host step elsewhere
        assert 'each confirmed in-band' in out, out[-4000:]
        fault = lab.power_off(SWITCH)
        try:
            time.sleep(1.0)
            with late[0], late[1]:
                time.sleep(1.0)
        finally:
            lab.repair(fault)
    rc, out, _recap, report = maintain(lab, 'switch_undrain', tmp_path / 'undrain')
    assert rc == 0, out[-6000:]
    assert [row[:2] for row in report] == [(SWITCH, 'done')], report
    for result in [s.result() for s in through + late]:
        print(result.summary())
        assert result.sent >= 900 and result.lost == 0 and result.socket_drops == 0, result.summary()
