"""Idle peers share one probe budget (agent/cadence.py): a host's probes per second follow the
peers it talks to, not the fabric's size. The agent's own scan of the traffic stamps, over a
stand-in for the pinned maps (no BPF here; tests/lab/agent measures the real agent's rates)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.agent.cadence import Cadence
from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import Config

PLANES = [{"name": "a", "interface": "fab0", "ipv4": "198.18.1.11/16"},
          {"name": "b", "interface": "fab1", "ipv4": "198.19.1.11/16"}]
NOW = 10 ** 12
S = 10 ** 9


class Scanner:
    """Agent-shaped for Cadence._scan_activity: peers with two paths each, `talking` of them with
    fresh stamps."""

    _scan_activity = Cadence._scan_activity
    idle_cycle_ns = Cadence.idle_cycle_ns
    wake_peers = Cadence.wake_peers

    def __init__(self, peers, talking, **settings):
        self.cfg = Config(dict({"planes": PLANES}, **settings))
        self.peers = {p: {} for p in range(peers)}
        self.paths = {(p, plane): SimpleNamespace(timer=None, sent_ns=0) for p in self.peers for plane in (0, 1)}
        self.active = set()
        self.idle_step_ns = self.cfg.idle_interval_ns
        stamps = {p: (NOW - 1000 if p < talking else 0) for p in self.peers}
        self.maps = SimpleNamespace(last_traffic=lambda ids: {p: stamps[p] for p in ids})

    def clock(self):
        return NOW

    def peer_paths(self, peer_id):
        return [self.paths[(peer_id, plane)] for plane in (0, 1)]


@pytest.mark.parametrize("fabric, step_s", [(4, 1.0), (64, 6.1), (4096, 409.3)])
def test_idle_paths_share_the_budget_whatever_the_fabric(fabric, step_s):
    """A host of a fabric of `fabric` hosts talking to two of them: its idle paths together get
    at most idle_probes_per_s (20) probes a second, each at most one a second."""
    agent = Scanner(fabric - 1, talking=2)
    agent._scan_activity(NOW)
    assert agent.active == {0, 1}
    idle_paths = 2 * (fabric - 3)
    assert agent.idle_step_ns == pytest.approx(step_s * S, rel=1e-3)
    assert idle_paths * S / agent.idle_step_ns <= 20


def test_the_budget_is_a_setting_and_idle_interval_ms_the_shortest_step():
    agent = Scanner(63, talking=2, idle_probes_per_s=1000)
    agent._scan_activity(NOW)
    assert agent.idle_step_ns == 1 * S  # 122 idle paths fit in 1000 a second: idle_interval_ms rules
    agent = Scanner(63, talking=2, idle_probes_per_s=1, idle_interval_ms=5000)
    agent._scan_activity(NOW)
    assert agent.idle_step_ns == 122 * S


def test_peers_that_start_talking_leave_the_budget():
    agent = Scanner(63, talking=62)
    agent._scan_activity(NOW)
    assert agent.idle_step_ns == 1 * S  # one idle peer left: its two paths every second


def first_probes(peers, talking):
    """When a real Agent (no maps, no sockets: only its schedule) first probes each path of
    `peers` new peers, `talking` of which have traffic: {(peer, plane): ns after now}."""
    from ansible_collections.edgeft.failover.plugins.module_utils.agent.agent import Agent

    agent = Agent(Config({"planes": PLANES, "state_dir": None}), maps=None, planes=[{4: True}, {4: True}], log=None,
                  clock=lambda: NOW)
    try:
        agent.planes = {0: SimpleNamespace(name="a", first_hop=None), 1: SimpleNamespace(name="b", first_hop=None)}
        agent.active = set(range(talking))
        table = {p: {"v4": ["198.18.%d.%d" % divmod(p + 2, 256), "198.19.%d.%d" % divmod(p + 2, 256)], "v6": [None, None],
                     "down_planes": [], "learned_planes": []} for p in range(peers)}
        agent._follow_paths(table, NOW)
        return {key: path.timer.deadline - NOW for key, path in agent.paths.items()}
    finally:
        agent.close()


def test_a_start_with_a_large_table_probes_idle_paths_at_the_budgets_pace():
    """4,095 peers of which 2 talk: their 4 paths are probed within the first interval (10 ms),
    the 8,186 others no faster than idle_probes_per_s (20), not all in the first interval."""
    first = first_probes(4095, talking=2)
    busy = [at for (peer, _plane), at in first.items() if peer < 2]
    idle = sorted(at for (peer, _plane), at in first.items() if peer >= 2)
    assert len(busy) == 4 and max(busy) < 10 * 10 ** 6
    assert len(idle) == 8186
    assert min(b - a for a, b in zip(idle, idle[1:])) >= S // 20 - 1
    assert idle[-1] == pytest.approx(8186 * S / 20, rel=1e-3)


def test_a_small_fabric_probes_its_idle_paths_within_idle_interval_ms():
    first = first_probes(3, talking=0)
    assert max(first.values()) < 1 * S and len(set(first.values())) == 6
