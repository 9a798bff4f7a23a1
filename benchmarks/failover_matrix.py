"""Failover over the fault matrix: the outage each fault causes without protection, with kernel backup routes, and with edgeft.

    sudo .venv/bin/python benchmarks/failover_matrix.py [--faults a,b,...] [--modes a,b,...] [--family 4|6]
                                                        [--topology l2|routed] [--pps 10000] [--lead 0.5]
                                                        [--fault-seconds 2] [--tail 2.5] [--quiet 60]
                                                        [--tcp-settings on|off] [--busy] [--json]

On a lab of its own (tests/lab/agent/fabric.yml: r1h1 in rack 1, r2h1 in rack 2, planes a and b;
a unique name, torn down at the end even on errors or Ctrl-C), a 10 kpps UDP stream and a
50 Mbit/s TCP stream run r1h1 -> r2h1's plane-a address while each fault is injected for
--fault-seconds and repaired. Every fault runs in three modes (--modes: some of them), in this order:

1. none: nothing deployed, the traffic simply rides plane a;
2. backup-routes: kernel backup routes only, set by the collection's backup_routes module with its
   defaults (BackupRoutesMode), no eBPF, no agent;
3. edgeft: playbooks/site.yml deployed and one agent process per host.

The edgeft mode also measures --quiet seconds of traffic with no fault (the "no-fault" row:
its failover count must be 0). Per run it reports the UDP max gap and loss, the TCP max stall,
resets and whether the connection survived, and the agents' failovers, as a table or as JSON
(--json). The exit status is 1 only for errors (lab, deployment, agents, traffic), never
because of the figures; 2 for bad options. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO / 'lab') not in sys.path:
    sys.path.insert(0, str(REPO / 'lab'))

from edgeft_lab import Lab, netns  # noqa: E402
from edgeft_lab.agents import (AgentError, Agents, _collection_module, ansible_env, clear_learned, host_vars,  # noqa: E402
                               run_playbook, settled, steered)
from edgeft_lab.traffic import TcpStream, UdpStream, host_address  # noqa: E402
from redeploy_under_load import run_reported  # noqa: E402  (this folder)

# Two racks of one host; planes L2 (one segment each) or routed (leaf-spine routing only the
# plane's own prefixes, where edgeft steers by translating to failover addresses).
TOPOLOGIES = {'l2': REPO / 'tests' / 'lab' / 'agent' / 'fabric.yml', 'routed': REPO / 'tests' / 'lab' / 'agent' / 'fabric_routed.yml'}
SRC, DST, PLANE, BACKUP_PLANE = 'r1h1', 'r2h1', 'a', 'b'
MODES = ('none', 'backup-routes', 'edgeft')
# Kernel backup routes reach a peer's plane-a address through plane b only where plane b
# carries it, on one L2 segment: a routed plane b drops it, so that mode is L2's alone.
TOPOLOGY_MODES = {'l2': MODES, 'routed': ('none', 'edgeft')}
NO_FAULT = 'no-fault'
TCP_RATE_BPS = 50e6
# After a flap, dampening may hold a failback back for up to max_suppress_ms (20 s).
SETTLE_TIMEOUT = 40.0
# Pings give a peer that learned a plane down the native packet that unlearns it.
UNLEARN_TIMEOUT = 3.0
# The datagram that proves a backup route before the backup-routes runs.
CHECK_PORT, CHECK_TIMEOUT = 7599, 3.0

# name: (what it does to the lab, for people; how to inject it for `seconds`)
FAULTS = {
    'sender-link': ("r1h1's plane-a NIC down (host side)",
                    lambda lab, seconds: lab.link_down('r1h1', 'a', side='host')),
    'receiver-link': ("r2h1's plane-a NIC down (host side)",
                      lambda lab, seconds: lab.link_down('r2h1', 'a', side='host')),
    'tor-power-off': ("the sender's ToR tor-r1-a powered off (r1h1 loses carrier on fab0)",
                      lambda lab, seconds: lab.power_off('tor-r1-a')),
    'silent-tor': ("the receiver's ToR tor-r2-a forwards nothing, links stay up",
                   lambda lab, seconds: lab.silence('tor-r2-a')),
    'spine': ("spine-a powered off (the hosts' links stay up)",
              lambda lab, seconds: lab.power_off('spine-a')),
    'loss-30': ("30% random loss in each direction of r1h1's plane-a link",
                lambda lab, seconds: lab.loss(30, host='r1h1', plane='a')),
    'flap-5hz': ("r1h1's plane-a link flapping at 5 Hz (switch side)",
                 lambda lab, seconds: lab.flap('r1h1', 'a', hz=5, duration=seconds)),
}


class BenchmarkError(Exception):
    """The benchmark could not measure what it measures (not: bad figures)."""


class Settings:
    """One run's parameters, shared by every run of the benchmark."""

    def __init__(self, pps, family, lead, fault_seconds, tail, quiet, busy=False):
        self.pps, self.family = pps, family
        self.lead, self.fault_seconds, self.tail, self.quiet = lead, fault_seconds, tail, quiet
        self.busy = busy


