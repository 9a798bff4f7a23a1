"""Redeploy under load: replace every host's data path programs while traffic runs, and count the loss.

    sudo .venv/bin/python benchmarks/redeploy_under_load.py [--pps 10000] [--lead 1] [--tail 1]
                                                            [--baseline SECONDS] [--defines JSON] [--json]

On a lab of its own (default topology, a unique name, torn down at the end even on errors):

1. deploy edgeft with playbooks/site.yml;
2. start a UDP stream r1h1 -> r2h1 and one r2h1 -> r1h1 (10 kpps each, to the other host's
   plane-a address), run playbooks/site.yml again with changed compile-time defines
   (default EDGEFT_SEEN_RES_NS=200000), so that every host recompiles its programs and
   replaces them in place, then stop the streams;
3. baseline: the same streams for the same time, without a redeploy.

It prints sent/received/lost/max gap per stream for both runs, the redeploy's duration and
whether every attached program was really replaced (new program ids), as a table, or as JSON
with --json. The exit status is 1 only for errors (the lab, a playbook, programs that were
not replaced, so the run measured no redeploy), never because of the figures.
See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO / 'lab') not in sys.path:
    sys.path.insert(0, str(REPO / 'lab'))

from edgeft_lab import Lab  # noqa: E402
from edgeft_lab.errors import LabError  # noqa: E402
from edgeft_lab.traffic import UdpStream  # noqa: E402

DEFAULT_DEFINES = {'EDGEFT_SEEN_RES_NS': 200000}
SITE = 'playbooks/site.yml'
DATAPATH = 'playbooks/datapath.yml'  # the data path alone
STREAMS = (('r1h1', 'r2h1'), ('r2h1', 'r1h1'))
DIRECTIONS = ('ingress', 'egress')
_RECAP = re.compile(r'^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)', re.M)
_FILTER = re.compile(r'\shandle (0x[0-9a-f]+) (edgeft:\S+) .*?\bid (\d+)')


class BenchmarkError(Exception):
    """The benchmark could not measure what it measures (not: bad figures)."""


def ansible_env():
    """The environment scripts/bootstrap.sh sets up, for a run that did not source it."""
    env = dict(os.environ, ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1')
    env.setdefault('ANSIBLE_CONFIG', str(REPO / 'ansible.cfg'))
    env.setdefault('ANSIBLE_COLLECTIONS_PATH', str(REPO / '.build' / 'collections'))
    env['PATH'] = os.pathsep.join([os.path.dirname(sys.executable), env.get('PATH', '')])
    return env


def run_playbook(inventory, playbook, *extra):
    """ansible-playbook on the lab: (returncode, output, {host: (changed, failed)})."""
    proc = subprocess.run(['ansible-playbook', '-i', str(inventory), str(REPO / playbook)] + list(extra),
                          cwd=REPO, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False,
                          env=ansible_env())
    out = proc.stdout + proc.stderr
    recap = {m.group(1): (int(m.group(3)), int(m.group(4)) + int(m.group(5))) for m in _RECAP.finditer(out)}
    return proc.returncode, out, recap


def deploy(lab, inventory, *extra, playbook=SITE):
    """Run site.yml (or another playbook of the fabric); (seconds, {host: changed tasks});
    BenchmarkError if any host failed."""
    start = time.monotonic()
    rc, out, recap = run_playbook(inventory, playbook, *extra)
    seconds = time.monotonic() - start
    hosts = {h.name for h in lab.plan.hosts}
    if rc != 0 or set(recap) != hosts or any(failed for _changed, failed in recap.values()):
        raise BenchmarkError('%s %s failed (rc %d):\n%s' % (playbook, ' '.join(extra), rc, out[-6000:]))
    return seconds, {host: changed for host, (changed, _failed) in sorted(recap.items())}


def attached_programs(lab):
    """{host: {"fab0 egress": {"name": filter name, "prog_id": id}}} of edgeft's tc filters, from tc."""
    found = {}
    for host in lab.plan.hosts:
        points = found.setdefault(host.name, {})
        for plane in lab.topology.planes:
            for direction in DIRECTIONS:
                out = subprocess.run(['tc', '-n', lab.netns(host.name), 'filter', 'show', 'dev', plane.nic, direction],
                                     capture_output=True, text=True, check=True).stdout
                for handle, name, prog_id in _FILTER.findall(out):
                    points['%s %s %s' % (plane.nic, direction, handle)] = {'name': name, 'prog_id': int(prog_id)}
    return found


def compare_programs(before, after):
    """Per host and attach point: old and new program id; replaced = a new program in the same place."""
    out = {}
    for host in sorted(set(before) | set(after)):
        points = {}
        for point in sorted(set(before.get(host, {})) | set(after.get(host, {}))):
            old, new = before.get(host, {}).get(point), after.get(host, {}).get(point)
            points[point] = {
                'before': old and old['prog_id'], 'after': new and new['prog_id'],
                'replaced': bool(old and new and old['prog_id'] != new['prog_id']),
            }
        out[host] = points
    return out


