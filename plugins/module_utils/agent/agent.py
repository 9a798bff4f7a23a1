# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent: one event loop (selectors/epoll) and a timer wheel.

Inputs: link events (netlink), probe replies (one socket per plane and
family), timers (one per probed path, plus plane hold-down checks, a scan of
which peers have traffic, and a periodic resync with the maps),
metrics/status requests.

Probing costs scale with the peers a host talks to, not with the fabric:
paths to peers with traffic in the last active_window_ms are probed every
interval_ms, the others within a budget of idle_probes_per_s for them all
(and at the full rate again as soon as one probe goes unanswered or traffic
starts: the data path's wake records, resume.py). A path with traffic
whose probe is not answered within confirm_interval_ms is judged missed then,
and probed every confirm_interval_ms until it answers or is judged down: a
failure is confirmed without a higher steady rate.
A retransmission of a TCP connection to a peer (the sock_ops program, tcp.py)
raises an alarm on the peer's paths: each is probed at once and then every
confirm_interval_ms until it answers, so a path that lost a segment is
confirmed in the time of the connection's first retransmission.
Outputs: the plane UP flags and the peers' judged down bits in the pinned
maps, backup routes, log lines, metrics.

Start-up reads the state it left in the maps and changes it only on evidence,
so a restart never flaps anything; while the agent is dead, the data path
keeps forwarding as last told.
"""

from __future__ import annotations

import collections
import os
import random
import selectors
import signal
import time

from ansible_collections.edgeft.failover.plugins.module_utils.agent import exposition, metrics, netlink
from ansible_collections.edgeft.failover.plugins.module_utils.agent.cadence import Cadence
from ansible_collections.edgeft.failover.plugins.module_utils.agent.endpoint import Endpoint
from ansible_collections.edgeft.failover.plugins.module_utils.agent.judge import Dampening, Judge
from ansible_collections.edgeft.failover.plugins.module_utils.agent.names import PeerNames
from ansible_collections.edgeft.failover.plugins.module_utils.agent.path import Path
from ansible_collections.edgeft.failover.plugins.module_utils.agent.planewatch import PlaneWatch
from ansible_collections.edgeft.failover.plugins.module_utils.agent.prober import Prober
from ansible_collections.edgeft.failover.plugins.module_utils.agent.routekeeper import RouteKeeper
from ansible_collections.edgeft.failover.plugins.module_utils.agent.steer import Steering
from ansible_collections.edgeft.failover.plugins.module_utils.agent.tcp import TcpAlarms
from ansible_collections.edgeft.failover.plugins.module_utils.agent.wheel import TimerWheel
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout, probe
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError

EVENT_LOG = 500  # recent state changes kept for status


class PlaneState:
    def __init__(self, spec, judge, flags):
        self.spec = spec
        self.index = spec["index"]
        self.name = spec["name"]
        self.judge = judge
        self.flags = flags  # last read or written data path flags
        self.failovers = 0
        self.failbacks = 0
        self.routes_lost = False  # backup routes through this NIC need re-adding
        self.carrier = judge.alive
        self.first_hop = None  # FirstHop of a routed plane

    @property
    def alive(self) -> bool:
        """Carrier, and the first hop (if probed) answering."""
        return self.carrier and (self.first_hop is None or self.first_hop.path.judge.alive)

    @property
    def usable(self) -> bool:
        """Judged up here and not drained: traffic may be moved onto it."""
        return self.judge.up and not self.flags & layout.PLANE_DRAINED


class Agent(Cadence, PlaneWatch, RouteKeeper, TcpAlarms):
    """The agent; when it probes (with the data path's wake records, resume.py), its plane
    judgement, its routes and its TCP alarms are in cadence.py, planewatch.py, routekeeper.py
    and tcp.py."""

    def __init__(self, cfg, maps, planes, log, clock=time.monotonic_ns):
        self.cfg = cfg
        self.log = log
        self.clock = clock
        self.steer = Steering(maps, cfg.pin_root)
        self.maps = maps
        self.plane_specs = planes
        self.session = random.getrandbits(32)
        self.pid = os.getpid()  # status shows the agent's, not the render child's (endpoint.py)
        self.started = clock()
        self.selector = selectors.DefaultSelector()
        self.wheel = TimerWheel(self.started)
        self.prober = Prober(planes, cfg.probe_tos, log, self._watch_probe_socket, self._unwatch)
        self.names = PeerNames(cfg.state_dir, cfg.pin_root, cfg.peer_names, log)
        self.peer_names = {}
        self.peers = {}  # id -> get_peer() as of the last resync
        self.active = set()  # peer ids with traffic (either way) within the active window
        self.idle_step_ns = cfg.idle_interval_ns  # between two probes of a path without traffic (cadence.py)
        self.paths = {}  # (peer id, plane) -> Path
        self.by_address = {}  # (plane, family, address) -> Path
        self.planes = {}
        self.events = collections.deque(maxlen=EVENT_LOG)
        self.totals = {"failovers": 0, "failbacks": 0}
        self.retired = {}  # plane -> {counter: what removed paths had counted} (agent/metrics.py)
        self.loop_lag_max_ns = 0
        self.stopping = False
        self.links = None
        self.endpoint = None
        self.route_errors = []
        self.route_want = {}  # routes.desired() as of the last sync
        self.routes_due = True  # the first resync installs them whatever the peers
        self.tcp = None  # TcpSignal, from start()
        self.wakes = None  # WakeRecords, from start()
        self.plane_tick = None  # the timer of the planes' failback checks while one is down (planewatch.py)
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    # ------------------------------------------------------------- helpers
    def damp(self) -> Dampening:
        d = self.cfg.dampening
        return Dampening(d["enabled"], d["penalty"], d["suppress"], d["reuse"], d["half_life_ms"], d["max_suppress_ms"])

    def _event(self, now, kind, scope, plane, reason, peer=None):
        """One line per state change, with the reason; also kept for status."""
        entry = {"t_ns": now, "kind": kind, "scope": scope, "plane": self.planes[plane].name, "reason": reason}
        if peer is not None:
            entry["peer"] = self.peer_names.get(peer, "#%d" % peer)
        self.events.append(entry)
        what = "path %s/%s" % (entry["peer"], entry["plane"]) if peer is not None else "plane %s (%s)" % (
            entry["plane"], self.planes[plane].spec["interface"])
        self.log.info("%s %s: %s", what, kind, reason)

    def _watch_probe_socket(self, sock) -> None:
        self.selector.register(sock, selectors.EVENT_READ, self._on_probe_readable)

    def _unwatch(self, sock) -> None:
        try:
            self.selector.unregister(sock)
        except (KeyError, ValueError):
            pass

    # ------------------------------------------------------------- start-up
    def start(self) -> None:
        now = self.clock()
        self.links = netlink.LinkMonitor()  # subscribe before the dump: no event is lost in between
        self.selector.register(self.links.sock, selectors.EVENT_READ, self._on_links)
        self.selector.register(self._wake_r, selectors.EVENT_READ, self._on_wake)
        flags_now = netlink.dump_links()
        for spec in self.plane_specs:
            slot = self.steer.plane(spec["index"])
            up = bool(slot.flags & layout.PLANE_UP)
            carrier = netlink.carrier(flags_now.get(spec["ifindex"], 0))
            judge = Judge(up, self.cfg.hold_down_ns, self.damp(), now, alive=carrier)
            self.planes[spec["index"]] = PlaneState(spec, judge, slot.flags)
            self.planes[spec["index"]].first_hop = self._first_hop(spec, now)
            if up and not carrier:
                self._plane_down(self.planes[spec["index"]], now, "no carrier on %s at start" % spec["interface"])
            elif not up and carrier:
                self.log.info("plane %s: UP flag clear at start with carrier on %s: set again after %d ms of stable carrier",
                              spec["name"], spec["interface"], self.cfg.hold_down_ms)
        self.keep_local_addresses()  # as the NICs are now (a restart keeps or removes the last agent's)
        self.resync(now)
        self.open_wakes()  # before the first scan: traffic that resumes between the two is not missed
        self._scan_activity(now)
        self.open_tcp()
        if self.cfg.metrics_listen:
            self.endpoint = self.open_endpoint(self.cfg.metrics_listen)
        now = self.clock()
        self.watch_recovery(now)  # a plane may start judged down; the first check stops if none is
        self.wheel.schedule(now + self.cfg.resync_ms * 1000000, self._tick_resync)
        self.schedule_activity_scan(now)
        self.log.info("started: %d plane(s), %d peer(s), %d path(s); %s", len(self.planes), len(self.peers),
                      len(self.paths), self.cfg.summary())

    def open_endpoint(self, address) -> Endpoint:
        """/metrics and /status on address; /metrics renders at most once per metrics_min_interval_ms."""
        return Endpoint(address, self.selector, self._routes_http(), self.clock, self.log,
                        spacing={"/metrics": self.cfg.metrics_min_interval_ms * 1000000})

    def _routes_http(self) -> dict:
        """Called in the endpoint's render child (forkrender.py): a snapshot of this agent, off the loop."""
        from ansible_collections.edgeft.failover.plugins.module_utils.agent import report

        return {
            "/metrics": lambda: (exposition.CONTENT_TYPE, metrics.metrics(self).encode()),
            "/status": lambda: ("application/json", report.status_json(self).encode()),
        }

    # ------------------------------------------------------------- resync
    def probe_target(self, peer, plane):
        """(family, peer address) to probe on plane, or None."""
        spec = self.plane_specs[plane]
        order = (4, 6) if self.cfg.probe_family == "auto" else (self.cfg.probe_family,)
        for family in order:
            addr = peer["v4" if family == 4 else "v6"][plane]
            if addr and spec.get(family):
                return family, addr
        return None

    def resync(self, now) -> None:
        """Follow the peer table (added/removed peers, changed addresses); routes follow
        when the table changed. The paths are worked out again only then: a table whose
        peers changed only their steering (learned or down bits) costs a read and a compare."""
        peers = self.steer.peers()
        changed = self.routes_due or peers.keys() != self.peers.keys() or any(
            peer["v4"] + peer["v6"] != self.peers[pid]["v4"] + self.peers[pid]["v6"]
            for pid, peer in peers.items() if peer is not self.peers[pid])
        self.peer_names = self.names.names(peers)
        for state in self.planes.values():
            state.flags = self.steer.plane(state.index).flags
        self.peers = peers
        if changed:
            if self.cfg.backup_routes["enabled"]:
                self.sync_routes()  # before new paths are scheduled: it runs `ip` a few times
            self._follow_paths(peers, now)
            self.routes_due = False
        self._check_learned(now)

    def _follow_paths(self, peers, now) -> None:
        """One path per peer and plane with an address to probe: new ones scheduled, gone or
        readdressed ones dropped."""
        wanted = {}
        for peer_id, peer in peers.items():
            for plane in self.planes:
                target = self.probe_target(peer, plane)
                if target is not None:
                    wanted[(peer_id, plane)] = target
        for key in list(self.paths):
            path = self.paths[key]
            if wanted.get(key) != (path.family, path.address):
                self._drop_path(path)
        # A judged down bit is not re-asserted here: the data path clears the arrival plane's bit
        # when the peer steers onto it (that traffic proves the plane), and that is its call.
        new = [(key, target) for key, target in sorted(wanted.items()) if key not in self.paths]
        busy = [item for item in new if item[0][0] in self.active]
        idle = [item for item in new if item[0][0] not in self.active]
        # The first probes spread so that none leave in a burst: the paths of peers with traffic
        # over one interval, the others at the idle budget's rate (at 4,096 peers a start would
        # otherwise send 8,190 probes in its first interval). At start no peer is known to have
        # traffic yet: the first scan of the stamps brings those peers' probes forward (wake_peers).
        for items, spread_ns in ((busy, self.cfg.interval_ns), (idle, self.idle_cycle_ns(len(idle)))):
            for i, (key, (family, addr)) in enumerate(items):
                self._add_path(key, family, addr, peers[key[0]], now, spread_ns * i // len(items))

    def _check_learned(self, now) -> None:
        """Forget learned down bits that our own probes contradict.

        A learned bit says "the peer keeps off this plane". Two hosts can end up
        echoing each other (each fails back while the other still steers, and
        learns from its packets after the hold), and then neither sends on the
        plane natively again, so neither unlearns. A probe round trip on the
        path, answered without a break for the hold-down, shows the plane works
        both ways: then the bit is an echo, and we send natively again, which
        makes the peer unlearn its own echo. A real failure or a drain never
        passes this test (probes fail; a drained plane does not answer them).
        """
        for (peer_id, plane), path in self.paths.items():
            peer = self.peers.get(peer_id)
            if peer is None or plane not in peer["learned_planes"]:
                continue
            if not (path.healthy and path.judge.stable_for(now) >= self.cfg.hold_down_ns):
                continue
            if self.steer.forget_learned(peer_id, plane):
                reason = "own probes answered for %d ms: the peer's steering off the plane was an echo -> traffic back on plane %s" % (
                    path.judge.stable_for(now) // 1000000, self.planes[plane].name)
                self._event(now, "unlearned", "path", plane, reason, peer=peer_id)

    def _add_path(self, key, family, addr, peer, now, first_in_ns) -> None:
        peer_id, plane = key
        bit = 1 << plane
        judged_down = bool(peer["down_planes"] and plane in peer["down_planes"] and plane not in peer["learned_planes"])
        path = Path(peer_id, plane, family, addr, Judge(not judged_down, self.cfg.hold_down_ns, self.damp(), now),
                    self.cfg.multiplier)
        if judged_down:
            self.log.info("path %s/%s: down in the maps at start (down_mask 0x%x): fails back after %d ms of replies",
                          self.peer_names.get(peer_id), self.planes[plane].name, bit, self.cfg.hold_down_ms)
        self.paths[key] = path
        self.by_address[(plane, family, addr)] = path
        path.timer = self.wheel.schedule(self.clock() + first_in_ns, lambda t, p=path: self._probe(p, t))

    def _drop_path(self, path) -> None:
        if path.timer is not None:
            path.timer.cancel()
        retired = self.retired.setdefault(path.plane, {})
        for counter in metrics.PATH_COUNTERS:
            retired[counter] = retired.get(counter, 0) + getattr(path, counter)
        self.paths.pop((path.peer_id, path.plane), None)
        self.by_address.pop((path.plane, path.family, path.address), None)

    # ------------------------------------------------------------- loop
    def run(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        try:
            while not self.stopping:
                self.turn()
        finally:
            self.close()

    def turn(self) -> None:
        now = self.clock()
        deadline = self.wheel.next_deadline()
        render = self.endpoint.next_due() if self.endpoint is not None else None
        if render is not None:
            deadline = render if deadline is None else min(deadline, render)
        timeout = 1.0 if deadline is None else max(0.0, (deadline - now) / 1e9)
        for key, _mask in self.selector.select(timeout):
            key.data(key.fileobj)
        # Every reply that arrived is read before any probe is judged missing.
        self._drain_probes()
        now = self.clock()
        for timer in self.wheel.expire(now):
            self.loop_lag_max_ns = max(self.loop_lag_max_ns, now - timer.deadline)
            timer.callback(now)
        if self.endpoint is not None:
            self.endpoint.expire(now)

    def _on_signal(self, signum, _frame) -> None:
        self.stopping = True
        self.log.info("stopping on signal %d; the data path keeps its state", signum)
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def _on_wake(self, _fd) -> None:
        try:
            os.read(self._wake_r, 64)
        except OSError:
            pass

    def close(self) -> None:
        if self.endpoint is not None:
            self.endpoint.close()
        self.prober.close()
        if self.tcp is not None:
            self.tcp.close()
        if self.wakes is not None:
            self.wakes.close()
        for state in self.planes.values():
            if state.first_hop is not None:
                state.first_hop.close(self._unwatch)
        if self.links is not None:
            self.links.close()
        self.selector.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    # ------------------------------------------------------------- probes
    def _on_probe_readable(self, _sock) -> None:
        """Replies are read in _drain_probes, right after select returns."""

    def _drain_probes(self) -> None:
        for state in self.planes.values():
            if state.first_hop is not None and state.first_hop.sock is not None:
                state.first_hop.receive(self.session, self.clock())
        for (plane, family), sock in list(self.prober.socks.items()):
            got = self.prober.receive(sock)
            if not got:
                continue
            now = self.clock()
            for data, source in got:
                reply = probe.parse_reply(data)
                path = self.by_address.get((plane, family, source))
                if reply is None or path is None or reply[0] != self.session:
                    continue
                path.replied(reply[1], reply[2], now)

    # ------------------------------------------------------------- judgement
    def judge_path(self, path, now) -> None:
        judge = path.judge
        plane = self.planes[path.plane]
        if judge.up and not judge.alive:
            # Move only when there is somewhere to go: a path to the same peer on
            # another plane, judged up and answering right now. When every path
            # of a peer dies at once (the peer is down, or our own stack
            # stalls), moving helps nothing and would only have to be undone.
            others = sorted((p for p in self.peer_paths(path.peer_id) if p is not path and p.healthy
                             and self.planes[p.plane].usable), key=lambda p: p.plane)
            if not others:
                return
            judge.fail(now)
            path.alarm = False
            path.failovers += 1
            self.totals["failovers"] += 1
            active = self.steer.path_down(path.peer_id, path.plane, [p.plane for p in others])
            self.hold_path_routes(path, True)
            since = (now - path.last_reply_ns) // 1000000 if path.last_reply_ns else None
            self._event(now, "failover", "path", path.plane,
                        "no reply to %d probes in a row (last reply %s ago) -> traffic to plane %s" % (
                            path.misses, "%d ms" % since if since is not None else "never",
                            self.planes[active].name if active is not None and active in self.planes else "?"),
                        peer=path.peer_id)
        elif judge.recover(now):
            path.failbacks += 1
            self.totals["failbacks"] += 1
            self.steer.path_up(path.peer_id, path.plane)
            self.hold_path_routes(path, False)
            self._event(now, "failback", "path", path.plane,
                        "replies for %d ms without a break (hold-down %d ms), rtt %.3f ms -> traffic back on plane %s" % (
                            judge.stable_for(now) // 1000000, self.cfg.hold_down_ms, (path.rtt_avg_ns or 0) / 1e6, plane.name),
                        peer=path.peer_id)

    def peer_paths(self, peer_id):
        # One lookup per plane, not a scan of every path: it runs for each probe of a dead path
        # and for each peer in /status, which made both quadratic in the peers.
        return [self.paths[(peer_id, plane)] for plane in sorted(self.planes) if (peer_id, plane) in self.paths]

    def _tick_resync(self, now) -> None:
        try:
            self.resync(now)
        except (OSError, DatapathError) as e:
            self.log.warning("resync with the maps failed: %s", e)
        self.wheel.schedule(now + self.cfg.resync_ms * 1000000, self._tick_resync)