class Mode:
    """What a mode adds to the lab: set up, after a repair, waiting for a neutral lab, tear down.
    As it stands: no protection at all."""

    name = 'none'
    agents = None

    def setup(self, lab, log):
        pass

    def after_repair(self):
        pass

    def settle(self, lab):
        """Until the lab carries traffic as before the fault: every host reaches every other on every plane.
        Returns what the report should know about it ({}: nothing)."""
        wait_for_pings(lab, time.monotonic() + SETTLE_TIMEOUT)
        return {}

    def teardown(self):
        pass


class BackupRoutesMode(Mode):
    """Kernel backup routes only, as the collection ships them: the edgeft.failover.backup_routes
    module's core (plugins/module_utils/backup_routes, run.backup_routes) run in each host's
    namespace with the module's documented defaults; no eBPF, no agent.

    Each host declares, for every other host's plane-a address (/32 and /128), the via fab0
    (metric 100) and the via the peer's plane-b address on fab1 (metric 200), with its own
    plane-a address as src. The core sets ignore_routes_with_linkdown on both NICs (and puts
    the old values back at the end), so the kernel skips the fab0 route once fab0 has no carrier.
    No `rto_min_ms`: the option is off by default, and the baseline is what an operator gets
    from the module's defaults (docs/decisions.md, "Benchmarks"). The core leaves rp_filter
    alone (its docs ask for it not strict; in the lab it is off): check_backup_route() proves
    that each backup route carries a datagram before anything is measured. The state_dir is each host's
    edgeft_state_dir from the lab inventory, as site.yml runs the module.
    """

    name = 'backup-routes'

    def __init__(self, lab, inventory):
        self.lab, self.inventory = lab, inventory
        self.core = _collection_module('plugins.module_utils.backup_routes.run')
        self.error = _collection_module('plugins.module_utils.errors').EdgeftError

    def setup(self, lab, log):
        log('backup-routes: edgeft.failover.backup_routes via fab0 (metric 100) and fab1 (metric 200) on %s and %s' % (SRC, DST))
        for warning in self.apply('present'):
            log('backup-routes: warning: %s' % warning)
        for family in (4, 6):
            for host, peer in ((SRC, DST), (DST, SRC)):
                check_backup_route(lab, host, peer, family)

    def after_repair(self):
        # A NIC set admin-down took its routes with it; the module's next run puts them back.
        self.apply('present')

    def teardown(self):
        self.apply('absent')

    def routes(self, host):
        """The module's `routes` option on host."""
        def address(node, plane, family):
            return host_address(self.lab, node, plane, family)
        return [{'dst': '%s/%d' % (address(peer, PLANE, family), 32 if family == 4 else 128), 'src': address(host, PLANE, family),
                 'via': [{'interface': nic(self.lab, host, PLANE)},
                         {'interface': nic(self.lab, host, BACKUP_PLANE), 'gateway': address(peer, BACKUP_PLANE, family)}]}
                for peer in (SRC, DST) if peer != host for family in (4, 6)]

    def apply(self, state):
        """Run the core on both hosts (absent: remove what it recorded); returns its warnings."""
        warnings = []
        for host in (SRC, DST):
            params = {'routes': self.routes(host) if state == 'present' else [], 'state': state,
                      'state_dir': host_vars(self.inventory, host)['edgeft_state_dir']}
            try:
                _result, found = netns.run_in(self.lab.netns(host), lambda p=params: self.core.backup_routes(p))
            except self.error as e:
                raise BenchmarkError('edgeft.failover.backup_routes (state %s) on %s: %s' % (state, host, e)) from None
            warnings += ['%s: %s' % (host, w) for w in found]
        return warnings


