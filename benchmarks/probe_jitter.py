"""Probe send jitter of the agent at 4,096 peers, without and with /metrics scrapes, in one run.

Runs the agent's own loop (agent.Agent: start(), turn(), the timer wheel, the prober, the HTTP
endpoint) with real UDP probe sockets in a network namespace of its own: two planes, fab0
(10.1.0.1) and fab1 (10.2.0.1), veth pairs to a second namespace where every peer's address
(10.101.x.y on plane a, 10.102.x.y on b) is local. The pinned maps are replaced by an in-memory
peer table (no BPF); a reflector process there answers every probe as the peers' tc program would
(kind halves swapped, from the probed address), so paths stay alive and idle peers keep their
idle rate. `--active` peers have traffic (probed every
interval_ms), the others are idle (every idle_interval_ms).

Lateness of a probe = when the agent sent it (the time stamped just before sendto) minus its
timer's deadline. The run cycles through three kinds of window: quiet; a scraper process GETs
/metrics (every `--scrape-every-ms`, 0 = back to back) with a render for every scrape
(metrics_min_interval_ms 0, as the agent rendered before the setting); the same scraper with the
agent's default spacing of /metrics renders (metrics_min_interval_ms). The same agent, the same
process, back to back, so a loaded machine loads every kind alike. Prints p50/p99/max lateness of
each and the ratios to the quiet windows.

    sudo python benchmarks/probe_jitter.py [--peers 4096] [--active 64] [--idle-interval-ms 3600000]
                                           [--window-s 5] [--rounds 3] [--scrape-every-ms 100]
                                           [--path /metrics|/status] [--no-realtime] [--json]

Needs root (a network namespace of its own). Exit 0 when it measured, 1 on errors.
"""

from __future__ import annotations

import argparse
import array
import ctypes
import json
import logging
import multiprocessing
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path as FsPath
from types import SimpleNamespace

REPO = FsPath(__file__).resolve().parents[1]
if str(REPO / ".build" / "collections") not in sys.path:
    sys.path.insert(0, str(REPO / ".build" / "collections"))  # scripts/bootstrap.sh links the collection there

from ansible_collections.edgeft.failover.plugins.module_utils.agent.agent import Agent  # noqa: E402
from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import Config  # noqa: E402
from ansible_collections.edgeft.failover.plugins.module_utils.agent.steer import Steering  # noqa: E402
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout, probe  # noqa: E402
from metrics_scale import InMemoryMaps  # noqa: E402  (this folder)

MS = 1000000
CLONE_NEWNET = 0x40000000
IP_PKTINFO = 8  # linux/in.h; the socket module does not export it
SO_RCVBUFFORCE = 33  # asm-generic/socket.h
LISTEN = ("127.0.0.1", 9531)
WARM_UP_S = 3.0  # first probes spread over one interval, the activity scan, a first resync
GUARD_S = 0.3  # samples this close after a window starts are left out (a scrape may spill over)
KINDS = ("quiet", "unspaced", "spaced")  # the windows, in this order in each round


