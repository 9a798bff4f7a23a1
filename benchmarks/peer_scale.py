"""The data path's per-packet cost as the peer table grows: both programs through
BPF_PROG_TEST_RUN with a few peers and with a full table.

    sudo .venv/bin/python benchmarks/peer_scale.py [--peers 4,4096] [--repeat 100000] [--rounds 7] [--json]

Both planes' programs are built with clang and loaded with libbpf (the role's object loader,
the default table sizes: EDGEFT_MAX_PEERS 4,096) over maps pinned in a private bpffs, attached
nowhere. For each table size the maps are emptied and filled with synthetic peers (two planes,
IPv4 and IPv6, lab addresses), then each program runs on one UDP frame --repeat times in the
kernel, --rounds times; the median of the kernel's ns per run is printed. The frames go to and
come from the peer in the middle of the table (its hash-map lookups are the ones that could grow).
Also printed: the maps' memory (the kernel's memlock of every map; hash maps are preallocated,
so it is paid at load, whatever the table holds) and the time to fill the table from Python.

The last column is the ratio of the largest table's figure to the smallest's: the fleet-scale
issue asks for the per-packet cost at 4,096 peers within 10 % of 4 peers. The exit status is 1
only when nothing could be measured. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ipaddress
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO / '.build' / 'collections') not in sys.path:
    sys.path.insert(0, str(REPO / '.build' / 'collections'))  # scripts/bootstrap.sh links the collection there

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import build, layout  # noqa: E402
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.testrun import TC_ACT_OK, TC_ACT_UNSPEC, prog_test_run  # noqa: E402

IFINDEX = (1000, 1001)  # BPF_PROG_TEST_RUN resolves no interface: any index will do
LOCAL = {4: ('198.18.255.1', '198.19.255.1'), 6: ('fd0e:d6ef:7a00::1', 'fd0e:d6ef:7b00::1')}
BASE = {4: (ipaddress.ip_address('198.18.0.2'), ipaddress.ip_address('198.19.0.2')),
        6: (ipaddress.ip_address('fd0e:d6ef:7a00::2'), ipaddress.ip_address('fd0e:d6ef:7b00::2'))}
CASES = (('egress', 4), ('egress', 6), ('ingress', 4), ('ingress', 6))


def peer_addresses(peer_id, family):
    """Peer `peer_id`'s address on planes 0 and 1 (lab ranges: 198.18.0.0/15, the lab's ULA)."""
    return tuple(str(base + peer_id) for base in BASE[family])


def frame(direction, family, peer_id):
    """One UDP frame of plane 0: this host to the peer (egress) or the peer to this host (ingress)."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether

    local, peer = LOCAL[family][0], peer_addresses(peer_id, family)[0]
    src, dst = (local, peer) if direction == 'egress' else (peer, local)
    ip = IP(src=src, dst=dst) if family == 4 else IPv6(src=src, dst=dst)
    return bytes(Ether(src='02:00:00:00:00:01', dst='02:00:00:00:00:02') / ip / UDP(sport=4000, dport=5000) / (b'edgeft' * 8))


def memlock_bytes(fd):
    with open('/proc/self/fdinfo/%d' % fd) as f:
        for line in f:
            if line.startswith('memlock:'):
                return int(line.split()[1])
    return 0


def fill(maps, peers):
    maps.clear()
    for plane, ifindex in enumerate(IFINDEX):
        maps.set_plane(plane, ifindex)
    start = time.monotonic()
    for peer_id in range(peers):
        maps.set_peer(peer_id, v4=peer_addresses(peer_id, 4), v6=peer_addresses(peer_id, 6))
    return time.monotonic() - start


