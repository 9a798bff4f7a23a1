"""The agent's probe cadence (agent/cadence.py) on a test's clock: the real Cadence methods,
probe_step, alarm, Path, Judge and TimerWheel, with the socket and the judgement replaced.

One path to PEER on plane 0. A probe leaves when the agent sends it; the peer answers 0.1 ms later
unless silent(send time). Each 0.1 ms step first reads the replies that arrived, then runs the
timers that are due, as the agent's loop does (agent.Agent.turn). Judgement is the path's own:
the loop stops when the path is no longer alive (multiplier probes missed in a row)."""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.agent.agent import Agent
from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import Config
from ansible_collections.edgeft.failover.plugins.module_utils.agent.judge import Dampening, Judge
from ansible_collections.edgeft.failover.plugins.module_utils.agent.path import Path
from ansible_collections.edgeft.failover.plugins.module_utils.agent.tcp import TcpAlarms
from ansible_collections.edgeft.failover.plugins.module_utils.agent.wheel import TimerWheel

MS = 1000000
TICK = MS // 10
PLANES = [{"name": "a", "interface": "fab0", "ipv4": "198.18.1.11"}, {"name": "b", "interface": "fab1", "ipv4": "198.19.1.11"}]
PEER = 7


class _Prober:
    def __init__(self, loop):
        self.loop = loop

    def send(self, _plane, _family, _address, _payload):
        loop = self.loop
        loop.sends.append(loop.now / MS)
        if not loop.silent(loop.now):
            seq = loop.path.seq
            loop.replies.append((loop.now + TICK, seq, loop.path.outstanding[seq][0]))
        return True


class ProbeLoop:
    """Agent-shaped: what Cadence and TcpAlarms use, and the Agent's own methods for them."""

    _probe = Agent._probe
    _reply_due = Agent._reply_due
    probe_step = Agent.probe_step
    alarm = TcpAlarms.alarm

    def __init__(self, active=True, silent=lambda now: False, **settings):
        self.cfg = Config(dict({"planes": PLANES}, **settings))
        self.active = {PEER} if active else set()
        self.idle_step_ns = self.cfg.idle_interval_ns  # one idle path: the budget does not space it further
        self.now = 0
        self.wheel = TimerWheel(0)
        self.session = 1
        self.prober = _Prober(self)
        self.silent = silent
        self.sends, self.replies, self.down_at = [], [], None
        self.path = Path(PEER, 0, 4, "198.18.2.11", Judge(True, self.cfg.hold_down_ns, Dampening(), 0), self.cfg.multiplier)
        self.paths = {(PEER, 0): self.path}
        self.path.timer = self.wheel.schedule(0, lambda t, p=self.path: self._probe(p, t))

    def clock(self):
        return self.now

    def judge_path(self, _path, _now):
        """Judgement is tested elsewhere (test_failover_judgement): here a dead path ends the run."""

    def peer_paths(self, peer_id):
        return [self.path] if peer_id == PEER else []

    def run(self, until_ms, alarm_at_ms=None):
        """Step the clock to until_ms (or until the path is dead); returns self."""
        while self.now <= until_ms * MS:
            for reply in [r for r in self.replies if r[0] <= self.now]:
                self.replies.remove(reply)
                self.path.replied(reply[1], reply[2], reply[0])
            if alarm_at_ms is not None and self.now == alarm_at_ms * MS:
                self.alarm(PEER, self.now)
            for timer in self.wheel.expire(self.now):
                timer.callback(self.now)
            if not self.path.judge.alive:
                self.down_at = self.now / MS
                break
            self.now += TICK
        return self
