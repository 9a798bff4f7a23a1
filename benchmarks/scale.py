"""Fleet scale: what deploying, draining and the agents cost as the fabric grows.

    sudo .venv/bin/python benchmarks/scale.py [--sizes 4,16,64] [--window 30] [--json]

For each size (hosts; 4 is the default lab's 2 racks x 2, larger sizes are racks of 4, or give
RACKSxHOSTS such as 8x4), on a lab of its own (a unique name, torn down at the end even on
errors), in order:

1. lab up, and one unlimited TCP stream r1h1 -> r2h1 on plane a for --stream seconds, before
   anything of edgeft is on the hosts;
2. playbooks/site.yml (first deploy), then again: the second run must change nothing; then the
   same stream again, through the failover programs on both hosts' NICs (no agent running);
3. playbooks/switch_drain.yml and switch_undrain.yml of ToR tor-r1-a, then of spine spine-b;
   each drain's CPU too: all of it (the playbook, its workers and every module run on the lab's
   hosts, which share this machine), the part the module runs on the hosts used (recorded by a
   shell wrapper around python3 as the hosts' interpreter), the controller's rest, and the whole divided by
   the machine's cores: the least wall time the drain could take here, however well its steps
   overlapped;
4. one agent per host (as the lab runs them), idle for --window seconds: CPU (% of one core per
   host, from /proc over the window), probes sent per second per host (the agents' counters),
   RSS, and the series of one host's /metrics; then the same CPU and probes for another window
   while every host talks to 2 peers: it pings the next host of the fabric 10 times a second
   and is pinged by the one before it (ICMP is traffic to the data path, as any packet but a
   probe).

It prints one table, a column per size and, last, the ratio of the largest size's figure to the
smallest's (the issue's measure: costs that do not grow with the fleet keep it near 1). The
exit status is 1 only when the benchmark could not measure (a lab, a playbook or an agent
failed), never because of the figures. Figures are wall times on a shared 2-core machine:
compare the ratios of one run, not runs on different days. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for folder in (REPO / 'lab', REPO / 'benchmarks'):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from edgeft_lab import Lab, netns  # noqa: E402
from edgeft_lab.agents import METRICS_TIMEOUT, Agents  # noqa: E402
from edgeft_lab.errors import LabError  # noqa: E402
from edgeft_lab.topology import load_topology  # noqa: E402
from edgeft_lab.traffic import TcpStream, host_address  # noqa: E402
from redeploy_under_load import BenchmarkError, deploy, lab_down, run_playbook  # noqa: E402

TOR, SPINE = 'tor-r1-a', 'spine-b'
CLOCK_TICKS = os.sysconf('SC_CLK_TCK')
CORES = len(os.sched_getaffinity(0))
ROWS = (
    ('lab_up_s', 'lab up (s)'),
    ('deploy_s', 'site.yml, first (s)'),
    ('redeploy_s', 'site.yml, again, changed=0 (s)'),
    ('tor_drain_s', 'ToR drain (s)'),
    ('tor_undrain_s', 'ToR undrain (s)'),
    ('spine_drain_s', 'spine drain (s)'),
    ('spine_undrain_s', 'spine undrain (s)'),
    ('tor_drain_cpu_s', 'ToR drain, CPU of the playbook and its module runs (s)'),
    ('spine_drain_cpu_s', 'spine drain, CPU of the playbook and its module runs (s)'),
    ('spine_drain_hosts_cpu_s', '... of which module runs on the hosts (s)'),
    ('spine_drain_controller_cpu_s', '... of which the controller (s)'),
    ('spine_drain_floor_s', "spine drain, its CPU spread over the machine's cores (s)"),
    ('agent_cpu_pct', 'agent CPU, idle (% of a core per host, mean)'),
    ('agent_cpu_max_pct', 'agent CPU, idle (% of a core, busiest host)'),
    ('probes_per_s', 'probes sent per second per host, idle (mean)'),
    ('agent_cpu_busy_pct', 'agent CPU, 2 peers with traffic (% of a core per host, mean)'),
    ('probes_busy_per_s', 'probes sent per second per host, 2 peers with traffic (mean)'),
    ('confirmations_busy_per_s', '... of which confirmations of a late or lost reply'),
    ('agent_rss_mb', 'agent RSS (MB per host, mean)'),
    ('metrics_series', '/metrics series of one host'),
    ('tcp_bare_mbps', 'one TCP stream, before site.yml (Mbit/s)'),
    ('tcp_edgeft_mbps', 'one TCP stream, programs attached (Mbit/s)'),
    ('tcp_ratio', 'throughput ratio, attached / before'),
)


def parse_size(text):
    """(racks, hosts per rack) of '16' (racks of 4; 4 is 2x2) or '8x4'."""
    if 'x' in text:
        racks, per_rack = (int(part) for part in text.split('x', 1))
    else:
        hosts = int(text)
        racks, per_rack = (2, 2) if hosts == 4 else (hosts // 4, 4)
        if racks * per_rack != hosts:
            raise argparse.ArgumentTypeError('%s hosts: give a multiple of 4, or RACKSxHOSTS' % text)
    if racks < 2 or per_rack < 1:
        raise argparse.ArgumentTypeError('%s: at least 2 racks of 1 host' % text)
    return racks, per_rack


def changed_tasks(out):
    """['task: hosts'] of the tasks that reported a change in a playbook's output."""
    found, task = {}, None
    for line in out.splitlines():
        if line.startswith('TASK ['):
            task = line[6:line.rfind(']')]
        elif line.startswith('changed: [') and task:
            found.setdefault(task, []).append(line[10:line.index(']')])
    return ['%s: %s' % (task, ', '.join(hosts)) for task, hosts in found.items()]