def peer_address(plane, peer_id):
    return "10.%d.%d.%d" % (101 + plane, peer_id // 250, peer_id % 250 + 1)


def ip(*args):
    subprocess.run(("ip",) + args, check=True)


class PeerTable(InMemoryMaps):
    """What the agent reads of the pinned maps, from dicts (the counters as metrics_scale.py's): `peers` peers on two planes, the first
    `active` of them with traffic (a fresh tx stamp at every activity scan)."""

    def __init__(self, peers, active):
        self.active = active
        self.table = {pid: {"v4": [peer_address(0, pid), peer_address(1, pid)] + [None] * (layout.PLANE_SLOTS - 2),
                            "v6": [None] * layout.PLANE_SLOTS, "active_plane": 0, "down_planes": [],
                            "learned_planes": [], "flags": 0, "changed_ns": 0} for pid in range(peers)}
        self.planes = {i: SimpleNamespace(flags=layout.PLANE_UP) for i in range(2)}

    def peer_ids(self):
        return list(self.table)

    def get_peer(self, peer_id):
        return self.table.get(peer_id)

    def last_seen(self, _peer_id):
        return [0] * layout.PLANE_SLOTS

    def last_traffic(self, peer_ids):
        now = time.monotonic_ns()
        return {pid: now if pid < self.active else 0 for pid in peer_ids}


class InMemorySteering(Steering):
    """The agent's writes to the maps, kept in the peer table's dicts (no pin directory, no lock)."""

    def path_down(self, peer_id, plane, targets):
        peer = self.maps.table[peer_id]
        peer["down_planes"] = sorted(set(peer["down_planes"]) | {plane})
        peer["active_plane"] = targets[0] if targets else peer["active_plane"]
        return peer["active_plane"]

    def path_up(self, peer_id, plane):
        peer = self.maps.table[peer_id]
        peer["down_planes"] = [p for p in peer["down_planes"] if p != plane]
        return True

    def forget_learned(self, _peer_id, _plane):
        return False

    def set_plane_up(self, plane, up):
        slot = self.maps.planes[plane]
        slot.flags = slot.flags | layout.PLANE_UP if up else slot.flags & ~layout.PLANE_UP
        return True


class TimedAgent(Agent):
    """The agent, recording each probe's send time against its timer's deadline."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.steer = InMemorySteering(self.maps, self.cfg.pin_root)
        self.sent_at = array.array("q")
        self.late_ns = array.array("q")

    def _probe(self, path, now):
        deadline, sent = path.timer.deadline, path.sent
        super()._probe(path, now)
        if path.sent != sent:
            self.sent_at.append(path.sent_ns)
            self.late_ns.append(path.sent_ns - deadline)


def reflect(moved, ready, stop, realtime):
    """The peers' reflector, in a network namespace of its own behind the planes' veth pairs: every
    peer address is local here (one `local` route per plane), and each request is answered from the
    address it was sent to."""
    unshare_net()
    if realtime:  # the peers' reflector is kernel code (tc ingress): it never waits for a CPU behind other work
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1))
    moved.wait(10)  # the agent's side moved the pfab ends in here
    ip("link", "set", "lo", "up")
    for plane in range(2):
        ip("addr", "add", "10.%d.0.2/24" % (plane + 1), "dev", "pfab%d" % plane)
        ip("link", "set", "pfab%d" % plane, "up")
        ip("route", "add", "local", "10.%d.0.0/16" % (101 + plane), "dev", "lo")
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)  # the agent sends its probes in bursts
    s.bind(("0.0.0.0", probe.PORT))
    s.settimeout(0.2)
    ready.set()
    while not stop.is_set():
        try:
            data, anc, _flags, source = s.recvmsg(256, socket.CMSG_SPACE(12))
        except socket.timeout:
            continue
        for level, kind, value in anc:
            if level == socket.IPPROTO_IP and kind == IP_PKTINFO:
                # struct in_pktinfo {ifindex, spec_dst, addr}: answer from the probed address
                pktinfo = struct.pack("=i4s4s", 0, value[8:12], b"\0" * 4)
                reply = data[:4] + data[6:8] + data[4:6] + data[8:]
                s.sendmsg([reply], [(socket.IPPROTO_IP, IP_PKTINFO, pktinfo)], 0, source)


def scrape(windows, path, every_s, results):
    """GET `path` back to back or every `every_s` during each (start, end, kind) monotonic window;
    puts {kind: figures}."""
    took, sizes = {}, []
    for start, end, kind in windows:
        while time.monotonic() < start:
            time.sleep(min(0.05, start - time.monotonic()))
        while time.monotonic() < end:
            t0 = time.monotonic()
            try:
                with socket.create_connection(LISTEN, timeout=10) as c:
                    c.sendall(("GET %s HTTP/1.0\r\n\r\n" % path).encode())
                    body = b"".join(iter(lambda: c.recv(65536), b""))
            except OSError:
                continue  # the agent not listening yet, or closing at the end
            if body.startswith(b"HTTP/1.0 200 "):  # not one cut short by the agent closing at the end
                took.setdefault(kind, []).append(time.monotonic() - t0)
                sizes.append(len(body))
            if every_s:
                time.sleep(max(0.0, every_s - (time.monotonic() - t0)))
    bytes_median = sorted(sizes)[len(sizes) // 2] if sizes else None
    results.put({kind: {"scrapes": len(t), "scrape_ms_median": 1000 * sorted(t)[len(t) // 2], "bytes_median": bytes_median}
                 for kind, t in took.items()})


def unshare_net():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")


def wire_planes(ctx, realtime):
    """This process in a namespace of its own with two plane NICs fab0/fab1, veth pairs to the
    reflector's namespace. The peers are behind one gateway per plane (one neighbour entry, not
    thousands). Returns the reflector's (process, stop event)."""
    unshare_net()
    ip("link", "set", "lo", "up")
    for plane in range(2):
        ip("link", "add", "fab%d" % plane, "type", "veth", "peer", "name", "pfab%d" % plane)
        ip("addr", "add", "10.%d.0.1/24" % (plane + 1), "dev", "fab%d" % plane)
        ip("link", "set", "fab%d" % plane, "up")
    moved, ready, stop = ctx.Event(), ctx.Event(), ctx.Event()
    reflector = ctx.Process(target=reflect, args=(moved, ready, stop, realtime), daemon=True)
    reflector.start()
    deadline = time.monotonic() + 10
    while True:  # until the reflector has its own namespace
        if os.readlink("/proc/%d/ns/net" % reflector.pid) != os.readlink("/proc/self/ns/net"):
            break
        if time.monotonic() > deadline:
            raise RuntimeError("the reflector did not leave the namespace")
        time.sleep(0.01)
    for plane in range(2):
        ip("link", "set", "pfab%d" % plane, "netns", str(reflector.pid))
    moved.set()
    if not ready.wait(10):
        raise RuntimeError("the reflector did not start")
    for plane in range(2):
        ip("route", "add", "10.%d.0.0/16" % (101 + plane), "via", "10.%d.0.2" % (plane + 1), "dev", "fab%d" % plane)
    return reflector, stop


