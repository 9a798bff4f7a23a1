# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent's Prometheus metrics, in a number of series that does not grow with the fabric.

Per plane: the data path's counters and flags, and aggregates over every path of the plane
(paths up and down, peers steered off it, probes, replies, failovers, worst loss and RTT),
counted in memory; counters keep what removed peers had counted, so they never go back. Per
peer, series of its own only while they are few: every peer when the fabric has at most
`metrics_peers` of them, otherwise only peers in an abnormal state (a path failed over or
missing probes, a plane in its down mask), worst first, at most `metrics_peers`. A healthy
large fabric therefore exports the same series at every scrape (no churn in the time-series
database), and the maps are read for the shown peers only.
"""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.agent.exposition import Family, render
from ansible_collections.edgeft.failover.plugins.module_utils.constants import VERSION
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout

# Path counters summed per plane (the agent keeps those of removed paths in `retired`).
PATH_COUNTERS = ("sent", "confirmations", "received", "rejected", "failovers", "failbacks")


def _age_s(now, stamp):
    return None if not stamp else max(0, now - stamp) / 1e9


class _Families:
    def __init__(self):
        self.by_name = {}

    def __call__(self, name, kind, help_text):
        if name not in self.by_name:
            self.by_name[name] = Family(name, kind, help_text)
        return self.by_name[name]


def shown_peers(agent) -> list:
    """The peer ids with series of their own (module docstring): worst first, then by id."""
    limit = agent.cfg.metrics_peers
    if len(agent.peers) <= limit:
        return sorted(agent.peers)
    severity = {}
    for (peer_id, _plane), path in agent.paths.items():
        if not path.judge.up or path.misses:
            severity[peer_id] = severity.get(peer_id, 0) + (100 if not path.judge.up else 0) + (1 if path.misses else 0)
    for peer_id, st in agent.peers.items():
        steered = len(st.get("down_planes") or ()) + len(st.get("learned_planes") or ())
        if steered:
            severity[peer_id] = severity.get(peer_id, 0) + 10 * steered
    return sorted(sorted(severity, key=lambda pid: (-severity[pid], pid))[:limit])


def _agent(fam, agent, now, shown):
    fam("edgeft_build_info", "gauge", "The agent's edgeft version (always 1)").add(1, version=VERSION)
    fam("edgeft_agent_failovers_total", "counter", "Failovers since start (plane carrier losses and path failures)").add(agent.totals["failovers"])
    fam("edgeft_agent_failbacks_total", "counter", "Failbacks since start (after the hold-down)").add(agent.totals["failbacks"])
    fam("edgeft_agent_uptime_seconds", "gauge", "Seconds since the agent started").add((now - agent.started) / 1e9)
    fam("edgeft_agent_peers", "gauge", "Peers in the peer table").add(len(agent.peers))
    fam("edgeft_agent_peers_shown", "gauge", "Peers with series of their own (all, or the abnormal ones up to metrics_peers)").add(len(shown))
    fam("edgeft_agent_peers_with_traffic", "gauge", "Peers with traffic in the active window (probed every interval)").add(len(agent.active))
    fam("edgeft_agent_loop_lag_max_seconds", "gauge", "Longest delay of a timer behind its deadline").add(agent.loop_lag_max_ns / 1e9)
    if agent.wakes is not None:
        fam("edgeft_agent_wake_records_open", "gauge",
            "The data path's wake records are read (0: traffic stamps scanned instead; status says why)").add(agent.wakes.open)
        fam("edgeft_agent_wake_records_total", "counter",
            "Wake records read: traffic with an idle peer resumed, its paths probed at once").add(agent.wakes.read_total)
    if agent.tcp is not None and agent.tcp.cfg["enabled"]:
        _tcp(fam, agent.tcp)


# The TCP program's counters (edgeft_tcpctr) and what each means.
TCP_COUNTERS = (
    ("tuned", "edgeft_tcp_connections_tuned_total", "Connections to peers given the RTO and delayed-ACK settings"),
    ("tune_failed", "edgeft_tcp_tune_failures_total", "Connections to peers where the kernel refused a setting"),
    ("retrans", "edgeft_tcp_retransmissions_total", "Segments retransmitted on connections to peers"),
    ("rto", "edgeft_tcp_rtos_total", "Retransmission timeouts of connections to peers"),
    ("events_lost", "edgeft_tcp_records_lost_total", "Retransmission records the ring buffer had no room for"),
)


def _tcp(fam, tcp):
    fam("edgeft_agent_tcp_program_attached", "gauge",
        "The TCP program is attached (0: failover works without it; status says why)").add(tcp.attached)
    signals = fam("edgeft_agent_tcp_signals_total", "counter", "Retransmission records read, each an alarm on the peer's paths")
    for kind, value in sorted(tcp.by_kind.items()):
        signals.add(value, kind=kind)
    counters = tcp.counters()
    for key, name, help_text in TCP_COUNTERS:
        if key in counters:
            fam(name, "counter", help_text).add(counters[key])


def _plane(fam, agent, s, now, agg):
    flags = agent.steer.plane(s.index).flags
    lab = {"plane": s.name, "interface": s.spec["interface"]}
    fam("edgeft_plane_up", "gauge", "Data path UP flag of the plane (1 = usable unless drained)").add(bool(flags & layout.PLANE_UP), **lab)
    fam("edgeft_plane_drained", "gauge", "Data path DRAINED flag of the plane").add(bool(flags & layout.PLANE_DRAINED), **lab)
    fam("edgeft_plane_carrier", "gauge", "Carrier (admin up and lower up) of the plane NIC").add(s.carrier, **lab)
    fam("edgeft_plane_failovers_total", "counter", "Carrier losses that took the plane down").add(s.failovers, **lab)
    fam("edgeft_plane_failbacks_total", "counter", "Plane brought back after the hold-down").add(s.failbacks, **lab)
    if s.first_hop is not None:
        fh = s.first_hop.path
        fam("edgeft_plane_first_hop_alive", "gauge", "The routed plane's gateway answers its echo probes").add(
            fh.judge.alive, gateway=fh.address, **lab)
        fam("edgeft_plane_first_hop_probe_loss_ratio", "gauge", "Echo probe loss to the gateway over the last 100").add(
            fh.loss_ratio(), gateway=fh.address, **lab)
    fam("edgeft_plane_dampening_penalty", "gauge", "Flap dampening penalty of the plane link").add(round(s.judge.damp.penalty(now)), **lab)
    for counter, value in agent.maps.plane_counters(s.index).items():
        fam("edgeft_datapath_%s_total" % counter, "counter", "Data path counter %s of the plane (edgeft_ctrs_v1)" % counter).add(value, **lab)
    for counter, value in agent.maps.xlat_counters_of(s.index).items():
        fam("edgeft_datapath_%s_total" % counter, "counter",
            "Routed-mode translation counter %s of the plane (edgeft_xctr_v1)" % counter).add(value, **lab)
    _plane_paths(fam, agent, s, lab, agg)


class _PathTotals:
    """Aggregates over one plane's paths, filled in one pass over every path of the agent."""

    def __init__(self, retired):
        self.count = self.up = self.missing = 0
        self.loss_max, self.rtt_max = 0.0, None
        self.totals = dict.fromkeys(PATH_COUNTERS, 0)
        for counter, value in retired.items():
            self.totals[counter] += value

    def add(self, p):
        self.count += 1
        self.up += p.judge.up
        if p.misses:
            self.missing += 1
        if p.lost:
            self.loss_max = max(self.loss_max, p.loss_ratio())
        if p.rtt_avg_ns is not None and (self.rtt_max is None or p.rtt_avg_ns > self.rtt_max):
            self.rtt_max = p.rtt_avg_ns
        totals = self.totals
        totals["sent"] += p.sent
        totals["confirmations"] += p.confirmations
        totals["received"] += p.received
        totals["rejected"] += p.rejected
        totals["failovers"] += p.failovers
        totals["failbacks"] += p.failbacks


