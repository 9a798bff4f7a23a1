# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the agent shows: Prometheus metrics and the JSON behind `status`.

Both are built on request from the agent's state and the pinned maps (data
path counters, peers' planes, last-seen), so nothing is kept twice.
"""

from __future__ import annotations

import json
import os

from ansible_collections.edgeft.failover.plugins.module_utils.agent.exposition import CONTENT_TYPE, Family, render
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout

__all__ = ["CONTENT_TYPE", "metrics", "status", "status_json"]


def _ms(ns):
    return None if ns is None else round(ns / 1e6, 3)


def _age_ms(now, stamp):
    return None if not stamp else max(0, now - stamp) // 1000000


def _first_hop(fh, now):
    if fh is None:
        return None
    p = fh.path
    return {"address": p.address, "alive": p.judge.alive, "misses": p.misses, "sent": p.sent, "received": p.received,
            "rejected": p.rejected, "rtt_ms": _ms(p.rtt_last_ns), "loss": round(p.loss_ratio(), 4), "last_reply_age_ms": _age_ms(now, p.last_reply_ns)}


def status(agent) -> dict:
    """The agent's view, plus what the maps say now."""
    now = agent.clock()
    planes = []
    for s in agent.planes.values():
        flags = agent.steer.plane(s.index).flags
        planes.append({
            "name": s.name, "index": s.index, "interface": s.spec["interface"], "ifindex": s.spec["ifindex"],
            "carrier": s.carrier, "up": bool(flags & layout.PLANE_UP), "drained": bool(flags & layout.PLANE_DRAINED),
            "judged_up": s.judge.up, "stable_ms": _age_ms(now, s.judge.alive_since) if s.judge.alive else 0,
            "penalty": round(s.judge.damp.penalty(now)), "suppressed": s.judge.damp.suppressed(now),
            "failovers": s.failovers, "failbacks": s.failbacks,
            "first_hop": _first_hop(s.first_hop, now),
            "counters": agent.maps.plane_counters(s.index),
        })
    peers = []
    for peer_id in sorted(agent.peers):
        st = agent.maps.get_peer(peer_id)
        if st is None:
            continue
        seen = agent.maps.last_seen(peer_id)
        names = {s.index: s.name for s in agent.planes.values()}
        entry = {
            "id": peer_id, "name": agent.peer_names.get(peer_id, "#%d" % peer_id),
            "active_plane": names.get(st["active_plane"], str(st["active_plane"])),
            "down_planes": [names.get(i, str(i)) for i in st["down_planes"]],
            "learned_planes": [names.get(i, str(i)) for i in st["learned_planes"]],
            "last_seen_age_ms": {names[i]: _age_ms(now, seen[i]) for i in names},
            "traffic": peer_id in agent.active,
            "paths": {},
        }
        for path in agent.peer_paths(peer_id):
            j = path.judge
            entry["paths"][names[path.plane]] = {
                "address": path.address, "state": j.state(), "alive": j.alive, "misses": path.misses,
                "probe_every_ms": agent.probe_step(path) // 1000000,
                "stable_ms": _age_ms(now, j.alive_since) if j.alive else 0,
                "rtt_ms": _ms(path.rtt_last_ns), "rtt_avg_ms": _ms(path.rtt_avg_ns),
                "loss": round(path.loss_ratio(), 4), "sent": path.sent, "received": path.received, "rejected": path.rejected,
                "send_errors": path.send_errors, "last_reply_age_ms": _age_ms(now, path.last_reply_ns),
                "failovers": path.failovers, "failbacks": path.failbacks,
                "penalty": round(j.damp.penalty(now)), "suppressed": j.damp.suppressed(now),
            }
        peers.append(entry)
    return {
        "agent": {"pid": os.getpid(), "uptime_ms": (now - agent.started) // 1000000, "session": agent.session,
                  "now_ns": now, "settings": agent.cfg.summary(), "loop_lag_max_ms": _ms(agent.loop_lag_max_ns),
                  "backup_route_errors": agent.route_errors[:3]},
        "totals": dict(agent.totals),
        "planes": planes,
        "peers": peers,
        "events": list(agent.events),
    }


def status_json(agent) -> str:
    return json.dumps(status(agent), sort_keys=True)


def metrics(agent) -> str:
    now = agent.clock()
    fams = {}

    def fam(name, kind, help_text):
        if name not in fams:
            fams[name] = Family(name, kind, help_text)
        return fams[name]

    fam("edgeft_agent_failovers_total", "counter", "Failovers since start (plane carrier losses and path failures)").add(agent.totals["failovers"])
    fam("edgeft_agent_failbacks_total", "counter", "Failbacks since start (after the hold-down)").add(agent.totals["failbacks"])
    fam("edgeft_agent_uptime_seconds", "gauge", "Seconds since the agent started").add((now - agent.started) / 1e9)
    fam("edgeft_agent_peers_with_traffic", "gauge", "Peers with traffic in the active window (probed every interval)").add(len(agent.active))
    fam("edgeft_agent_loop_lag_max_seconds", "gauge", "Longest delay of a timer behind its deadline").add(agent.loop_lag_max_ns / 1e9)
    for s in agent.planes.values():
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
            kind = "counter"
            fam("edgeft_datapath_%s_total" % counter, kind, "Data path counter %s of the plane (edgeft_ctrs_v1)" % counter).add(value, **lab)
        for counter, value in agent.maps.xlat_counters_of(s.index).items():
            fam("edgeft_datapath_%s_total" % counter, "counter",
                "Routed-mode translation counter %s of the plane (edgeft_xctr_v1)" % counter).add(value, **lab)
    names = {s.index: s.name for s in agent.planes.values()}
    for peer_id in sorted(agent.peers):
        st = agent.maps.get_peer(peer_id)
        if st is None:
            continue
        peer = agent.peer_names.get(peer_id, "#%d" % peer_id)
        seen = agent.maps.last_seen(peer_id)
        fam("edgeft_peer_active_plane", "gauge", "Index of the peer's active plane").add(st["active_plane"], peer=peer)
        for i, plane in names.items():
            lab = {"peer": peer, "plane": plane}
            fam("edgeft_peer_plane_down", "gauge", "Plane in the peer's down mask (judged or learned)").add(i in st["down_planes"], **lab)
            fam("edgeft_peer_plane_learned", "gauge", "Down bit learned from the peer's steered traffic").add(i in st["learned_planes"], **lab)
            age = _age_ms(now, seen[i])
            fam("edgeft_peer_last_seen_age_seconds", "gauge", "Seconds since the data path last received from the peer on the plane").add(
                None if age is None else age / 1000.0, **lab)
        for path in agent.peer_paths(peer_id):
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
    return render(fams.values())