def percentiles(values):
    if not values:
        return {"probes": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    v = sorted(values)
    return {"probes": len(v), "p50_ms": v[len(v) // 2] / MS, "p99_ms": v[min(len(v) - 1, int(len(v) * 0.99))] / MS,
            "max_ms": v[-1] / MS}


def run(args):
    ctx = multiprocessing.get_context("fork")
    reflector, stop = wire_planes(ctx, args.realtime)
    planes = [{"name": "a", "interface": "fab0", "ipv4": "10.1.0.1"}, {"name": "b", "interface": "fab1", "ipv4": "10.2.0.1"}]
    cfg = Config({"planes": planes, "backup_routes": False, "metrics_listen": "%s:%d" % LISTEN, "state_dir": None,
                  "log_level": "warning", "idle_interval_ms": args.idle_interval_ms})
    specs = [dict(p, ifindex=socket.if_nametoindex(p["interface"]), prefixes={}) for p in cfg.planes]
    log = logging.getLogger("probe_jitter")
    logging.basicConfig(level=logging.WARNING)
    t0 = time.monotonic() + WARM_UP_S
    windows = [(t0 + i * args.window_s, t0 + (i + 1) * args.window_s, KINDS[i % len(KINDS)])
               for i in range(len(KINDS) * args.rounds)]
    results = ctx.Queue()
    # Forked before the agent opens its sockets: the scraper must hold none of them.
    scraping = [w for w in windows if w[2] != "quiet"]
    scraper = ctx.Process(target=scrape, args=(scraping, args.path, args.scrape_every_ms / 1000, results), daemon=True)
    scraper.start()
    if args.realtime:
        # As the role runs the agent (ebpf_failover_agent_realtime, default true); the scraper,
        # forked before, keeps ordinary scheduling.
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1))
    agent = TimedAgent(cfg, PeerTable(args.peers, args.active), specs, log)
    agent.start()
    for plane in range(len(specs)):
        # Room for the replies to the first probes of every path, which all leave within one
        # interval after start (agent._add_path): the default buffer holds a few hundred.
        agent.prober.socket(plane, 4).setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 << 20)
    spacing = {"unspaced": 0, "spaced": cfg.metrics_min_interval_ms * MS}
    starts = [(int(a * 1e9), kind) for a, _b, kind in windows]
    end_ns = int(windows[-1][1] * 1e9)
    try:
        while agent.clock() < end_ns:
            while starts and agent.clock() >= starts[0][0]:  # a window begins: the spacing it runs with
                agent.endpoint.spacing["/metrics"] = spacing.get(starts.pop(0)[1], 0)
            agent.turn()
        agent.endpoint.close()  # the scraper sees its last connection refused
        agent.endpoint = None
        scraped = results.get(timeout=60)
    finally:
        stop.set()
        scraper.join(5)
        reflector.join(5)
        agent.close()
    by_kind = {kind: [] for kind in KINDS}
    bounds = [(int((a + GUARD_S) * 1e9), int(b * 1e9), kind) for a, b, kind in windows]
    for sent, late in zip(agent.sent_at, agent.late_ns):
        for a, b, kind in bounds:
            if a <= sent < b:
                by_kind[kind].append(late)
                break
    figures = {kind: percentiles(values) for kind, values in by_kind.items()}
    quiet = figures["quiet"]
    ratios = {kind: {"p99": figures[kind]["p99_ms"] / quiet["p99_ms"] if quiet["p99_ms"] else None,
                     "max": figures[kind]["max_ms"] / quiet["max_ms"] if quiet["max_ms"] else None}
              for kind in KINDS[1:]}
    return {"peers": args.peers, "active": args.active, "paths": len(agent.paths), "idle_interval_ms": args.idle_interval_ms,
            "realtime": args.realtime, "path": args.path, "scrape_every_ms": args.scrape_every_ms, "window_s": args.window_s,
            "rounds": args.rounds, "metrics_min_interval_ms": cfg.metrics_min_interval_ms, **figures,
            "scraper": scraped, "loadavg": os.getloadavg(), "ratios": ratios}