def _plane_paths(fam, agent, s, lab, agg):
    down = learned = 0
    for st in agent.peers.values():
        down += s.index in (st.get("down_planes") or ())
        learned += s.index in (st.get("learned_planes") or ())
    fam("edgeft_plane_paths", "gauge", "Paths to peers on the plane by the agent's judgement").add(
        agg.up, state="up", **lab).add(agg.count - agg.up, state="down", **lab)
    fam("edgeft_plane_paths_missing_probes", "gauge", "Paths whose last probe went unanswered").add(agg.missing, **lab)
    fam("edgeft_plane_peers_down", "gauge", "Peers with the plane in their down mask (judged or learned)").add(down, **lab)
    fam("edgeft_plane_peers_learned", "gauge", "Peers whose down bit for the plane was learned from their steered traffic").add(
        learned, **lab)
    totals = agg.totals
    fam("edgeft_plane_probes_sent_total", "counter", "Probes sent to peers on the plane").add(totals["sent"], **lab)
    fam("edgeft_plane_confirmations_total", "counter",
        "Of the probes sent, those of a path whose latest probe was unanswered or under a TCP alarm").add(totals["confirmations"], **lab)
    fam("edgeft_plane_probes_received_total", "counter", "Probe replies received on the plane").add(totals["received"], **lab)
    fam("edgeft_plane_replies_rejected_total", "counter",
        "Replies ignored on the plane: for no outstanding probe, a second time, or with a wrong token").add(totals["rejected"], **lab)
    fam("edgeft_plane_path_failovers_total", "counter", "Failovers of paths on the plane").add(totals["failovers"], **lab)
    fam("edgeft_plane_path_failbacks_total", "counter", "Failbacks of paths on the plane").add(totals["failbacks"], **lab)
    fam("edgeft_plane_path_probe_loss_max_ratio", "gauge", "Worst probe loss of a path on the plane over its last 100 probes").add(
        agg.loss_max, **lab)
    fam("edgeft_plane_path_rtt_avg_max_seconds", "gauge", "Largest smoothed probe RTT of a path on the plane").add(
        None if agg.rtt_max is None else agg.rtt_max / 1e9, **lab)


