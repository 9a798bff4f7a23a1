# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the agent judges its own planes: link events (carrier, admin state) and, on routed
planes, the first hop's answers; a part of Agent (agent.py). Works on the agent's state
(cfg, planes, wheel, steer, log).
"""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.agent import netlink
from ansible_collections.edgeft.failover.plugins.module_utils.agent.firsthop import FirstHop
from ansible_collections.edgeft.failover.plugins.module_utils.agent.judge import Judge
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout


class PlaneWatch:
    def _first_hop(self, spec, now):
        """The plane's gateway to probe (routed planes), in probe_family order; None on L2 planes."""
        order = (4, 6) if self.cfg.probe_family == "auto" else (self.cfg.probe_family,)
        for family in order:
            gateway = spec["gateway"].get(family)
            if gateway and spec.get(family):
                fh = FirstHop(spec["index"], family, gateway, Judge(True, self.cfg.hold_down_ns, self.damp(), now),
                              self.cfg.multiplier, self.log)
                fh.path.timer = self.wheel.schedule(now + self.cfg.interval_ns, lambda t, f=fh: self._probe_first_hop(f, t))
                return fh
        return None

    def _probe_first_hop(self, fh, now) -> None:
        fh.path.check(now)
        self._judge_first_hop(fh, now)
        state = self.planes[fh.plane]
        if fh.open(state.spec, self.cfg.probe_tos, self._watch_probe_socket) is None or not fh.send(self.session, self.clock()):
            fh.path.send_errors += 1
        nxt = fh.path.timer.deadline + self.cfg.interval_ns
        fh.path.timer = self.wheel.schedule(nxt if nxt > now else now + self.cfg.interval_ns,
                                            lambda t, f=fh: self._probe_first_hop(f, t))

    def _judge_first_hop(self, fh, now) -> None:
        """The plane follows its first hop as it follows carrier: down when it stops
        answering (if another plane can take the traffic), up after the hold-down."""
        state = self.planes[fh.plane]
        alive = state.alive
        if alive == state.judge.alive:
            return
        if alive:
            state.judge.observe(True, now)
            self.log.info("plane %s: first hop %s answers again; UP after %d ms of replies", state.name,
                          fh.path.address, max(self.cfg.hold_down_ns, state.judge.damp.reuse_in_ns(now)) // 1000000)
            return
        if not any(s is not state and s.usable and s.alive for s in self.planes.values()):
            return  # nowhere to go (or our own stack is stuck): judged again at the next probe
        state.judge.observe(False, now)
        self._plane_down(state, now, "first hop %s: no reply to %d probes in a row" % (fh.path.address, fh.path.misses))

    def _on_links(self, _sock) -> None:
        now = self.clock()
        events = self.links.read()
        if self.links.overflowed:
            self.links.overflowed = False
            events.extend(netlink.dump_links().items())
        by_ifindex = {s.spec["ifindex"]: s for s in self.planes.values()}
        for ifindex, flags in events:
            state = by_ifindex.get(ifindex)
            if state is None:
                continue
            carrier = flags is not None and netlink.carrier(flags)
            came_back = carrier and not state.carrier
            changed = carrier != state.carrier
            state.carrier = carrier
            if changed:
                self.keep_local_addresses()
            if came_back and state.routes_lost and self.cfg.backup_routes["enabled"]:
                self.sync_routes()
                state.routes_lost = False
            if not state.judge.observe(state.alive, now):
                continue
            nic = state.spec["interface"]
            if not carrier:
                reason = "deleted" if flags is None else ("admin down" if not flags & netlink.IFF_UP else "no carrier")
                # Admin-down (or deletion) makes the kernel delete the routes through the NIC,
                # our backup routes included; mere carrier loss does not.
                state.routes_lost = state.routes_lost or reason != "no carrier"
                if not self._plane_down(state, now, "%s on %s" % (reason, nic)):
                    self.log.info("plane %s: %s on %s again while down: hold-down starts over", state.name, reason, nic)
            else:
                damp = state.judge.damp
                wait = max(self.cfg.hold_down_ns, damp.reuse_in_ns(now))
                self.log.info("plane %s: carrier back on %s; UP again after %d ms of stable carrier%s", state.name, nic,
                              wait // 1000000, " (flap dampening: penalty %d)" % damp.penalty(now) if damp.suppressed(now) else "")

    def _plane_down(self, state, now, reason) -> bool:
        if not state.judge.fail(now):
            return False
        self.steer.set_plane_up(state.index, False)
        state.flags &= ~layout.PLANE_UP
        state.failovers += 1
        self.totals["failovers"] += 1
        self._event(now, "failover", "plane", state.index, reason + " -> every peer's traffic leaves the plane")
        self.hold_routes(state.index, True)
        self.watch_recovery(now)
        return True

    def watch_recovery(self, now) -> None:
        """Check every interval, from now on, whether a plane judged down may fail back."""
        if self.plane_tick is None:
            self.plane_tick = self.wheel.schedule(now + self.cfg.interval_ns, self._tick_planes)

    def _tick_planes(self, now) -> None:
        """Fail back a plane judged down once it was alive for the hold-down. Only while one is
        down: with every plane up there is nothing to check, and an idle agent wakes only for
        its probes, its resync and its look at the traffic stamps."""
        self.plane_tick = None
        for state in self.planes.values():
            if state.judge.recover(now):
                self.steer.set_plane_up(state.index, True)
                state.flags |= layout.PLANE_UP
                if not state.flags & layout.PLANE_DRAINED:  # else the undrain releases them
                    self.hold_routes(state.index, False)
                state.failbacks += 1
                self.totals["failbacks"] += 1
                self._event(now, "failback", "plane", state.index, "%s stable for %d ms (hold-down %d ms)" % (
                    "carrier" if state.first_hop is None else "carrier and first hop", state.judge.stable_for(now) // 1000000,
                    self.cfg.hold_down_ms))
        if not all(state.judge.up for state in self.planes.values()):
            self.watch_recovery(now)