def replacement(before, after):
    """Which attach points a redeploy replaced, from the programs attached before and after it."""
    programs = compare_programs(before, after)
    replaced = {host: bool(points) and all(p['replaced'] for p in points.values()) for host, points in programs.items()}
    return {'programs': programs, 'replaced': replaced, 'all_replaced': all(replaced.values()),
            'attach_points': sum(len(p) for p in programs.values()),
            'attach_points_replaced': sum(p['replaced'] for pts in programs.values() for p in pts.values())}


def stream_figures(result):
    """The figures of one UdpResult that the report shows (JSON-able)."""
    return {
        'src': result.src, 'dst': result.dst, 'address': result.address,
        'seconds': round(result.duration_s, 3), 'sent': result.sent, 'received': result.received, 'lost': result.lost,
        'max_gap_ms': result.max_gap_ms, 'max_gap_at_ms': result.max_gap_at_ms, 'gaps_over_20ms': result.gaps,
        'sender_max_gap_ms': result.sender_max_gap_ms, 'sender_stalls': result.sender_stalls,
        'send_errors': result.send_errors, 'reordered': result.reordered, 'duplicates': result.duplicates,
        'socket_drops': result.socket_drops, 'longest_loss_run': result.longest_loss_run,
        'latency_ms': result.latency_ms, 'marks': result.marks,
    }


def under_streams(lab, pps, family, seconds=None, action=None, lead=1.0, tail=1.0):
    """Run the streams of STREAMS; in between either sleep `seconds` or run `action` (after `lead`,
    followed by `tail`). Returns ([stream figures], seconds the streams ran, action's return value)."""
    streams = [UdpStream(lab, src, dst, plane=lab.topology.planes[0].name, family=family, pps=pps)
               for src, dst in STREAMS]
    returned = None
    start = time.monotonic()
    with contextlib.ExitStack() as stack:
        for stream in streams:
            stack.enter_context(stream)
        if action is None:
            time.sleep(seconds)
        else:
            time.sleep(lead)
            for stream in streams:
                stream.mark('redeploy')
            returned = action()
            for stream in streams:
                stream.mark('redeployed')
            time.sleep(tail)
    ran = time.monotonic() - start
    return [stream_figures(s.result()) for s in streams], ran, returned


def run_benchmark(pps=10_000, family=4, lead=1.0, tail=1.0, baseline=None, defines=None, log=None, loader=None,
                  playbook=SITE):
    """The whole benchmark on a lab of its own; returns the report (see benchmarks/README.md).

    playbook: the redeploy's playbook, site.yml or datapath.yml (the first deployment is site.yml's).

    baseline: seconds of the baseline run; None = as long as the redeploy run, 0 = none.
    loader: ebpf_failover_loader for both deployments (None: the role's default, object).
    log: called with progress lines (e.g. print); nothing is printed otherwise.
    """
    log = log or (lambda line: None)
    defines = dict(DEFAULT_DEFINES if defines is None else defines)
    if os.geteuid() != 0:
        raise BenchmarkError('needs root (network namespaces, tc, bpf): run it with sudo')
    if not (Path(ansible_env()['ANSIBLE_COLLECTIONS_PATH'].split(os.pathsep)[0]) / 'ansible_collections/edgeft/failover').exists():
        raise BenchmarkError('edgeft.failover is not on the collections path: run scripts/bootstrap.sh first')
    lab = Lab('default', name='bench-%s' % uuid.uuid4().hex[:6])
    report = {'lab': lab.name, 'hosts': [h.name for h in lab.plan.hosts], 'pps': pps, 'family': family,
              'defines': defines, 'loader': loader or 'object', 'playbook': playbook}
    with_loader = ('-e', json.dumps({'ebpf_failover_loader': loader})) if loader else ()
    with tempfile.TemporaryDirectory(prefix='edgeft-bench-') as tmp:
        inventory = Path(tmp) / 'hosts.yml'
        try:
            log('lab %s: up' % lab.name)
            lab.up(inventory=inventory)
            log('deploying with playbooks/site.yml')
            report['deploy_s'], report['deploy_changed'] = deploy(lab, inventory, *with_loader)
            before = attached_programs(lab)

            log('redeploy through %s with defines %s under %d pps in each direction' % (playbook, json.dumps(defines), pps))
            extra = ('-e', json.dumps({'ebpf_failover_defines': defines}), *with_loader)
            streams, ran, (seconds, changed) = under_streams(
                lab, pps, family, action=lambda: deploy(lab, inventory, *extra, playbook=playbook), lead=lead, tail=tail)
            report['redeploy'] = {'duration_s': round(seconds, 3), 'changed': changed,
                                  **replacement(before, attached_programs(lab))}
            report['runs'] = {'redeploy': {'seconds': round(ran, 3), 'streams': streams}}

            # The same time as the redeploy run: its streams' sleeps plus the playbook.
            length = lead + seconds + tail if baseline is None else baseline
            if length > 0:
                log('baseline: the same streams for %.1f s without a redeploy' % length)
                streams, ran, _none = under_streams(lab, pps, family, seconds=length)
                report['runs']['baseline'] = {'seconds': round(ran, 3), 'streams': streams}
        finally:
            log('lab %s: down' % lab.name)
            lab_down(lab)
    return report