def _peer(fam, agent, peer_id, now, names, paths):
    st = agent.maps.get_peer(peer_id)
    if st is None:
        return
    peer = agent.peer_names.get(peer_id, "#%d" % peer_id)
    seen = agent.maps.last_seen(peer_id)
    fam("edgeft_peer_active_plane", "gauge", "Index of the peer's active plane").add(st["active_plane"], peer=peer)
    for i, plane in names.items():
        lab = {"peer": peer, "plane": plane}
        fam("edgeft_peer_plane_down", "gauge", "Plane in the peer's down mask (judged or learned)").add(i in st["down_planes"], **lab)
        fam("edgeft_peer_plane_learned", "gauge", "Down bit learned from the peer's steered traffic").add(i in st["learned_planes"], **lab)
        fam("edgeft_peer_last_seen_age_seconds", "gauge", "Seconds since the data path last received from the peer on the plane").add(
            _age_s(now, seen[i]), **lab)
    for path in paths:
        lab = {"peer": peer, "plane": names[path.plane]}
        j = path.judge
        fam("edgeft_path_up", "gauge", "Agent judgement of the path (1 up, 0 failed over)").add(j.up, **lab)
        fam("edgeft_path_alive", "gauge", "Probes currently answered (fewer than multiplier missed)").add(j.alive, **lab)
        fam("edgeft_path_probes_sent_total", "counter", "Probes sent").add(path.sent, **lab)
        fam("edgeft_path_probes_received_total", "counter", "Probe replies received").add(path.received, **lab)
        fam("edgeft_path_replies_rejected_total", "counter",
            "Replies ignored: for no outstanding probe, a second time, or with a wrong token").add(path.rejected, **lab)
        fam("edgeft_path_probe_loss_ratio", "gauge", "Probe loss over the last 100 probes").add(path.loss_ratio(), **lab)
        fam("edgeft_path_rtt_seconds", "gauge", "Last probe round-trip time").add(
            None if path.rtt_last_ns is None else path.rtt_last_ns / 1e9, **lab)
        fam("edgeft_path_rtt_avg_seconds", "gauge", "Smoothed probe round-trip time (1/8 EWMA)").add(
            None if path.rtt_avg_ns is None else path.rtt_avg_ns / 1e9, **lab)
        fam("edgeft_path_failovers_total", "counter", "Failovers of the path").add(path.failovers, **lab)
        fam("edgeft_path_failbacks_total", "counter", "Failbacks of the path").add(path.failbacks, **lab)
        fam("edgeft_path_dampening_penalty", "gauge", "Flap dampening penalty of the path").add(round(j.damp.penalty(now)), **lab)


def metrics(agent) -> str:
    """GET /metrics: the text exposition of the module docstring's series."""
    now = agent.clock()
    fam = _Families()
    shown = shown_peers(agent)
    aggregates = {i: _PathTotals(agent.retired.get(i, {})) for i in agent.planes}
    for (_peer_id, plane), path in agent.paths.items():
        aggregates[plane].add(path)
    _agent(fam, agent, now, shown)
    for s in agent.planes.values():
        _plane(fam, agent, s, now, aggregates[s.index])
    names = {s.index: s.name for s in agent.planes.values()}
    for peer_id in shown:
        paths = [agent.paths[(peer_id, i)] for i in sorted(names) if (peer_id, i) in agent.paths]
        _peer(fam, agent, peer_id, now, names, paths)
    return render(fam.by_name.values())
