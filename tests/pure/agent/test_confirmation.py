"""Fast confirmation: a probe of a path with traffic that is not answered within
confirm_interval_ms is judged missed then, and the path is probed every confirm_interval_ms until
it answers or is judged down, so detection is at most one interval and multiplier confirmation
steps. The agent's own cadence (agent/cadence.py) on the test's clock (probe_loop)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from probe_loop import PEER, ProbeLoop

from ansible_collections.edgeft.failover.plugins.module_utils.agent.agent import Agent
from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import Config
from ansible_collections.edgeft.failover.plugins.module_utils.agent.judge import Dampening, Judge
from ansible_collections.edgeft.failover.plugins.module_utils.agent.path import Path

MS = 1000000
PLANES = [{"name": "a", "interface": "fab0", "ipv4": "198.18.1.11"}, {"name": "b", "interface": "fab1", "ipv4": "198.19.1.11"}]


def config(**settings):
    return Config(dict({"planes": PLANES}, **settings))


def run(active=True, silent_from_ms=0, replies_again_ms=None, until_ms=200, **settings):
    """Probe one path from t=0; the peer answers except the probes sent between silent_from_ms and
    replies_again_ms. Returns (ms from silent_from_ms to the path's judgement down, or None; the
    send times in ms)."""
    def silent(now):
        return now >= silent_from_ms * MS and (replies_again_ms is None or now < replies_again_ms * MS)

    loop = ProbeLoop(active=active, silent=silent, **settings).run(until_ms)
    return (None if loop.down_at is None else loop.down_at - silent_from_ms), loop.sends


def test_a_silent_peer_with_traffic_is_down_three_confirmation_steps_after_its_probe():
    detected, sends = run(silent_from_ms=50)
    assert detected == 3 * 2  # its probe at 50 due back by 52, then two confirmations 2 ms apart
    assert sends[-5:] == [40.0, 50.0, 52.0, 54.0, 56.0]  # the steady rate until the first miss (56: sent as judged)
    # Silence that starts just after a probe: up to one interval more.
    assert run(silent_from_ms=41)[0] == 9 + 6
    # Off (0), or the steady rate: interval x multiplier, as before.
    assert run(confirm_interval_ms=0, silent_from_ms=50)[0] == 30
    assert config().detection_ms == 6 and config(confirm_interval_ms=0).detection_ms == 30


def test_the_steady_rate_is_unchanged_and_one_miss_returns_to_it():
    _detected, sends = run(silent_from_ms=10 ** 6, until_ms=100)  # never silent
    assert sends == [float(t) for t in range(0, 101, 10)]
    # One unanswered probe, then answers: confirmed once, and back to the interval.
    detected, sends = run(silent_from_ms=30, replies_again_ms=31, until_ms=80)
    assert detected is None and sends == [0, 10, 20, 30, 32, 34, 44, 54, 64, 74]


def test_a_peer_without_traffic_is_not_confirmed_faster():
    # Idle peers: probed every idle_interval_ms; a miss brings the path to the interval, not faster.
    detected, sends = run(idle_interval_ms=100, active=False, silent_from_ms=150, until_ms=1000)
    assert sends[:4] == [0, 100, 200, 300] and detected == 50 + 100 + 10 + 10


def test_an_idle_peers_path_confirms_a_miss_at_the_interval_and_goes_back_to_the_budget_once_down():
    """A peer without traffic: a missed probe is confirmed at the full rate, a dead path (judged
    down, or dead on every plane with nowhere to fail over to) is probed within the idle budget
    (a powered-off rack is not probed 100 times a second by every host), and traffic to the peer
    brings the full rate back."""
    cfg = config(idle_interval_ms=1000)
    agent = SimpleNamespace(cfg=cfg, active=set(), idle_step_ns=6 * 1000 * MS)
    path = Path(PEER, 0, 4, "198.18.2.11", Judge(True, cfg.hold_down_ns, Dampening(), 0), cfg.multiplier)
    for misses, step in ((0, 6000), (1, 10), (2, 10), (3, 6000), (40, 6000)):
        path.misses = misses  # dead from 3 on, judged down or not (every plane of a powered-off host)
        assert Agent.probe_step(agent, path) == step * MS, misses
    path.judge.fail(0)
    assert Agent.probe_step(agent, path) == 6000 * MS
    agent.active.add(PEER)
    assert Agent.probe_step(agent, path) == 10 * MS


def test_a_dead_path_with_nowhere_to_go_stays_at_the_interval():
    """Every path of the peer dead: the judge stays up (no failover without somewhere to go), and
    the path is probed at the interval, not at the confirmation rate, however long it lasts."""
    cfg = config()
    agent = SimpleNamespace(cfg=cfg, active={PEER})
    path = Path(PEER, 0, 4, "198.18.2.11", Judge(True, cfg.hold_down_ns, Dampening(), 0), cfg.multiplier)
    for misses, step in ((0, 10), (1, 2), (2, 2), (3, 10), (40, 10)):
        path.misses = misses
        assert Agent.probe_step(agent, path) == step * MS, misses


@pytest.mark.parametrize("value, message", [
    (10, "confirm_interval_ms: 10 ms is not shorter than interval_ms (10 ms)"),
    (-1, "confirm_interval_ms: must be at least 0, got -1"),
])
def test_a_confirmation_not_shorter_than_the_interval_is_refused(value, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        config(confirm_interval_ms=value)
