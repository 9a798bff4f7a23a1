# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""`edgeft-agent status`: the agent's view for a person.

Asks the running agent (GET /status on its metrics address); when no agent
answers, shows what the pinned maps say, which is what the data path does
without an agent.
"""

from __future__ import annotations

import json
import socket

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import now_ns


def fetch(address, path="/status", timeout=1.0) -> bytes:
    """Body of GET path from the agent's endpoint; raises OSError when nobody answers."""
    host, port = address
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect((host, port))
        s.sendall(("GET %s HTTP/1.0\r\nHost: edgeft-agent\r\n\r\n" % path).encode())
        chunks = []
        while True:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
    raw = b"".join(chunks)
    head, _sep, body = raw.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.0 200"):
        raise OSError("unexpected answer: %s" % head.split(b"\r\n", 1)[0].decode("latin-1"))
    return body


def from_maps(maps, planes, names) -> dict:
    """The status structure from the maps alone (no agent running)."""
    now = now_ns()
    out_planes, out_peers = [], []
    by_index = {p["index"]: p["name"] for p in planes}
    for p in planes:
        slot = maps.planes.get(p["index"])
        out_planes.append({"name": p["name"], "interface": p["interface"], "carrier": None,
                           "up": bool(slot.flags & layout.PLANE_UP), "drained": bool(slot.flags & layout.PLANE_DRAINED),
                           "failovers": None, "failbacks": None, "counters": maps.plane_counters(p["index"])})
    for peer_id in maps.peer_ids():
        st = maps.get_peer(peer_id)
        seen = maps.last_seen(peer_id)
        out_peers.append({
            "id": peer_id, "name": names.get(peer_id, "#%d" % peer_id),
            "active_plane": by_index.get(st["active_plane"], str(st["active_plane"])),
            "down_planes": [by_index.get(i, str(i)) for i in st["down_planes"]],
            "learned_planes": [by_index.get(i, str(i)) for i in st["learned_planes"]],
            "last_seen_age_ms": {n: (max(0, now - seen[i]) // 1000000 if seen[i] else None) for i, n in by_index.items()},
            "paths": {},
        })
    return {"agent": None, "totals": None, "planes": out_planes, "peers": out_peers, "events": []}


def _table(rows) -> list:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _v(value, fmt="%s", none="-"):
    return none if value is None else fmt % value


def _tcp_line(tcp) -> str:
    """The TCP program (agent/tcp.py) in one line."""
    if not tcp or not tcp["enabled"]:
        return "TCP program: off"
    if not tcp["attached"]:
        return "TCP program: NOT ATTACHED (failover works without it): %s" % tcp["error"]
    prog = tcp.get("program") or {}
    refused = " (%d refused by the kernel: %s)" % (prog["tune_failed"], prog["last_error"]) if prog.get("tune_failed") else ""
    return ("TCP program: on cgroup %s, %d connection(s) to peers tuned%s, %d retransmission(s), %d RTO(s), %d alarm(s)"
            % (tcp["cgroup"], prog.get("tuned", 0), refused, prog.get("retrans", 0), prog.get("rto", 0),
               sum(tcp["signals_received"].values())))


def render(st: dict, note: str = "") -> str:
    lines = []
    agent = st.get("agent")
    if agent:
        lines.append("edgeft-agent pid %d, up %.1f s: %s" % (agent["pid"], agent["uptime_ms"] / 1000.0, agent["settings"]))
        lines.append("failovers %d, failbacks %d" % (st["totals"]["failovers"], st["totals"]["failbacks"]))
        lines.append(_tcp_line(st.get("tcp")))
    else:
        lines.append("edgeft-agent: not running%s; the data path as the maps hold it:" % (" (%s)" % note if note else ""))
    lines.append("")
    rows = [("PLANE", "NIC", "CARRIER", "FIRST-HOP", "FLAGS", "FAILOVERS", "FAILBACKS", "TX", "STEERED", "STEERED-IN", "RX",
             "LEARNED")]
    for p in st["planes"]:
        flags = ",".join(f for f, on in (("up", p["up"]), ("drained", p["drained"])) if on) or "down"
        c = p["counters"]
        hop = p.get("first_hop")
        rows.append((p["name"], p["interface"], _v(p["carrier"] if p["carrier"] is None else ("yes" if p["carrier"] else "NO")),
                     "-" if not hop else "%s %s" % (hop["address"], "ok" if hop["alive"] else "SILENT"),
                     flags, _v(p["failovers"]), _v(p["failbacks"]), c["tx_packets"], c["steered_packets"],
                     c["steered_in_packets"], c["rx_packets"], c["learned"]))
    lines.extend(_table(rows))
    lines.append("")
    names = [p["name"] for p in st["planes"]]
    head = ["PEER", "ACTIVE", "DOWN", "LEARNED"]
    for n in names:
        head += ["%s:PATH" % n, "RTT-MS", "LOSS", "SEEN-MS"]
    rows = [tuple(head)]
    for peer in st["peers"]:
        row = [peer["name"], peer["active_plane"], ",".join(peer["down_planes"]) or "-", ",".join(peer["learned_planes"]) or "-"]
        for n in names:
            path = peer["paths"].get(n)
            if path:
                state = path["state"] + ("" if path["alive"] else "/dead") + (" (damped)" if path["suppressed"] else "")
                row += [state, _v(path["rtt_avg_ms"], "%.3f"), "%.0f%%" % (100 * path["loss"])]
            else:
                row += ["-", "-", "-"]
            row.append(_v(peer["last_seen_age_ms"].get(n)))
        rows.append(tuple(row))
    if len(rows) > 1:
        lines.extend(_table(rows))
    else:
        lines.append("no peers in the maps")
    if agent and st["events"]:
        lines.append("")
        lines.append("recent state changes:")
        for e in st["events"][-10:]:
            where = "path %s/%s" % (e["peer"], e["plane"]) if "peer" in e else "plane %s" % e["plane"]
            lines.append("  %8.1f s ago  %s %s: %s" % ((agent["now_ns"] - e["t_ns"]) / 1e9, where, e["kind"], e["reason"]))
    return "\n".join(lines) + "\n"


def run(cfg, as_json: bool, out) -> int:
    note = ""
    st = None
    if cfg.metrics_listen:
        try:
            st = json.loads(fetch(cfg.metrics_listen).decode())
        except (OSError, ValueError) as e:
            note = "no answer on %s:%d: %s" % (cfg.metrics_listen[0], cfg.metrics_listen[1], e)
    else:
        note = "metrics_listen is off"
    if st is None:
        from ansible_collections.edgeft.failover.plugins.module_utils.agent import checks
        from ansible_collections.edgeft.failover.plugins.module_utils.agent.names import PeerNames

        maps = checks.open_maps(cfg)
        try:
            import logging

            names = PeerNames(cfg.state_dir, cfg.pin_root, cfg.peer_names, logging.getLogger("edgeft-agent"))
            peers = {pid: maps.get_peer(pid) for pid in maps.peer_ids()}
            st = from_maps(maps, cfg.planes, names.names(peers))
        finally:
            maps.close()
    out.write(json.dumps(st, indent=1, sort_keys=True) + "\n" if as_json else render(st, note))
    return 0
