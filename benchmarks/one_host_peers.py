"""One host with a peer table of a large fleet: what site.yml and the agent cost on it.

    sudo .venv/bin/python benchmarks/one_host_peers.py [--peers 4096] [--window 10] [--settle 5] [--json]

On a default lab (4 hosts, a unique name, torn down at the end even on errors), site.yml
deploys the four hosts. Then, on r1h1 alone:

1. its agent for --window seconds, --settle seconds after its start, while r1h1 talks to 2 peers
   (it pings r1h2 and r2h1 pings it, 10 times a second each): CPU (% of one core, from /proc) and
   probes sent per second;
2. site.yml --limit r1h1 with --peers minus 4 synthetic hosts added to the fabric group (a
   second inventory source; lab addresses that no namespace answers), timed, then again with
   --diff: what it changed is shown (the kernel drops a managed neighbour entry that failed to
   resolve, and the peer table adds it again; the real hosts' entries resolve). r1h1 keeps a
   managed neighbour entry per peer, plane and family in the table every namespace of the
   machine shares, whose limit only the initial namespace sets:
   the lab raises it for them as it does for its own hosts (docs/lab.md), and puts it back at
   its down; the table shows the IPv4 limit (gc_thresh3) before and after;
3. step 1 again, the agent now holding --peers minus 1 peers, of which 2 talk.

The synthetic peers never answer, so the deployment's health gate is told that only the real
hosts must (ebpf_failover_gate_must_answer). The last column is the ratio of the large table's
figure to the 4-host one. The data path's per-packet cost and map memory at 4,096 peers are
peer_scale.py's. The exit status is 1 only when nothing could be measured. See
benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
for folder in (REPO / 'lab', REPO / 'benchmarks'):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from edgeft_lab import Lab  # noqa: E402
from edgeft_lab.agents import Agents  # noqa: E402
from redeploy_under_load import BenchmarkError, deploy, lab_down, run_playbook  # noqa: E402
from scale import agent_window, changed_tasks, pings, playbook_seconds  # noqa: E402

HOST = 'r1h1'
REAL = ('r1h1', 'r1h2', 'r2h1', 'r2h2')
SYNTHETIC_BASE = 0x8000  # synthetic host n gets the plane's address number SYNTHETIC_BASE + n
NEIGH_LIMIT = Path('/proc/sys/net/ipv4/neigh/default/gc_thresh3')


def synthetic_inventory(lab, count, path):
    """`count` fabric hosts with a plane address per plane and family, on no namespace."""
    ports = {plane.name: lab.plan.host(HOST).port(plane.name) for plane in lab.topology.planes}
    hosts = {}
    for n in range(1, count + 1):
        entry = []
        for name, port in ports.items():
            v4, v6 = port.ipv4.network, port.ipv6.network
            entry.append({'name': name, 'ipv4': '%s/%d' % (v4[SYNTHETIC_BASE + n], v4.prefixlen),
                          'ipv6': '%s/%d' % (v6[SYNTHETIC_BASE + n], v6.prefixlen)})
        hosts['syn%04d' % n] = {'edgeft_planes': entry}
    path.write_text(yaml.safe_dump({'all': {'children': {'fabric': {'hosts': hosts}}}}, sort_keys=False))


# r1h1 pings r1h2 and r2h1 pings r1h1: r1h1 talks to 2 peers.
TALKING = ((HOST, 'r1h2'), ('r2h1', HOST))


def agent_with_two_peers(lab, inventory, log_dir, window, settle):
    """(% of a core, probes sent per second, peers) of r1h1's agent over `window` seconds,
    from `settle` seconds after its start."""
    agents = Agents(lab, inventory, log_dir, hosts=[HOST])
    try:
        # Not start_all(): it waits for every path to answer, and synthetic peers never do.
        agents.start(HOST)
        deadline = time.monotonic() + 30.0
        while True:
            agents.check_alive(HOST)
            try:
                agents.status(HOST)
                break
            except (OSError, ValueError):
                if time.monotonic() > deadline:
                    raise BenchmarkError('the agent on r1h1 did not answer status in 30 s:\n%s' % agents.tail(HOST)) from None
                time.sleep(0.2)
        with pings(lab, TALKING):
            time.sleep(settle)  # past the start (and, given enough, the idle paths' first rounds)
            cpu, rate, _confirmations = agent_window(agents, {HOST: agents.current(HOST).pid}, window)[HOST]
        return cpu, rate, len(agents.status(HOST)['peers'])
    finally:
        agents.stop_all()


def measure(peers, window, settle, log):
    lab = Lab('default', name='peers-%s' % uuid.uuid4().hex[:6])
    out = {}
    with tempfile.TemporaryDirectory(prefix='edgeft-peers-') as work:
        inventory = Path(work) / 'hosts.yml'
        extra = Path(work) / 'synthetic.yml'
        try:
            log('lab up, site.yml on the 4 hosts')
            lab.up(inventory=inventory)
            deploy(lab, inventory)
            log('r1h1 with 3 peers, 2 talking: agent for %g s' % window)
            out['agent_cpu_pct'], out['probes_per_s'], out['agent_peers'] = agent_with_two_peers(lab, inventory, work, window, settle)
            synthetic_inventory(lab, peers - len(REAL), extra)
            # r1h1's managed entries for its synthetic peers, in the table every namespace of the
            # machine shares: raised as the lab raises it for its own hosts, and put back at its down.
            entries = (peers - len(REAL)) * len(lab.topology.planes)
            out['neigh_limit_before'] = int(NEIGH_LIMIT.read_text())
            lab.reserve_neighbour_entries({4: entries, 6: entries})
            both = ['-i', str(extra), '--limit', HOST, '-e', '{"ebpf_failover_gate_must_answer": %s}' % json.dumps(
                [h for h in REAL if h != HOST])]
            log('site.yml --limit r1h1 with %d peers' % (peers - 1))
            out['deploy_s'], _cpu = playbook_seconds(inventory, 'playbooks/site.yml', *both)
            start = time.monotonic()
            rc, text, recap = run_playbook(inventory, 'playbooks/site.yml', '--diff', *both)
            out['redeploy_s'] = time.monotonic() - start
            if rc != 0:
                raise BenchmarkError('the second site.yml failed (rc %d): %s' % (rc, text[-6000:]))
            # The synthetic peers never answer ARP or neighbour discovery: the kernel may drop
            # their managed entries once they fail, and the peer table then adds them again.
            out['redeploy_changed'] = changed_tasks(text)
            out['neighbours_readded'] = len(re.findall(r'^\+ +"\S+ dev fab\d+",?$', text, re.M))
            out['neigh_limit_after'] = int(NEIGH_LIMIT.read_text())
            log('r1h1 with %d peers, 2 talking: agent for %g s' % (peers - 1, window))
            out['agent_cpu_big_pct'], out['probes_big_per_s'], out['agent_big_peers'] = agent_with_two_peers(
                lab, inventory, work, window, settle)
        finally:
            lab_down(lab)
    return out


def format_table(r, peers):
    rows = [('peers in r1h1\'s table', r['agent_peers'], r['agent_big_peers']),
            ('agent CPU, 2 peers talking (% of a core)', r['agent_cpu_pct'], r['agent_cpu_big_pct']),
            ('probes sent per second, 2 peers talking', r['probes_per_s'], r['probes_big_per_s'])]
    head = ('', '4-host fabric', '%d-host fabric' % peers, 'ratio')
    lines = [head] + [(label, '%.1f' % small, '%.1f' % big, '%.2f' % (big / small if small else 0)) for label, small, big in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(4)]
    table = '\n'.join('  '.join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(line)) for line in lines)
    return table + ('\nsite.yml --limit r1h1 with %d peers: %.1f s, again %.1f s (changed: %s; neighbour entries added '
                    'again: %d); IPv4 gc_thresh3 %d -> %d'
                    % (peers - 1, r['deploy_s'], r['redeploy_s'], '; '.join(r['redeploy_changed']) or 'nothing',
                       r['neighbours_readded'], r['neigh_limit_before'], r['neigh_limit_after']))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    p.add_argument('--peers', type=int, default=4096, help='fabric size, r1h1 included (more than 4)')
    p.add_argument('--window', type=float, default=10.0, help='seconds the agent is measured')
    p.add_argument('--settle', type=float, default=5.0, help='seconds from the agent\'s start to the window')
    p.add_argument('--json', action='store_true', help='print the figures as JSON')
    args = p.parse_args(argv)
    if args.peers <= len(REAL):
        p.error('--peers must be more than %d' % len(REAL))
    if args.window <= 0 or args.settle < 0:
        p.error('--window must be more than 0 and --settle at least 0')
    try:
        result = measure(args.peers, args.window, args.settle, lambda m: print(m, file=sys.stderr, flush=True))
    except BenchmarkError as e:
        print('one_host_peers: %s' % e, file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2) if args.json else format_table(result, args.peers))
    return 0


if __name__ == '__main__':
    sys.exit(main())