def check_backup_route(lab, host, peer, family):
    """One datagram from host, bound to its plane-b NIC, to peer's plane-a address: proves the backup route
    carries traffic end to end (neighbour resolution, the peer accepting its plane-a address on plane b)."""
    af = socket.AF_INET if family == 4 else socket.AF_INET6
    target = host_address(lab, peer, PLANE, family)
    rx, tx = lab.socket(peer, af, socket.SOCK_DGRAM), lab.socket(host, af, socket.SOCK_DGRAM)
    try:
        rx.bind((target, CHECK_PORT))
        rx.settimeout(0.2)
        tx.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, nic(lab, host, BACKUP_PLANE).encode())  # only the backup route
        deadline = time.monotonic() + CHECK_TIMEOUT
        while time.monotonic() < deadline:
            tx.sendto(b'edgeft backup route check', (target, CHECK_PORT))
            try:
                rx.recvfrom(64)
                return
            except socket.timeout:
                continue
    finally:
        rx.close()
        tx.close()
    raise BenchmarkError('backup route %s -> %s over %s (IPv%d) carries nothing within %.0f s'
                         % (host, target, nic(lab, host, BACKUP_PLANE), family, CHECK_TIMEOUT))


def nic(lab, host, plane):
    return lab.plan.host(host).port(plane).ifname


class EdgeftMode(Mode):
    name = 'edgeft'

    def __init__(self, inventory, log_dir, report, tcp_settings=True, realtime=False):
        self.inventory, self.log_dir, self.report, self.realtime = inventory, log_dir, report, realtime
        # Off: the TCP program keeps the kernel's RTO and delayed-ACK values (its signal stays).
        self.extra = [] if tcp_settings else ['-e', 'ebpf_failover_agent_tcp_rto_min_ms=0',
                                              '-e', 'ebpf_failover_agent_tcp_delack_max_ms=0']

    def setup(self, lab, log):
        log('edgeft: deploying with playbooks/site.yml')
        start = time.monotonic()
        rc, out = run_playbook(self.inventory, REPO / 'playbooks' / 'site.yml', *self.extra)
        if rc != 0:
            raise BenchmarkError('playbooks/site.yml failed (rc %d):\n%s' % (rc, out[-6000:]))
        self.report['deploy_s'] = round(time.monotonic() - start, 1)
        self.agents = Agents(lab, self.inventory, self.log_dir, hosts=(SRC, DST), realtime=self.realtime)
        settings = self.agents.settings(SRC)
        kept = ('interval_ms', 'multiplier', 'confirm_interval_ms', 'hold_down_ms', 'dampening', 'tcp')
        self.report['agent'] = {k: settings.get(k) for k in kept}
        log('edgeft: starting one agent per host (%s)' % ', '.join(self.agents.hosts))
        self.agents.start_all()

    def settle(self, lab):
        """Until the agents failed back and the data path sends on plane a again; what was left steered, if anything.

        A peer that learned a plane down from steered traffic unlearns it at the first native
        packet, which the pings provide. If both hosts learned it from each other, neither sends
        natively again: that is recorded and the learned bits are cleared, so the next run starts
        from a neutral lab.
        """
        try:
            self.agents.wait_judged_up(timeout=SETTLE_TIMEOUT)
        except AgentError as e:
            raise BenchmarkError('the agents did not fail back within %.0f s of the repair: %s' % (SETTLE_TIMEOUT, e)) from None
        left = self._wait_back_on_plane_a(lab, time.monotonic() + UNLEARN_TIMEOUT)
        if not left:
            return {}
        cleared = clear_learned(lab, self.agents.hosts)
        still = self._wait_back_on_plane_a(lab, time.monotonic() + UNLEARN_TIMEOUT)
        if still:
            raise BenchmarkError('traffic stays off plane a after the repair, also with learned bits cleared: %s' % json.dumps(still))
        return {'left_steered': left, 'cleared_learned': cleared}

    def _wait_back_on_plane_a(self, lab, deadline):
        """{} once every agent is settled, else (at the deadline) {host: steered peers}."""
        while True:
            wait_for_pings(lab, deadline + SETTLE_TIMEOUT)
            statuses = {}
            for host in self.agents.hosts:
                self.agents.check_alive(host)
                statuses[host] = self.agents.status(host)
            if all(settled(st) for st in statuses.values()):
                return {}
            if time.monotonic() > deadline:
                return {host: steered(st) for host, st in statuses.items()}
            time.sleep(0.2)

    def teardown(self):
        if self.agents is not None:
            self.agents.stop_all()


