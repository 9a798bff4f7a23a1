"""The agent's /metrics as the fabric grows: series and render time at 4, 1,000 and 4,096 peers.

Renders agent/metrics.py for a synthetic agent: the agent's own Path and Judge objects for every
peer and plane (two planes), with the pinned maps replaced by an in-memory stand-in (the
renderer reads them only for the planes' counters and the shown peers, so what it measures is the
agent's own work). Each size is rendered twice in the same run: with the default
`metrics_peers` (bounded) and with every peer shown (the baseline: what the agent exported before
series were bounded), healthy and with 1 % of the peers failed over. `loop ms` is what a scrape
costs the agent's loop now that the render runs in a forked child (agent/forkrender.py): the
median time of os.fork() in a process holding that agent.

    python benchmarks/metrics_scale.py [--peers 4,1000,4096] [--repeat 5] [--json]

No root, no lab: it reads no kernel state. Prints one table; exit 0 when it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path as FsPath
from types import SimpleNamespace

REPO = FsPath(__file__).resolve().parents[1]
if str(REPO / ".build" / "collections") not in sys.path:
    sys.path.insert(0, str(REPO / ".build" / "collections"))  # scripts/bootstrap.sh links the collection there

from ansible_collections.edgeft.failover.plugins.module_utils.agent import config, exposition, metrics  # noqa: E402
from ansible_collections.edgeft.failover.plugins.module_utils.agent.judge import Dampening, Judge  # noqa: E402
from ansible_collections.edgeft.failover.plugins.module_utils.agent.path import LOSS_WINDOW, Path  # noqa: E402
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout  # noqa: E402

PLANES = ("a", "b")
MS = 1000000


class InMemoryMaps:
    """What agent/metrics.py reads of the pinned maps, from dicts (the benchmark runs without BPF)."""

    def __init__(self, peers, now):
        self.peers = peers
        self.now = now

    def get_peer(self, peer_id):
        return self.peers.get(peer_id)

    def last_seen(self, _peer_id):
        return [self.now - MS] * layout.PLANE_SLOTS

    @staticmethod
    def plane_counters(_plane):
        return {name: 1000 for name, _type in layout.Counters._fields_}

    @staticmethod
    def xlat_counters_of(_plane):
        return {name: 0 for name, _type in layout.XlatCounters._fields_}


def synthetic_agent(peers, failed=0, metrics_peers=config.DEFAULTS["metrics_peers"], now=10 ** 12):
    """An object with what agent/metrics.py reads of an Agent: `peers` peers on two planes, the
    first `failed` of them with plane a failed over (judged down, in the down mask)."""
    hold = 1000 * MS
    maps_view, paths = {}, {}
    for peer_id in range(peers):
        down = [0] if peer_id < failed else []
        maps_view[peer_id] = {"active_plane": 1 if down else 0, "down_planes": down, "learned_planes": []}
        for plane in range(len(PLANES)):
            judge = Judge(plane not in down, hold, Dampening(), now)
            path = Path(peer_id, plane, 4, "198.%d.%d.%d" % (18 + plane, peer_id // 250, peer_id % 250 + 1), judge, 3)
            path.sent, path.received, path.rtt_last_ns, path.rtt_avg_ns = 500, 500 - 3 * len(down), 40000, 41000
            path.misses = 3 if plane in down else 0
            for seq in range(LOSS_WINDOW):  # a full loss window, as after 100 probes
                answered = not (plane in down and seq >= LOSS_WINDOW - 3)
                path.outcomes.append(answered)
                path.lost += not answered
            paths[(peer_id, plane)] = path
    planes = {i: SimpleNamespace(name=name, index=i, spec={"interface": "fab%d" % i}, carrier=True, failovers=0,
                                 failbacks=0, first_hop=None, judge=Judge(True, hold, Dampening(), now))
              for i, name in enumerate(PLANES)}
    return SimpleNamespace(
        cfg=SimpleNamespace(metrics_peers=metrics_peers), clock=lambda: now, started=now - 60 * 1000 * MS,
        maps=InMemoryMaps(maps_view, now), steer=SimpleNamespace(plane=lambda _i: SimpleNamespace(flags=layout.PLANE_UP)),
        planes=planes, peers=maps_view, paths=paths, peer_names={pid: "host%04d" % pid for pid in maps_view},
        active=set(), totals={"failovers": failed, "failbacks": 0}, loop_lag_max_ns=0, retired={}, tcp=None, wakes=None)


def measure(agent, repeat):
    """(series, bytes, median render ms) of agent/metrics.py for `agent`."""
    times, text = [], ""
    for _attempt in range(repeat):
        start = time.perf_counter()
        text = metrics.metrics(agent)
        times.append((time.perf_counter() - start) * 1000)
    return len(exposition.parse(text)), len(text.encode()), statistics.median(times)


def fork_ms(repeat):
    """Median ms the parent spends in os.fork() (the child exits at once), as the agent's loop
    does for each render; it copies page tables, so it grows with the process."""
    times = []
    for _attempt in range(repeat):
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        times.append((time.perf_counter() - start) * 1000)
        os.waitpid(pid, 0)
    return statistics.median(times)


def run(sizes, repeat):
    rows = []
    for peers in sizes:
        for failed in (0, max(1, peers // 100)):
            agent = synthetic_agent(peers, failed)
            bounded = measure(agent, repeat)
            loop = fork_ms(repeat)
            every = measure(synthetic_agent(peers, failed, metrics_peers=peers), repeat)
            rows.append({"peers": peers, "failed": failed, "series": bounded[0], "bytes": bounded[1], "render_ms": bounded[2],
                         "loop_ms": loop,
                         "baseline_series": every[0], "baseline_bytes": every[1], "baseline_render_ms": every[2]})
    return rows


def table(rows):
    head = ("peers", "failed over", "series", "KB", "render ms", "loop ms", "every peer: series", "KB", "render ms", "series ratio")
    lines = ["%6s %11s %7s %7s %10s %8s %19s %7s %10s %12s" % head]
    for r in rows:
        lines.append("%6d %11d %7d %7.1f %10.1f %8.2f %19d %7.1f %10.1f %12.3f" % (
            r["peers"], r["failed"], r["series"], r["bytes"] / 1024, r["render_ms"], r["loop_ms"], r["baseline_series"],
            r["baseline_bytes"] / 1024, r["baseline_render_ms"], r["series"] / r["baseline_series"]))
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--peers", default="4,1000,4096", help="comma-separated peer counts (default 4,1000,4096)")
    p.add_argument("--repeat", type=int, default=5, help="renders per figure; the median is shown (default 5)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = p.parse_args(argv)
    try:
        sizes = [int(n) for n in args.peers.split(",")]
    except ValueError:
        p.error("--peers: %r is not a comma-separated list of numbers" % args.peers)
    if any(n < 1 for n in sizes) or args.repeat < 1:
        p.error("--peers and --repeat must be positive")
    rows = run(sizes, args.repeat)
    print(json.dumps(rows, indent=2) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
