# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the agent shows in `status`: the JSON behind it (the metrics are agent/metrics.py).

It is built on request from the agent's state and the pinned maps (data
path counters, peers' planes, last-seen), so nothing is kept twice.
"""

from __future__ import annotations

import json

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout

__all__ = ["status", "status_json"]


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
                "failovers": path.failovers, "failbacks": path.failbacks, "alarms": path.alarms,
                "penalty": round(j.damp.penalty(now)), "suppressed": j.damp.suppressed(now),
            }
        peers.append(entry)
    return {
        "agent": {"pid": agent.pid, "uptime_ms": (now - agent.started) // 1000000, "session": agent.session,
                  "now_ns": now, "settings": agent.cfg.summary(), "loop_lag_max_ms": _ms(agent.loop_lag_max_ns),
                  "backup_route_errors": agent.route_errors[:3]},
        "totals": dict(agent.totals),
        "tcp": agent.tcp.status() if agent.tcp is not None else None,
        "wake_records": agent.wakes.status() if agent.wakes is not None else None,
        "planes": planes,
        "peers": peers,
        "events": list(agent.events),
    }


def status_json(agent) -> str:
    return json.dumps(status(agent), sort_keys=True)