def wait_for_pings(lab, deadline):
    while True:
        matrix = lab.ping_matrix(count=1, timeout=0.5)
        if matrix.ok:
            return
        if time.monotonic() > deadline:
            raise BenchmarkError('lab %s did not recover after the repair:\n%s' % (lab.name, matrix.format()))
        time.sleep(0.2)


def measure(lab, settings, mode, fault):
    """One run: traffic, the fault (or none, for `quiet` seconds), the repair, the tail. Returns its record."""
    udp = UdpStream(lab, SRC, DST, plane=PLANE, family=settings.family, pps=settings.pps)
    tcp = TcpStream(lab, SRC, DST, plane=PLANE, family=settings.family, rate_bps=TCP_RATE_BPS)
    streams = (udp, tcp)
    start_ns = time.monotonic_ns()
    fault_ns = None
    with contextlib.ExitStack() as stack:
        try:
            for stream in streams:
                stack.enter_context(stream)
            if fault == NO_FAULT:
                with busy(settings.busy):
                    time.sleep(settings.quiet)
            else:
                time.sleep(settings.lead)
                mark(streams, 'fault')
                fault_ns = time.monotonic_ns()
                FAULTS[fault][1](lab, settings.fault_seconds)
                time.sleep(settings.fault_seconds)
                mark(streams, 'repair')
                lab.repair_all()
                mode.after_repair()
                time.sleep(settings.tail)
        finally:
            lab.repair_all()  # also when a stream or an injection failed: the lab must not keep a fault
    end_ns = time.monotonic_ns()
    u, t = udp.result(), tcp.result()
    record = {'fault': fault, 'mode': mode.name, 'seconds': round((end_ns - start_ns) / 1e9, 2),
              'udp': u.as_dict(), 'tcp': t.as_dict()}
    if mode.agents is not None:
        record.update(agent_events(mode.agents, start_ns, end_ns, fault_ns, u.start_ns))
    return record


@contextlib.contextmanager
def busy(on):
    """With on, one process per CPU spinning for as long as the block runs (ended by their PIDs)."""
    procs = [subprocess.Popen([sys.executable, '-c', 'while True: pass']) for _cpu in range(os.cpu_count() or 1)] if on else []
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def mark(streams, label):
    for stream in streams:
        stream.mark(label)