def children_cpu_s():
    """CPU seconds of every finished descendant: ansible-playbook, its workers and, through the
    lab's connection, every module run on the hosts (the lab's hosts share this machine)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def playbook_seconds(inventory, playbook, *extra):
    """(wall seconds, CPU seconds) of one playbook run."""
    start, cpu = time.monotonic(), children_cpu_s()
    rc, out, _recap = run_playbook(inventory, playbook, *extra)
    if rc != 0:
        raise BenchmarkError('%s %s failed (rc %d):\n%s' % (playbook, ' '.join(extra), rc, out[-6000:]))
    return time.monotonic() - start, children_cpu_s() - cpu


def timed_interpreter(work):
    """(path of a python3 that records the CPU of each of its runs and the network namespace it
    ran in, and a function summing what the runs on the lab's hosts - every namespace but this
    one - recorded, forgetting it). The shell's `times` gives its children's CPU; each run
    writes a file of its own, so runs at the same moment do not mix their lines."""
    folder = Path(work) / 'module-cpu'
    folder.mkdir(exist_ok=True)
    wrapper = Path(work) / 'python3'
    wrapper.write_text('#!/bin/sh\n/usr/bin/python3 "$@"\nrc=$?\n{ times; readlink /proc/self/ns/net; } > %s/$$\nexit $rc\n'
                       % shlex.quote(str(folder)))
    wrapper.chmod(0o755)
    here = os.readlink('/proc/self/ns/net')

    def seconds(text):  # `times` prints 0m0.210000s (dash) or 0m0.210s (bash)
        minutes, rest = text.rstrip('s').split('m')
        return 60 * float(minutes) + float(rest)

    def hosts_cpu_s():
        total = 0.0
        for record in folder.iterdir():
            _shell, children, ns = record.read_text().splitlines()[:3]
            if ns != here:
                total += sum(seconds(field) for field in children.split())
            record.unlink()
        return total
    return str(wrapper), hosts_cpu_s


def drain_figures(inventory, work, kind, switch):
    """The drain and undrain of one switch: wall times, and the drain's CPU, all of it and the
    part of it that ran on the lab's hosts (the rest is the controller's)."""
    interpreter, hosts_cpu_s = timed_interpreter(work)
    figures = {}
    figures['%s_drain_s' % kind], cpu = playbook_seconds(inventory, 'playbooks/switch_drain.yml', '-e', 'edgeft_switch=%s' % switch,
                                                         '-e', 'ansible_python_interpreter=%s' % interpreter)
    figures.update({'%s_drain_cpu_s' % kind: cpu, '%s_drain_floor_s' % kind: cpu / CORES,
                    '%s_drain_hosts_cpu_s' % kind: hosts_cpu_s()})
    figures['%s_drain_controller_cpu_s' % kind] = cpu - figures['%s_drain_hosts_cpu_s' % kind]
    figures['%s_undrain_s' % kind], _cpu = playbook_seconds(inventory, 'playbooks/switch_undrain.yml', '-e', 'edgeft_switch=%s' % switch)
    return figures


def cpu_ticks(pid):
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime (fields 14 and 15 of stat)


def rss_mb(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024
    return 0.0


def probes_sent(agents, host):
    """(probes sent, of which confirmations) by the host's agent so far, over its planes."""
    metrics = agents.metrics(host)
    return tuple(sum(value for (name, _labels), value in metrics.items() if name == counter)
                 for counter in ('edgeft_plane_probes_sent_total', 'edgeft_plane_confirmations_total'))