def measure(planes, peers, repeat, rounds):
    maps = planes[0].maps
    figures = {'peers': peers, 'fill_ms': round(fill(maps, peers) * 1000, 1)}
    if len(maps.peer_ids()) != peers:
        raise RuntimeError('the table holds %d peers, not %d' % (len(maps.peer_ids()), peers))
    middle = peers // 2
    for direction, family in CASES:
        packet = frame(direction, family, middle)
        runs = [prog_test_run(planes[0].progs[direction].fd, packet, repeat=repeat) for _round in range(rounds)]
        if runs[0].retval not in (TC_ACT_UNSPEC, TC_ACT_OK):  # a peer's packet on its active plane passes
            raise RuntimeError('%s IPv%d: the program returned %d, not a pass' % (direction, family, runs[0].retval))
        figures['%s%d_ns' % (direction, family)] = statistics.median(r.duration for r in runs)
    figures['maps_mb'] = round(sum(memlock_bytes(h.fd) for h in maps.handles.values()) / 2**20, 1)
    return figures


ROWS = (
    ('egress4_ns', 'egress to a peer, IPv4 (ns per packet)'),
    ('egress6_ns', 'egress to a peer, IPv6 (ns per packet)'),
    ('ingress4_ns', 'ingress from a peer, IPv4 (ns per packet)'),
    ('ingress6_ns', 'ingress from a peer, IPv6 (ns per packet)'),
    ('maps_mb', "the maps' memory (MB, memlock)"),
    ('fill_ms', 'filling the table from Python (ms)'),
)


def format_table(runs):
    head = [''] + ['%d peers' % run['peers'] for run in runs] + (['ratio'] if len(runs) > 1 else [])
    lines = [head]
    for key, label in ROWS:
        values = [run[key] for run in runs]
        cells = [label] + ['%.1f' % v for v in values]
        if len(runs) > 1:
            cells.append('%.3f' % (values[-1] / values[0]) if values[0] else '-')
        lines.append(cells)
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return '\n'.join('  '.join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)) for row in lines)


@contextlib.contextmanager
def private_bpffs():
    path = tempfile.mkdtemp(prefix='edgeft-peer-scale-')
    subprocess.run(['mount', '-t', 'bpf', 'bpf', path], check=True)
    try:
        yield path
    finally:
        ctypes.CDLL(None, use_errno=True).umount2(os.fsencode(path), 2)  # MNT_DETACH
        shutil.rmtree(path, ignore_errors=True)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    p.add_argument('--peers', default='4,%d' % layout.TUNABLES['EDGEFT_MAX_PEERS'], help='comma-separated table sizes')
    p.add_argument('--repeat', type=int, default=100_000, help='runs of a program per measurement (in the kernel)')
    p.add_argument('--rounds', type=int, default=7, help='measurements per program and size (the median is printed)')
    p.add_argument('--json', action='store_true', help='print the figures as JSON')
    args = p.parse_args(argv)
    args.peers = [int(n) for n in args.peers.split(',') if n.strip()]
    capacity = layout.TUNABLES['EDGEFT_MAX_PEERS']
    if not args.peers or any(not 1 <= n <= capacity for n in args.peers):
        p.error('--peers: sizes from 1 to %d (EDGEFT_MAX_PEERS)' % capacity)
    if args.repeat < 1 or args.rounds < 1:
        p.error('--repeat and --rounds must be at least 1')
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if os.geteuid() != 0:
        sys.exit('peer_scale.py needs root (BPF, a bpffs mount)')
    with private_bpffs() as pins:
        planes = []
        try:
            for plane in range(len(IFINDEX)):
                planes.append(build.compile_plane(plane, pin_dir=os.path.join(pins, 'host'), loader='object'))
            runs = [measure(planes, peers, args.repeat, args.rounds) for peers in args.peers]
        except (RuntimeError, OSError) as exc:
            print('peer_scale: %s' % exc, file=sys.stderr)
            return 1
        finally:
            for compiled in planes:
                compiled.close()
    print(json.dumps(runs, indent=1) if args.json else format_table(runs))
    return 0


if __name__ == '__main__':
    sys.exit(main())