def agent_events(agents, start_ns, end_ns, fault_ns, stream_start_ns):
    """The agents' state changes during a run: failover and failback counts, the events (`at_ms`:
    from the UDP stream's start, like its marks and gaps), the first failover's delay after the fault."""
    events = []
    for host in agents.hosts:
        for event in agents.events(host, since_ns=start_ns):
            if event['t_ns'] <= end_ns:
                events.append(dict(event, host=host, at_ms=round((event['t_ns'] - stream_start_ns) / 1e6, 1)))
    events.sort(key=lambda e: e['t_ns'])
    failovers = [e for e in events if e['kind'] == 'failover']
    first = None
    if failovers and fault_ns is not None:
        first = round((failovers[0]['t_ns'] - fault_ns) / 1e6, 1)
    return {'failovers': len(failovers), 'failbacks': sum(e['kind'] == 'failback' for e in events),
            'first_failover_after_fault_ms': first, 'events': events}


def run_mode(lab, settings, mode, faults, log):
    """Every run of one mode; the mode's additions are removed at the end, also on errors."""
    records = []
    try:
        mode.setup(lab, log)
        runs = list(faults)
        if mode.name == 'edgeft' and settings.quiet > 0:
            runs.insert(0, NO_FAULT)  # first, on the freshly deployed lab
        for fault in runs:
            log('%s: %s' % (mode.name, fault if fault != NO_FAULT else 'no fault for %g s' % settings.quiet))
            record = measure(lab, settings, mode, fault)
            records.append(record)
            start = time.monotonic()
            record['after_repair'] = dict(mode.settle(lab), settle_s=round(time.monotonic() - start, 2))
    finally:
        mode.teardown()
    return records


def check_prerequisites():
    if os.geteuid() != 0:
        raise BenchmarkError('needs root (network namespaces, tc, bpf): run it with sudo')
    if not (Path(ansible_env()['ANSIBLE_COLLECTIONS_PATH'].split(os.pathsep)[0]) / 'ansible_collections/edgeft/failover').exists():
        raise BenchmarkError('edgeft.failover is not on the collections path: run scripts/bootstrap.sh first')


def run_benchmark(faults=None, family=4, pps=10_000, lead=0.5, fault_seconds=2.0, tail=2.5, quiet=60.0, log=None,
                  topology='l2', modes=None, tcp_settings=True, busy_cpus=False):
    """The whole matrix on a lab of its own; returns the report (see benchmarks/README.md).

    faults: names from FAULTS (default all, in that order). quiet: seconds of the no-fault
    run in edgeft mode (0: none). log: called with progress lines; nothing is printed otherwise.
    topology: 'l2' or 'routed' (TOPOLOGIES). modes: names from MODES (default every mode the topology has).
    tcp_settings: False deploys edgeft with the TCP program's RTO and delayed-ACK settings off.
    busy_cpus: the no-fault run with every CPU busy spinning, and the agents at SCHED_RR 1, as the
    role's unit runs them.
    """
    if topology not in TOPOLOGIES:
        raise BenchmarkError('unknown topology %r (known: %s)' % (topology, ', '.join(TOPOLOGIES)))
    known = TOPOLOGY_MODES[topology]
    if modes is not None and (not modes or set(modes) - set(known)):
        raise BenchmarkError('mode(s) %s: the %s topology has %s' % (','.join(modes) or '(none)', topology, ', '.join(known)))
    log = log or (lambda line: None)
    faults = list(FAULTS) if faults is None else list(faults)
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        raise BenchmarkError('unknown fault(s) %s (known: %s)' % (', '.join(unknown), ', '.join(FAULTS)))
    check_prerequisites()
    settings = Settings(pps, family, lead, fault_seconds, tail, quiet, busy_cpus)
    lab = Lab(TOPOLOGIES[topology], name='fm-%s' % uuid.uuid4().hex[:6])
    report = {
        'lab': lab.name, 'topology': str(TOPOLOGIES[topology].relative_to(REPO)), 'fabric': topology,
        'src': SRC, 'dst': DST, 'plane': PLANE,
        'address': host_address(lab, DST, PLANE, family), 'family': family, 'pps': pps, 'tcp_rate_bps': TCP_RATE_BPS,
        'lead_s': lead, 'fault_s': fault_seconds, 'tail_s': tail, 'quiet_s': quiet, 'busy_cpus': busy_cpus,
        'modes': [m for m in known if modes is None or m in modes],
        'faults': faults, 'fault_kinds': {name: FAULTS[name][0] for name in faults}, 'runs': [],
    }
    with tempfile.TemporaryDirectory(prefix='edgeft-bench-') as tmp:
        inventory = Path(tmp) / 'hosts.yml'
        modes = [m for m in (Mode(), BackupRoutesMode(lab, inventory), EdgeftMode(inventory, tmp, report, tcp_settings, busy_cpus))
                 if m.name in report['modes']]
        try:
            log('lab %s: up' % lab.name)
            lab.up(inventory=inventory)
            for mode in modes:
                report['runs'] += run_mode(lab, settings, mode, faults, log)
        finally:
            log('lab %s: down' % lab.name)
            lab.down()
    return report