def agent_window(agents, pids, window):
    """{host: (% of a core, probes sent per second, of which confirmations per second)} over
    about `window` seconds. Each host's figures are divided by its own interval between its two
    readings: reading 64 agents' /metrics one after another takes seconds on a loaded machine."""
    first = {host: (time.monotonic(), cpu_ticks(pid), probes_sent(agents, host)) for host, pid in pids.items()}
    time.sleep(window)
    out = {}
    for host, pid in pids.items():
        ticks, counters, now = cpu_ticks(pid), probes_sent(agents, host), time.monotonic()
        start, ticks_before, counters_before = first[host]
        seconds = now - start
        probes, confirmations = (after - before for after, before in zip(counters, counters_before))
        out[host] = (100.0 * (ticks - ticks_before) / CLOCK_TICKS / seconds, probes / seconds, confirmations / seconds)
    return out


@contextlib.contextmanager
def pings(lab, pairs):
    """Each (source, destination) host pair: the source pings the destination's first-plane
    address 10 times a second while the block runs; the processes are ended by their PIDs."""
    procs = []
    try:
        for src, dst in pairs:
            argv = netns.exec_argv(lab.plan.host(src).netns, ['ping', '-q', '-n', '-i', '0.1', host_address(lab, dst)])
            procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        yield
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)


def _mean(values):
    values = list(values)
    return round(sum(values) / len(values), 2)


def agent_figures(lab, inventory, log_dir, window, log):
    """Agents on every host, idle then with 2 peers each, `window` seconds each: CPU, probes/s,
    RSS, series."""
    agents = Agents(lab, inventory, log_dir)
    try:
        agents.start_all()
        time.sleep(min(5.0, window))  # past the start: the first full round of probes
        hosts = list(agents.hosts)
        pids = {host: agents.current(host).pid for host in hosts}
        idle = agent_window(agents, pids, window)
        series = [line for line in agents.get(hosts[0], '/metrics', METRICS_TIMEOUT).decode().splitlines() if line and not line.startswith('#')]
        # Each host pings the next one (the last the first): every host talks to 2 peers.
        with pings(lab, zip(hosts, hosts[1:] + hosts[:1])):
            time.sleep(2.0)  # every peer's paths at the full rate
            busy = agent_window(agents, pids, window)
        figures = {
            'agent_cpu_pct': _mean(cpu for cpu, _rate, _confirm in idle.values()),
            'agent_cpu_max_pct': round(max(cpu for cpu, _rate, _confirm in idle.values()), 2),
            'probes_per_s': _mean(rate for _cpu, rate, _confirm in idle.values()),
            'agent_cpu_busy_pct': _mean(cpu for cpu, _rate, _confirm in busy.values()),
            'probes_busy_per_s': _mean(rate for _cpu, rate, _confirm in busy.values()),
            'confirmations_busy_per_s': _mean(confirm for _cpu, _rate, confirm in busy.values()),
            'agent_rss_mb': _mean(rss_mb(pid) for pid in pids.values()),
            'metrics_series': len(series),
        }
        log('  agents: idle %.2f %% CPU and %.0f probes/s per host; with 2 peers %.2f %% and %.0f probes/s'
            % (figures['agent_cpu_pct'], figures['probes_per_s'], figures['agent_cpu_busy_pct'], figures['probes_busy_per_s']))
        return figures
    finally:
        agents.stop_all()


