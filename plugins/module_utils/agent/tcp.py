# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent's side of TCP to fabric peers (docs/tcp.md): it owns the sock_ops program's
attachment for as long as it runs, and turns the program's records (a connection to a peer
retransmitted) into alarms on that peer's paths, which the loop then confirms at once.

The program is an addition, never a condition: when it cannot be attached (no cgroup v2, an old
kernel, a missing object) the agent says why in its log, status and metrics and keeps failing
over as before.
"""

from __future__ import annotations

import selectors

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError

KINDS = {layout.TCP_RTO: "rto", layout.TCP_RETRANS: "retransmission"}


class TcpSignal:
    """State of the TCP program as the agent sees it: off, attached, or failed with a reason."""

    def __init__(self, cfg, pin_root: str, hold_ns: int, log) -> None:
        self.cfg = cfg  # the tcp section (config.py)
        self.program = None
        self.error = None
        self.cgroup = None
        self.by_kind = dict.fromkeys(KINDS.values(), 0)
        if not cfg["enabled"]:
            return
        # Imported here: the program needs libbpf, the rest of the agent does not.
        from ansible_collections.edgeft.failover.plugins.module_utils.datapath import sockops

        settings = sockops.TcpSettings(cfg["rto_min_ms"] * 1000, cfg["delack_max_ms"] * 1000,
                                       hold_ns if cfg["signal"] else 0)
        self.cgroup = sockops.resolve_cgroup(cfg["cgroup"])
        try:
            if self.cgroup is None:
                raise DatapathError("tcp.cgroup: this host has no cgroup v2 hierarchy mounted; mount one or set tcp.enabled false")
            sockops.check_settings(settings, sockops.kernel_hz())
            self.program = sockops.TcpProgram(cfg["object"], pin_root, self.cgroup, settings)
        except (DatapathError, OSError) as e:
            self.error = str(e)
            log.warning("TCP program not attached, failover works without it: %s", e)
            return
        log.info("TCP program attached to cgroup %s: peers' connections get a minimum RTO of %s, a delayed-ACK "
                 "maximum of %s%s", self.cgroup, _setting(cfg["rto_min_ms"]), _setting(cfg["delack_max_ms"]),
                 ", their retransmissions start a confirmation" if cfg["signal"] else "")

    @property
    def attached(self) -> bool:
        return self.program is not None

    def fileno(self) -> int:
        return self.program.fileno()

    def read(self) -> list:
        """Peer ids whose connections retransmitted, in the order of the records."""
        out = []
        for ev in self.program.events():
            self.by_kind[KINDS.get(ev.kind, "retransmission")] += 1
            out.append(ev.peer_id)
        return out

    def counters(self) -> dict:
        return self.program.counters() if self.program is not None else {}

    def status(self) -> dict:
        out = {"enabled": self.cfg["enabled"], "attached": self.attached, "error": self.error, "cgroup": self.cgroup,
               "rto_min_ms": self.cfg["rto_min_ms"], "delack_max_ms": self.cfg["delack_max_ms"],
               "signal": self.cfg["signal"], "signals_received": dict(self.by_kind)}
        if self.attached:
            out["program"] = self.counters()
        return out

    def close(self) -> None:
        if self.program is not None:
            self.program.close()
            self.program = None


class TcpAlarms:
    """The Agent's handling of the TCP program's records (a mixin of agent.Agent)."""

    def open_tcp(self) -> None:
        """Attach the TCP program if configured (hold: one record per peer per probe interval)."""
        self.tcp = TcpSignal(self.cfg.tcp, self.cfg.pin_root, self.cfg.interval_ns, self.log)
        if self.tcp.attached:
            self.selector.register(self.tcp.fileno(), selectors.EVENT_READ, self._on_tcp)

    def _on_tcp(self, _fd) -> None:
        """Records of the TCP program: a connection to a peer retransmitted."""
        try:
            peers = set(self.tcp.read())
        except DatapathError as e:
            self.log.warning("reading the TCP program's records failed: %s", e)
            return
        now = self.clock()
        for peer_id in peers:
            self.alarm(peer_id, now)

    def alarm(self, peer_id, now) -> None:
        """Confirm the peer's paths now: probe each path judged up at once (unless a probe left
        less than a confirmation step ago), then every confirm step until it answers."""
        for path in self.peer_paths(peer_id):
            if not path.judge.up or path.alarm or path.timer is None:
                continue
            path.alarm = True
            path.alarms += 1
            at = max(now, path.sent_ns + self.cfg.confirm_interval_ns)
            if path.timer.deadline > at:
                path.timer.cancel()
                path.timer = self.wheel.schedule(at, lambda t, p=path: self._probe(p, t))


def _setting(ms: int) -> str:
    return "%d ms" % ms if ms else "the kernel's"
