# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""When each path is probed (a mixin of agent.Agent): the cadence of docs/agent.md.

Paths to peers with traffic are probed every interval_ms. The others are probed at most
idle_probes_per_s times a second all together, and each at most every idle_interval_ms: idle
peers cost the same whatever the fabric's size. Which peers have traffic: the data path's stamps,
scanned every ACTIVITY_SCAN_MS, and its wake records (resume.py), which put a peer whose traffic
resumes at the full rate at once; with those the scan, every ACTIVITY_RESCAN_MS, only finds the
peers that went idle. A probe of a path with traffic that is not
answered within confirm_interval_ms is judged missed then, and the path is probed every
confirm_interval_ms until it answers or is judged down: detection is at most one interval plus
multiplier confirmation steps, without a higher steady rate. A path missing probes is probed
at the full rate whatever its traffic until it answers or has missed multiplier of them; a dead
or judged-down path stays at the full rate only while its peer has traffic.
"""

from __future__ import annotations

import selectors

from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import ACTIVITY_RESCAN_MS, ACTIVITY_SCAN_MS
from ansible_collections.edgeft.failover.plugins.module_utils.agent.resume import WakeRecords
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError


class Cadence:
    """Scheduling of the probes; the Agent provides cfg, wheel, paths, active, prober, maps,
    selector."""

    def _probe(self, path, now) -> None:
        path.check(now)
        self.judge_path(path, now)
        if (path.peer_id, path.plane) not in self.paths:
            return  # the peer went away while we judged
        if path.misses or path.alarm:
            path.confirmations += 1
        payload = path.request(self.session, self.clock())
        if not self.prober.send(path.plane, path.family, path.address, payload):
            path.send_errors += 1
        step = self.probe_step(path)
        nxt = path.timer.deadline + step
        if nxt <= now:  # we were late by more than a step: keep the cadence from now
            nxt = now + step
        if step > self.cfg.confirm_interval_ns and path.peer_id in self.active and path.judge.up and not path.misses:
            # A path with traffic: its probe is due back within a confirmation step, not a whole interval.
            due = now + self.cfg.confirm_interval_ns
            path.timer = self.wheel.schedule(due, lambda t, p=path, n=nxt: self._reply_due(p, t, n))
        else:
            path.timer = self.wheel.schedule(nxt, lambda t, p=path: self._probe(p, t))

    def _reply_due(self, path, now, nxt) -> None:
        """A confirmation step after a probe of a path with traffic left: answered, the next probe
        goes at its time; not (or a TCP alarm came meanwhile), the path is probed now: a missed
        probe is judged and the confirmations start."""
        if path.answered >= path.seq and not path.alarm:
            path.timer = self.wheel.schedule(nxt, lambda t, p=path: self._probe(p, t))
        else:
            self._probe(path, now)

    def probe_step(self, path) -> int:
        """ns to the path's next probe: the full rate for peers with traffic and for paths
        confirming a missed probe, the idle budget for the rest; and the confirmation rate while a
        path judged up is under a TCP alarm, or has traffic and missed its latest
        probes (each of which _probe judged a confirmation step after it left)."""
        if path.alarm and path.judge.up and path.misses < path.multiplier:
            return self.cfg.confirm_interval_ns
        if path.peer_id in self.active:
            # Not once the misses reached multiplier: a dead path with nowhere to fail over to
            # (every path of the peer dead) stays at the full rate, not the confirmation rate.
            if 0 < path.misses < path.multiplier and path.judge.up:
                return self.cfg.confirm_interval_ns
            return self.cfg.interval_ns
        # A peer without traffic: a missed probe is confirmed at the full rate, but a dead path
        # (multiplier misses, judged down or not: a powered-off host has nowhere else to go) goes
        # back to the idle budget, so a powered-off rack does not cost every host 100 probes a
        # second per path; traffic to the peer brings the full rate back (wake_peers).
        if 0 < path.misses < path.multiplier:
            return self.cfg.interval_ns
        return self.idle_step_ns

    def _scan_activity(self, now) -> None:
        """Which peers had traffic lately (the data path's last rx/tx stamps); a peer
        that just became active gets its next probes at once, at the full rate."""
        latest = self.maps.last_traffic(self.peers)
        stamp = self.clock()  # the data path stamps CLOCK_MONOTONIC, like self.clock
        active = {pid for pid, t in latest.items() if t and stamp - t <= self.cfg.active_window_ns}
        woken = active - self.active
        self.active = active
        idle_paths = len(self.paths) - sum(len(self.peer_paths(peer_id)) for peer_id in active)
        self.idle_step_ns = self.idle_cycle_ns(idle_paths)
        self.wake_peers(woken, now)

    def idle_cycle_ns(self, idle_paths: int) -> int:
        """ns for the idle budget to probe `idle_paths` paths once: each idle path's step."""
        return max(self.cfg.idle_interval_ns, idle_paths * 1000000000 // self.cfg.idle_probes_per_s)

    def wake_peers(self, peer_ids, now) -> None:
        """Peers that just got traffic: their paths' next probes at once, at the full rate."""
        for peer_id in peer_ids:
            for path in self.peer_paths(peer_id):
                if path.timer is None:
                    continue
                # Not before one interval after the last probe left: it must have had its chance.
                at = max(now, path.sent_ns + self.cfg.interval_ns)
                if path.timer.deadline > at:
                    path.timer.cancel()
                    path.timer = self.wheel.schedule(at, lambda t, p=path: self._probe(p, t))

    def open_wakes(self) -> None:
        """Read the data path's wake records in the loop, when it has them (resume.py)."""
        self.wakes = WakeRecords(self.maps, self.log)
        if self.wakes.open:
            self.selector.register(self.wakes.fileno(), selectors.EVENT_READ, self._on_wakes)

    def _on_wakes(self, _fd) -> None:
        """Peers whose traffic resumed: with traffic from now on, their paths probed at once."""
        resumed = {peer_id for peer_id in self.wakes.read() if peer_id in self.peers} - self.active
        if resumed:
            self.active |= resumed
            self.wake_peers(resumed, self.clock())

    def schedule_activity_scan(self, now) -> None:
        """The next look at the traffic stamps: every ACTIVITY_SCAN_MS, or with the wake records
        (open_wakes first) every ACTIVITY_RESCAN_MS."""
        every_ms = ACTIVITY_RESCAN_MS if self.wakes.open else ACTIVITY_SCAN_MS
        self.wheel.schedule(now + every_ms * 1000000, self._tick_activity)

    def _tick_activity(self, now) -> None:
        try:
            self._scan_activity(now)
        except (OSError, DatapathError) as e:
            self.log.warning("reading the peers' traffic stamps failed: %s", e)
        self.schedule_activity_scan(now)