def format_table(report):
    """The report as a table for people: one row per fault and mode."""
    agent = report.get('agent') or {}
    lines = [
        'failover matrix (%s planes): lab %s, %s -> %s %s (plane %s), UDP %d pps + TCP %g Mbit/s, IPv%d, fault %g s, '
        'lead %g s, tail %g s, no-fault %g s%s; agent: probes every %s ms x %s, confirmed every %s ms, hold-down %s ms; %s'
        % (report.get('fabric', 'l2'), report['lab'], report['src'], report['dst'], report['address'], report['plane'], report['pps'],
           report['tcp_rate_bps'] / 1e6, report['family'], report['fault_s'], report['lead_s'], report['tail_s'],
           report['quiet_s'], ' with every CPU busy' if report.get('busy_cpus') else '', agent.get('interval_ms', '?'), agent.get('multiplier', '?'),
           agent.get('confirm_interval_ms') or agent.get('interval_ms', '?'), agent.get('hold_down_ms', '?'),
           describe_tcp(agent.get('tcp'))),
        '',
        '%-14s %-14s %10s %11s %7s %13s %8s %7s %9s %10s' % (
            'fault', 'mode', 'outage ms', 'max gap ms', 'lost', 'TCP stall ms', 'TCP retx', 'resets', 'survived', 'failovers'),
    ]
    order = [NO_FAULT] + list(report['faults'])
    runs = sorted(report['runs'], key=lambda r: (order.index(r['fault']), MODES.index(r['mode'])))
    for r in runs:
        udp, tcp = r['udp'], r['tcp']
        lines.append('%-14s %-14s %10.1f %11.1f %7d %13.1f %8d %7d %9s %10s' % (
            r['fault'], r['mode'], udp['max_outage_ms'], udp['max_gap_ms'], udp['lost'], tcp['max_stall_ms'], tcp['retransmits'],
            tcp['resets'],
            'yes' if tcp['survived'] else 'no', r['failovers'] if 'failovers' in r else '-'))
    lines += notes(runs)
    return '\n'.join(lines)


def describe_tcp(tcp):
    """The TCP program's settings as the header states them."""
    if not tcp or not tcp.get('enabled'):
        return 'TCP program off'

    def ms(value, kernel):
        return '%d ms' % value if value else 'kernel %s' % kernel

    return 'TCP to peers: RTO min %s, delayed ACK max %s, retransmission signal %s' % (
        ms(tcp.get('rto_min_ms'), '200 ms'), ms(tcp.get('delack_max_ms'), '40-200 ms'), 'on' if tcp.get('signal') else 'off')


def notes(runs):
    """What the figures alone do not say: runs the measuring machine may have distorted, and
    runs after which traffic did not return to plane a by itself."""
    out = []
    for r in runs:
        udp = r['udp']
        if udp['socket_drops'] or udp['sender_max_gap_ms'] >= 20:
            out.append('  %s/%s: the sender paused %.1f ms, receiver socket drops %d: the max gap up to the pause is the '
                       'machine\'s, not the network\'s (the outage column excludes it)'
                       % (r['fault'], r['mode'], udp['sender_max_gap_ms'], udp['socket_drops']))
        left = r.get('after_repair', {}).get('left_steered')
        if left:
            out.append('  %s/%s: %.0f s after the agents failed back the data path still kept plane a down: %s; '
                       'the learned bits were cleared before the next run' % (
                           r['fault'], r['mode'], UNLEARN_TIMEOUT, describe_steered(left)))
    if out:
        out.insert(0, '\nnotes:')
    return out