def lab_down(lab):
    """Tear the lab down; down() also removes what deployments wrote under its run directory."""
    lab.down()


def run_reported(name, run, as_json, table, errors=()):
    """Run a benchmark, `run(log)`, and print its report (JSON or `table(report)`): (exit status,
    report or None). Its errors (`errors`, the lab's, OS and subprocess failures) and an interrupt
    are printed, not raised: 1 and 130."""
    try:
        report = run(lambda line: print('[%s] %s' % (name, line), file=sys.stderr))
    except (BenchmarkError, LabError, OSError, subprocess.CalledProcessError, *errors) as e:
        print('%s: error: %s' % (name, e), file=sys.stderr)
        return 1, None
    except KeyboardInterrupt:
        print('%s: interrupted (the lab was torn down)' % name, file=sys.stderr)
        return 130, None
    print(json.dumps(report, indent=1, sort_keys=True) if as_json else table(report))
    return 0, report


def format_table(report):
    """The report as a human-readable table."""
    red = report['redeploy']
    points, swapped = red['attach_points'], red['attach_points_replaced']
    lines = [
        'redeploy under load: lab %s, %d hosts, UDP %d pps per stream, IPv%d, defines %s, loader %s'
        % (report['lab'], len(report['hosts']), report['pps'], report['family'], json.dumps(report['defines']),
           report['loader']),
        'first deploy %.1f s; redeploy (%s, programs rebuilt and every host replacing them in place) %.1f s; '
        'programs replaced: %d of %d attach points, hosts %s'
        % (report['deploy_s'], os.path.basename(report['playbook']), red['duration_s'], swapped, points,
           ', '.join('%s %s' % (h, 'yes' if ok else 'NO') for h, ok in red['replaced'].items())),
        '',
        '%-9s %-12s %8s %9s %9s %6s %11s %9s %10s %10s' % (
            'run', 'stream', 'seconds', 'sent', 'received', 'lost', 'max gap ms', 'at ms', 'sender ms', 'gaps>=20'),
    ]
    for run in ('redeploy', 'baseline'):
        for s in report['runs'].get(run, {}).get('streams', []):
            lines.append('%-9s %-12s %8.1f %9d %9d %6d %11.1f %9.0f %10.1f %10d' % (
                run, '%s>%s' % (s['src'], s['dst']), s['seconds'], s['sent'], s['received'], s['lost'],
                s['max_gap_ms'], s['max_gap_at_ms'], s['sender_max_gap_ms'], len(s['gaps_over_20ms'])))
    marks = report['runs']['redeploy']['streams'][0]['marks']
    lines.append('')
    lines.append('redeploy ran from %.0f to %.0f ms of the redeploy run; "sender ms" is the sender\'s own longest '
                 'pause: a max gap not above it is not the network\'s' % (marks.get('redeploy', 0), marks.get('redeployed', 0)))
    return '\n'.join(lines)


def _defines(text):
    """--defines: a JSON object of NAME: integer."""
    value = json.loads(text)
    if not isinstance(value, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value.values()):
        raise ValueError(text)
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--pps', type=int, default=10_000, help='packets per second of each stream (default 10000)')
    parser.add_argument('--family', type=int, choices=(4, 6), default=4, help='IP version of the streams (default 4)')
    parser.add_argument('--lead', type=float, default=1.0, help='seconds of traffic before the redeploy (default 1)')
    parser.add_argument('--tail', type=float, default=1.0, help='seconds of traffic after it (default 1)')
    parser.add_argument('--baseline', type=float, default=None,
                        help='seconds of the baseline run (default: as long as the redeploy run; 0: none)')
    parser.add_argument('--defines', type=_defines, default=DEFAULT_DEFINES,
                        help='the changed compile-time defines, a JSON object of integers (default %s)'
                        % json.dumps(DEFAULT_DEFINES).replace('%', '%%'))
    parser.add_argument('--loader', choices=('object', 'bcc'), default=None,
                        help='ebpf_failover_loader of both deployments (default: the role\'s, object)')
    parser.add_argument('--playbook', choices=(SITE, DATAPATH), default=SITE,
                        help='the redeploy\'s playbook (default %s; the first deployment is always site.yml\'s)' % SITE)
    parser.add_argument('--json', action='store_true', help='print the report as JSON')
    args = parser.parse_args(argv)
    if not 1 <= args.pps <= 20_000:
        parser.error('--pps must be 1..20000')
    status, report = run_reported('redeploy_under_load', lambda log: run_benchmark(
        pps=args.pps, family=args.family, lead=args.lead, tail=args.tail, baseline=args.baseline, defines=args.defines,
        log=log, loader=args.loader, playbook=args.playbook), args.json, format_table)
    if status:
        return status
    if not report['redeploy']['all_replaced']:
        print('redeploy_under_load: error: the redeploy did not replace every program (see "programs"): '
              'these figures do not measure a redeploy', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