def table(r):
    every = "%d ms" % r["scrape_every_ms"] if r["scrape_every_ms"] else "back to back"
    title = "probe jitter: %d peers (%d with traffic, the others probed every %d ms), %d paths, agent at %s; %s every %s; " \
            "%d x %g s per kind; load average %.2f %.2f %.2f" % (
                r["peers"], r["active"], r["idle_interval_ms"], r["paths"], "SCHED_RR 1" if r["realtime"] else "SCHED_OTHER",
                r["path"], every, r["rounds"], r["window_s"], *r["loadavg"])
    lines = [title, "(unspaced: a render per scrape; spaced: metrics_min_interval_ms %d, the default)" % r["metrics_min_interval_ms"], "",
             "%-10s %8s %8s %8s %8s %8s %12s %10s %10s" % (
                 "", "probes", "p50 ms", "p99 ms", "max ms", "scrapes", "scrape ms", "p99 ratio", "max ratio")]
    for kind in KINDS:
        q, scraper = r[kind], r["scraper"].get(kind, {})
        took = scraper.get("scrape_ms_median")
        ratio = r["ratios"].get(kind)
        lines.append("%-10s %8d %8.3f %8.3f %8.3f %8d %12s %10s %10s" % (
            kind, q["probes"], q["p50_ms"], q["p99_ms"], q["max_ms"], scraper.get("scrapes", 0),
            "-" if took is None else "%.1f" % took, "-" if ratio is None else "%.2f" % ratio["p99"],
            "-" if ratio is None else "%.2f" % ratio["max"]))
    lines.append("(ratios: the kind's figure / the quiet windows')")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--peers", type=int, default=4096, help="peers in the peer table (default 4096)")
    p.add_argument("--active", type=int, default=64, help="peers with traffic, probed every interval (default 64)")
    p.add_argument("--idle-interval-ms", type=int, default=3600000,
                   help="probe interval of the idle peers (default 3600000: probed once, at start; see benchmarks/README.md)")
    p.add_argument("--window-s", type=float, default=5.0, help="seconds per quiet or scraping window (default 5)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of one window of each kind (default 3)")
    p.add_argument("--scrape-every-ms", type=int, default=100, help="scrape period, 0 = back to back (default 100)")
    p.add_argument("--path", default="/metrics", choices=("/metrics", "/status"), help="what the scraper GETs")
    p.add_argument("--no-realtime", dest="realtime", action="store_false",
                   help="run the agent with ordinary scheduling (default: SCHED_RR priority 1, as the role runs it)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    if args.peers < 1 or not 0 <= args.active <= args.peers or args.rounds < 1 or args.window_s <= GUARD_S or args.peers > 250 * 250:
        p.error("need 1 <= peers <= 62500, 0 <= active <= peers, rounds >= 1, window-s > %g" % GUARD_S)
    if os.geteuid() != 0:
        sys.stderr.write("probe_jitter: must run as root (a network namespace of its own)\n")
        return 1
    r = run(args)
    print(json.dumps(r, indent=2) if args.json else table(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