def describe_steered(left):
    return '; '.join('%s sends to %s on %s (down %s, learned %s)' % (
        host, peer, s['active_plane'], ','.join(s['down_planes']), ','.join(s['learned_planes']) or '-')
        for host, peers in sorted(left.items()) for peer, s in sorted(peers.items()))


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float('inf'):
        raise argparse.ArgumentTypeError('%r is not a number of seconds >= 0' % text)
    return value


def _faults(text):
    names = [n.strip() for n in text.split(',') if n.strip()]
    unknown = [n for n in names if n not in FAULTS]
    if not names or unknown:
        raise argparse.ArgumentTypeError('unknown fault(s) %s; known: %s' % (', '.join(unknown) or '(none)', ','.join(FAULTS)))
    return names


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--faults', type=_faults, default=list(FAULTS),
                        help='comma-separated fault kinds (default all: %s)' % ','.join(FAULTS))
    parser.add_argument('--family', type=int, choices=(4, 6), default=4, help='IP version of the streams (default 4)')
    parser.add_argument('--topology', choices=sorted(TOPOLOGIES), default='l2',
                        help='planes as L2 segments or routed leaf-spine networks (default l2)')
    parser.add_argument('--pps', type=int, default=10_000, help='packets per second of the UDP stream (default 10000)')
    parser.add_argument('--lead', type=_seconds, default=0.5, help='seconds of traffic before the fault (default 0.5)')
    parser.add_argument('--fault-seconds', type=_seconds, default=2.0, help='seconds the fault lasts (default 2)')
    parser.add_argument('--tail', type=_seconds, default=2.5,
                        help='seconds of traffic after the repair (default 2.5: through the 1 s hold-down failback)')
    parser.add_argument('--quiet', type=_seconds, default=60.0,
                        help='seconds of the no-fault run in edgeft mode (default 60; 0: none)')
    parser.add_argument('--modes', type=lambda text: [m.strip() for m in text.split(',') if m.strip()],
                        help='comma-separated modes, run in the order %s (default every mode of the topology)' % ','.join(MODES))
    parser.add_argument('--tcp-settings', choices=('on', 'off'), default='on',
                        help="edgeft's TCP program with its RTO and delayed-ACK settings, or with the kernel's (default on)")
    parser.add_argument('--busy', action='store_true',
                        help='the no-fault run with every CPU busy, the agents at SCHED_RR 1 (as the unit runs them)')
    parser.add_argument('--json', action='store_true', help='print the whole report as JSON')
    args = parser.parse_args(argv)
    if not 1 <= args.pps <= 20_000:
        parser.error('--pps must be 1..20000')
    if args.fault_seconds <= 0:
        parser.error('--fault-seconds must be more than 0')
    if args.modes is not None and (not args.modes or set(args.modes) - set(TOPOLOGY_MODES[args.topology])):
        parser.error('--modes: choose from %s (the %s topology)' % (','.join(TOPOLOGY_MODES[args.topology]), args.topology))
    return args


def _interrupt(signum, frame):
    raise KeyboardInterrupt  # SIGTERM unwinds like Ctrl-C: the lab is torn down


def main(argv=None):
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    status, _report = run_reported('failover_matrix', lambda log: run_benchmark(
        faults=args.faults, family=args.family, pps=args.pps, lead=args.lead, fault_seconds=args.fault_seconds,
        tail=args.tail, quiet=args.quiet, topology=args.topology, modes=args.modes, tcp_settings=args.tcp_settings == 'on',
        busy_cpus=args.busy, log=log),
        args.json, format_table, errors=(BenchmarkError,))
    return status


if __name__ == '__main__':
    sys.exit(main())