def stream_mbps(lab, seconds):
    """Goodput of one TCP stream as fast as it goes, r1h1 -> r2h1 over plane a (IPv4)."""
    stream = TcpStream(lab, 'r1h1', 'r2h1', plane='a', rate_bps=None)
    with stream:
        time.sleep(seconds)
    result = stream.result()
    if result.resets or not result.bytes_received:
        raise BenchmarkError('the TCP stream did not get through: %s' % result.summary())
    return result.goodput_mbps


def measure_size(racks, per_rack, window, log, stream_s=5.0):
    topology = replace(load_topology('default'), hosts_per_rack=(per_rack,) * racks)
    lab = Lab(topology.renamed('scale-%s' % uuid.uuid4().hex[:6]))
    figures = {'hosts': racks * per_rack, 'racks': racks}
    with tempfile.TemporaryDirectory(prefix='edgeft-scale-') as work:
        inventory = Path(work) / 'hosts.yml'
        try:
            log('%d hosts (%d racks of %d): lab up' % (racks * per_rack, racks, per_rack))
            start = time.monotonic()
            lab.up(inventory=inventory)
            figures['lab_up_s'] = time.monotonic() - start
            figures['tcp_bare_mbps'] = stream_mbps(lab, stream_s)
            log('  site.yml')
            figures['deploy_s'], _changed = deploy(lab, inventory)
            start = time.monotonic()
            rc, out, recap = run_playbook(inventory, 'playbooks/site.yml')
            figures['redeploy_s'] = time.monotonic() - start
            if rc != 0 or any(changed for changed, _failed in recap.values()):
                raise BenchmarkError('the second site.yml was not a no-op (rc %d): %s' % (rc, changed_tasks(out) or out[-3000:]))
            figures['tcp_edgeft_mbps'] = stream_mbps(lab, stream_s)
            figures['tcp_ratio'] = round(figures['tcp_edgeft_mbps'] / figures['tcp_bare_mbps'], 3)
            log('  one TCP stream: %.0f Mbit/s before site.yml, %.0f with the programs attached'
                % (figures['tcp_bare_mbps'], figures['tcp_edgeft_mbps']))
            for switch, kind in ((TOR, 'tor'), (SPINE, 'spine')):
                log('  drain and undrain %s' % switch)
                figures.update(drain_figures(inventory, work, kind, switch))
            figures.update(agent_figures(lab, inventory, Path(work), window, log))
        finally:
            lab_down(lab)
    return figures


def format_table(runs):
    sizes = ['%d hosts' % run['hosts'] for run in runs]
    head = ['', *sizes, 'ratio %s / %s' % (sizes[-1], sizes[0])] if len(runs) > 1 else ['', *sizes]
    lines = [head]
    for key, label in ROWS:
        values = [run.get(key) for run in runs]
        form = '%.3f' if key.endswith('_ratio') else '%.1f'  # a ratio near 1 needs its third digit
        cells = [label] + [form % v if isinstance(v, float) else str(v) for v in values]
        if len(runs) > 1:
            first, last = values[0], values[-1]
            cells.append('%.2f' % (last / first) if first else '-')
        lines.append(cells)
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return '\n'.join('  '.join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row))
                     for row in lines)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    p.add_argument('--sizes', default='4,16,64', help='comma-separated sizes: hosts (racks of 4) or RACKSxHOSTS')
    p.add_argument('--window', type=float, default=30.0, help='seconds the idle agents are measured')
    p.add_argument('--stream', type=float, default=5.0, help='seconds of each throughput stream')
    p.add_argument('--json', action='store_true', help='print the figures as JSON')
    args = p.parse_args(argv)
    args.sizes = [parse_size(s.strip()) for s in args.sizes.split(',') if s.strip()]
    return args


def _interrupt(signum, frame):
    raise KeyboardInterrupt  # the labs' finally blocks tear them down


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if os.geteuid() != 0:
        sys.exit('scale.py needs root (namespaces, BPF, tc)')
    signal.signal(signal.SIGTERM, _interrupt)
    log = (lambda message: None) if args.json else (lambda message: print(message, file=sys.stderr, flush=True))
    try:
        runs = [measure_size(racks, per_rack, args.window, log, args.stream) for racks, per_rack in args.sizes]
    except (BenchmarkError, LabError) as e:
        print('scale: %s' % e, file=sys.stderr)
        return 1
    print(json.dumps(runs, indent=1) if args.json else format_table(runs))
    return 0


if __name__ == '__main__':
    sys.exit(main())
