"""Loaders: what the object loader (libbpf, prebuilt objects) and the bcc loader cost a target.

    sudo .venv/bin/python benchmarks/loaders.py [--parts packages,deploy,cpu] [--loaders object,bcc] [--json]

For each loader of ebpf_failover_loader (object, bcc):

1. packages: the packages the role installs on a Debian 12 target (host/packages.py's
   target_packages, the role's own list) and everything they pull in, on a minimal Debian bookworm
   (mmdebstrap --variant=minbase --include=python3, built once and cached by its inputs under
   /var/cache/edgeft/bench-rootfs/): `apt-get -s install` inside it, without and with
   recommends; the packages it would install, their installed size (Installed-Size) and the
   largest five. bcc's headers are those of the kernel a stock Debian 12 runs: the versioned
   package linux-headers-amd64 depends on in bookworm.
2. cpu: before anything is deployed, on one host of the lab (its network namespace, a fresh
   bpffs of its own): the ebpf_program module's core (program/run.py run()) run by the targets'
   python3 in a child process, attaching on a fresh pin root and then replacing with a changed
   define; the child's CPU (user + system, its own children included) and peak RSS, from
   wait4. For the object loader the two planes' objects are built first as the controller
   builds them (datapath/objects.py build(), clang), measured apart: once per play, not per
   host. The programs are removed again (state absent) before the deployment.
3. deploy: on a lab of its own per loader (default topology, 4 hosts, a unique name, torn down
   at the end, also on errors and Ctrl-C): playbooks/site.yml (first deploy, timed), then
   site.yml with a changed define (EDGEFT_SEEN_RES_NS), so every host replaces its programs
   (the object loader compiles once, on the controller), then playbooks/datapath.yml with
   another value; each run with -e ebpf_failover_loader=LOADER and one object cache, empty at
   the start. Program ids must change at every attach point. The slowest host's task that loads
   the programs (the datapath module) and the bpf_object task are timed from Ansible's junit
   callback.

It prints one table with both loaders and the ratio object / bcc, or the report as JSON with
--json. Exit status: 0 when it measured, 1 on errors (not root, bootstrap missing, mmdebstrap,
a lab or a playbook failed, programs not replaced), 2 for bad options, 130 interrupted.
See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from xml.etree import ElementTree
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _folder in (REPO / 'lab', REPO / 'benchmarks', REPO / 'tests' / 'helpers', REPO / '.build' / 'collections'):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

from edgeft_lab import Lab  # noqa: E402
from edgeft_lab.inventory import PYTHON as TARGET_PYTHON  # noqa: E402
from edgeft_lab.vm.image import MIRRORS, SUITE  # noqa: E402
from redeploy_under_load import (  # noqa: E402
    DATAPATH, DEFAULT_DEFINES, SITE, BenchmarkError, ansible_env, attached_programs, deploy, lab_down, replacement,
    run_reported,
)

from ansible_collections.edgeft.failover.plugins.module_utils.host.packages import LOADERS, target_packages  # noqa: E402

PARTS = ('packages', 'cpu', 'deploy')
ROOTFS_CACHE = Path(os.environ.get('EDGEFT_BENCH_ROOTFS', '/var/cache/edgeft/bench-rootfs'))
ROOTFS_FORMAT = 1  # bump when the rootfs build below changes
ROOTFS_VARIANT = 'minbase'
ROOTFS_INCLUDE = ('python3',)
MMDEBSTRAP_TIMEOUT = 1800
# The target this benchmark sizes: Debian 12 (bookworm), a stock kernel.
TARGET_FACTS = {'os_family': 'Debian', 'major_version': '12', 'distribution': 'Debian'}
STOCK_KERNEL_META = 'linux-headers-amd64'
OBJECT_GOAL_MB = 20.0
REDEPLOY_GOAL_S = 10.0
LARGEST = 5
SLOWEST_TASKS = 5
PROGRAM_TASK = 'Load and attach the failover programs'
OBJECT_TASK = "Build the data path's objects"
# The redeploys of changed programs: the report's key and the playbook that runs it.
REDEPLOYS = (('redeploy', SITE), ('datapath_redeploy', DATAPATH))
BPF_DIR = REPO / 'bpf'

_INST = re.compile(r'^Inst (\S+)(?: \[[^\]]*\])? \((\S+) ', re.M)
_NEWLY = re.compile(r'^\d+ upgraded, (\d+) newly installed', re.M)


# ------------------------------------------------------------------------------------ parsing

def parse_simulation(text):
    """[(package, version)] that `apt-get -s install` would install (its Inst lines), checked
    against its summary line's count of newly installed packages when there is one."""
    found = _INST.findall(text)
    summary = _NEWLY.search(text)
    if summary is not None and int(summary.group(1)) != len(found):
        raise ValueError('apt-get -s: %d Inst lines, the summary says %s newly installed' % (len(found), summary.group(1)))
    return found


def parse_installed_sizes(text):
    """{(package, version): Installed-Size in KiB} of `apt-cache show` stanzas."""
    sizes = {}
    for stanza in re.split(r'\n\s*\n', text):
        fields = dict(re.findall(r'^([A-Za-z-]+): ?(.*)$', stanza, re.M))
        if 'Package' in fields and 'Version' in fields:
            sizes[(fields['Package'], fields['Version'])] = int(fields.get('Installed-Size') or 0)
    return sizes


def depends_target(text, prefix):
    """The first `Depends:` of `apt-cache depends` output that starts with prefix."""
    for name in re.findall(r'^\s*Depends: (\S+)', text, re.M):
        if name.startswith(prefix):
            return name
    return None


def mb(kib):
    """Installed-Size (KiB) as apt reports disk space: MB of 10^6 bytes."""
    return kib * 1024 / 1e6


# ------------------------------------------------------------------------------------ part 1

def rootfs_key():
    doc = {'suite': SUITE, 'mirrors': list(MIRRORS), 'variant': ROOTFS_VARIANT, 'include': list(ROOTFS_INCLUDE),
           'format': ROOTFS_FORMAT}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def ensure_rootfs(log):
    """The minimal rootfs (a chroot directory with its apt lists kept), built once per inputs."""
    target = ROOTFS_CACHE / rootfs_key()
    info_path = target / 'info.json'
    if info_path.exists():
        return target / 'root', json.loads(info_path.read_text())
    if shutil.which('mmdebstrap') is None:
        raise BenchmarkError('the packages part needs mmdebstrap (apt install mmdebstrap; scripts/bootstrap.sh does)')
    ROOTFS_CACHE.mkdir(parents=True, exist_ok=True)
    work = ROOTFS_CACHE / ('%s.build-%d' % (rootfs_key(), os.getpid()))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    log('building a minimal Debian %s rootfs (mmdebstrap --variant=%s --include=%s) into %s'
        % (SUITE, ROOTFS_VARIANT, ','.join(ROOTFS_INCLUDE), target))
    try:
        started = time.monotonic()
        proc = subprocess.run(
            ['mmdebstrap', '--variant=%s' % ROOTFS_VARIANT, '--components=main', '--aptopt=Acquire::Retries "3"',
             '--include=' + ','.join(ROOTFS_INCLUDE), '--skip=cleanup/apt/lists', SUITE, str(work / 'root'), *MIRRORS],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=MMDEBSTRAP_TIMEOUT, check=False)
        if proc.returncode != 0:
            raise BenchmarkError('mmdebstrap failed (exit %d):\n%s' % (proc.returncode, (proc.stdout + proc.stderr)[-3000:]))
        info = {'key': rootfs_key(), 'suite': SUITE, 'mirrors': list(MIRRORS), 'variant': ROOTFS_VARIANT,
                'include': list(ROOTFS_INCLUDE), 'built': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
                'build_seconds': round(time.monotonic() - started, 1)}
        (work / 'info.json').write_text(json.dumps(info, indent=1) + '\n')
        shutil.rmtree(target, ignore_errors=True)
        work.rename(target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return target / 'root', info


def chroot(root, *argv):
    proc = subprocess.run(['chroot', str(root), *argv], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          env={'PATH': '/usr/sbin:/usr/bin:/sbin:/bin', 'LC_ALL': 'C.UTF-8'}, check=False)
    if proc.returncode != 0:
        raise BenchmarkError('in the rootfs, %s failed (exit %d): %s' % (' '.join(argv), proc.returncode,
                                                                         (proc.stdout + proc.stderr)[-2000:]))
    return proc.stdout


def simulate(root, packages, recommends):
    """What `apt-get install` of packages would add to the rootfs: count, KiB, the packages by size."""
    out = chroot(root, 'apt-get', '-s', '-o', 'APT::Install-Recommends=%s' % ('true' if recommends else 'false'),
                 '-o', 'APT::Install-Suggests=false', 'install', *packages)
    installs = parse_simulation(out)
    sizes = parse_installed_sizes(chroot(root, 'apt-cache', 'show', *('%s=%s' % pv for pv in installs))) if installs else {}
    missing = [pv for pv in installs if pv not in sizes]
    if missing:
        raise BenchmarkError('apt-cache show has no Installed-Size of %s' % missing)
    by_size = sorted(((name, sizes[(name, version)]) for name, version in installs), key=lambda item: (-item[1], item[0]))
    kib = sum(size for _name, size in by_size)
    return {'count': len(installs), 'kib': kib, 'mb': round(mb(kib), 1),
            'largest': [{'package': name, 'mb': round(mb(size), 1)} for name, size in by_size[:LARGEST]],
            'installed': [{'package': name, 'version': version, 'kib': sizes[(name, version)]} for name, version in installs]}


def measure_packages(loaders, log):
    root, info = ensure_rootfs(log)
    headers = depends_target(chroot(root, 'apt-cache', 'depends', STOCK_KERNEL_META), 'linux-headers-')
    if headers is None:
        raise BenchmarkError('%s has no linux-headers-* dependency in the rootfs\'s package lists' % STOCK_KERNEL_META)
    release = headers[len('linux-headers-'):]
    report = {'rootfs': dict(info, path=str(root)), 'stock_kernel_release': release, 'loaders': {}}
    for loader in loaders:
        named = target_packages(TARGET_FACTS['os_family'], TARGET_FACTS['major_version'], loader, release,
                                TARGET_FACTS['distribution'])
        if named['refusal']:
            raise BenchmarkError('target_packages refused %s: %s' % (loader, named['refusal']))
        log('packages of the %s loader: %s' % (loader, ' '.join(named['packages'])))
        report['loaders'][loader] = {
            'packages': named['packages'],
            'no_recommends': simulate(root, named['packages'], recommends=False),
            'recommends': simulate(root, named['packages'], recommends=True),
        }
    return report


# ------------------------------------------------------------------------------------ part 2

# Run by the targets' python3: the module's core inside the host's namespace, as the module runs it.
_CHILD = r'''
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import nshost
from ansible_collections.edgeft.failover.plugins.module_utils.program.run import run
with nshost.in_netns(sys.argv[3]):
    result = run(json.loads(sys.argv[4]))
print(json.dumps({key: len(result[key]) for key in ('attached', 'replaced', 'removed')}))
'''


def cpu_of_child(argv):
    """Run argv; (its stdout, {cpu_s, user_s, sys_s, wall_s, max_rss_mb}) from wait4: the child
    and every child of its own it waited for."""
    with tempfile.TemporaryFile(mode='w+') as err:
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True)
        out = proc.stdout.read()
        proc.stdout.close()
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise BenchmarkError('%s failed (exit %d): %s' % (argv[0], proc.returncode, err.read()[-3000:]))
    return out, {'cpu_s': round(usage.ru_utime + usage.ru_stime, 3), 'user_s': round(usage.ru_utime, 3),
                 'sys_s': round(usage.ru_stime, 3), 'wall_s': round(wall, 3), 'max_rss_mb': round(usage.ru_maxrss / 1024, 1)}


def run_core(netns, params):
    out, usage = cpu_of_child([TARGET_PYTHON, '-c', _CHILD, str(REPO / '.build' / 'collections'),
                               str(REPO / 'tests' / 'helpers'), netns, json.dumps(params)])
    return dict(usage, result=json.loads(out.strip().splitlines()[-1]))


@contextlib.contextmanager
def self_and_children_cpu():
    """{cpu_s, wall_s} of the block: this process and the children it waited for."""
    import resource
    figures = {}
    before = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    started = time.monotonic()
    yield figures
    after = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    figures['cpu_s'] = round(sum(a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, before)), 3)
    figures['wall_s'] = round(time.monotonic() - started, 3)


def build_objects(defines, cache):
    """Both planes' objects, as the bpf_object module builds them on the controller: {plane: path}."""
    from ansible_collections.edgeft.failover.plugins.module_utils.datapath import objects
    built = {plane: objects.build(plane, defines or None, str(BPF_DIR), cache) for plane in (0, 1)}
    if any(b.cached for b in built.values()):
        raise BenchmarkError('the object cache %s was not empty: the build was not measured' % cache)
    return {plane: b.path for plane, b in built.items()}


def core_params(loader, nics, pin_root, state_dir, defines, built=None):
    """ebpf_program's arguments as the role passes them (roles/ebpf_failover/vars/main.yml)."""
    params = {'pin_root': pin_root, 'state_dir': state_dir, 'attach': []}
    for plane, nic in enumerate(nics):
        for direction in ('egress', 'ingress'):
            point = {'interface': nic, 'direction': direction}
            point.update({'object': built[plane]} if loader == 'object' else {'plane': plane})
            params['attach'].append(point)
    if loader == 'bcc':
        params.update(src=str(BPF_DIR / 'failover_tc.c'), defines=defines)
    return params


def measure_cpu(lab, loader, work, log):
    """The module's core on one lab host, before anything is deployed: attach, then replace."""
    import nshost
    host = lab.plan.hosts[0].name
    netns = lab.netns(host)
    nics = [plane.nic for plane in lab.topology.planes]
    figures = {'host': host}
    with nshost.bpffs(str(work / 'bpffs')) as pin_root:
        state_dir = str(work / 'core-state')
        runs = (('attach', {}), ('replace', dict(DEFAULT_DEFINES)))
        try:
            for step, defines in runs:
                built = None
                if loader == 'object':
                    with self_and_children_cpu() as controller:
                        built = build_objects(defines, str(work / ('objects-%s' % step)))
                    figures['controller_%s' % step] = controller
                log('  %s: ebpf_program core on %s, %s' % (loader, host, step))
                figures[step] = run_core(netns, core_params(loader, nics, pin_root, state_dir, defines, built))
                expected = 'attached' if step == 'attach' else 'replaced'
                if figures[step]['result'][expected] != 2 * len(nics):
                    raise BenchmarkError('the %s run %s %s, not every attach point' % (step, expected, figures[step]['result']))
        finally:
            absent = {'state': 'absent', 'unpin_maps': True, 'pin_root': pin_root, 'state_dir': state_dir,
                      'attach': [{'interface': nic, 'direction': d} for nic in nics for d in ('egress', 'ingress')]}
            with contextlib.suppress(BenchmarkError):
                run_core(netns, absent)
    left = attached_programs(lab).get(host)
    if left:
        raise BenchmarkError('%s still has programs attached after the CPU runs: %s' % (host, left))
    return figures


# ------------------------------------------------------------------------------------ part 3

@contextlib.contextmanager
def junit_dir(path):
    """Ansible's junit callback on for the block (ansible_env() copies os.environ): per task and host timings."""
    saved = {k: os.environ.get(k) for k in ('ANSIBLE_CALLBACKS_ENABLED', 'JUNIT_OUTPUT_DIR', 'JUNIT_HIDE_TASK_ARGUMENTS')}
    path.mkdir(parents=True, exist_ok=True)
    os.environ.update(ANSIBLE_CALLBACKS_ENABLED='ansible.builtin.junit', JUNIT_OUTPUT_DIR=str(path),
                      JUNIT_HIDE_TASK_ARGUMENTS='true')
    try:
        yield path
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def task_times(folder):
    """{task: its longest time over the hosts (s)} from the junit files; a case is named
    '[host] play: role : task'."""
    times = {}
    for path in glob.glob(str(folder / '*.xml')):
        for case in ElementTree.parse(path).iter('testcase'):
            name = re.sub(r'^\[[^\]]*\] ', '', case.get('name', ''))
            name = name.split(': ', 1)[-1].removeprefix('edgeft.failover.')
            name = re.sub(r' [\w.]+=.*$', '', name)  # the arguments, when the callback shows them
            times[name] = max(times.get(name, 0.0), float(case.get('time') or 0))
    return times


def task_seconds(times, task):
    """The longest time of the task whose name contains `task`."""
    found = [seconds for name, seconds in times.items() if task in name]
    return round(max(found), 3) if found else None


def timed_deploy(lab, inventory, loader, work, tag, *extra, playbook=SITE):
    folder = work / ('junit-%s' % tag)
    with junit_dir(folder), self_and_children_cpu() as cpu:
        seconds, changed = deploy(lab, inventory, *extra, playbook=playbook)
    times = task_times(folder)
    slowest = sorted(times.items(), key=lambda item: -item[1])[:SLOWEST_TASKS]
    return {'duration_s': round(seconds, 3), 'cpu_s': cpu['cpu_s'], 'changed': changed,
            'program_task_s': task_seconds(times, PROGRAM_TASK), 'object_task_s': task_seconds(times, OBJECT_TASK) if loader == 'object' else None,
            'slowest_tasks': [{'task': name, 'seconds': round(sec, 2)} for name, sec in slowest]}


def measure_loader(loader, parts, log):
    """cpu and deploy of one loader on a lab of its own."""
    lab = Lab('default', name='ld-%s-%s' % (loader[:3], uuid.uuid4().hex[:6]))
    report = {'lab': lab.name, 'hosts': [h.name for h in lab.plan.hosts]}
    with tempfile.TemporaryDirectory(prefix='edgeft-loaders-') as tmp:
        work = Path(tmp)
        inventory = work / 'hosts.yml'
        try:
            log('%s: lab %s up' % (loader, lab.name))
            lab.up(inventory=inventory)
            if 'cpu' in parts:
                report['cpu'] = measure_cpu(lab, loader, work, log)
            if 'deploy' in parts:
                cache = str(work / 'object-cache')
                log('%s: site.yml, first deploy' % loader)
                first = ('-e', json.dumps({'ebpf_failover_loader': loader, 'ebpf_failover_object_cache': cache}))
                report['deploy'] = timed_deploy(lab, inventory, loader, work, 'first', *first)
                # The same change twice: once through site.yml, once through the data path's own
                # playbook (another value, so the programs change again).
                for (key, playbook), value in zip(REDEPLOYS, (DEFAULT_DEFINES, {'EDGEFT_SEEN_RES_NS': 300000})):
                    log('%s: %s with defines %s' % (loader, playbook, json.dumps(value)))
                    before = attached_programs(lab)
                    again = ('-e', json.dumps({'ebpf_failover_defines': value, 'ebpf_failover_loader': loader,
                                               'ebpf_failover_object_cache': cache}))
                    report[key] = timed_deploy(lab, inventory, loader, work, key, *again, playbook=playbook)
                    report[key].update(replacement(before, attached_programs(lab)))
        finally:
            log('%s: lab %s down' % (loader, lab.name))
            lab_down(lab)
    return report


# ------------------------------------------------------------------------------------ report

def run_benchmark(parts=PARTS, loaders=LOADERS, log=None):
    log = log or (lambda line: None)
    if os.geteuid() != 0:
        raise BenchmarkError('needs root (chroot, network namespaces, tc, bpf): run it with sudo')
    if ({'cpu', 'deploy'} & set(parts)) and not (
            Path(ansible_env()['ANSIBLE_COLLECTIONS_PATH'].split(os.pathsep)[0]) / 'ansible_collections/edgeft/failover').exists():
        raise BenchmarkError('edgeft.failover is not on the collections path: run scripts/bootstrap.sh first')
    report = {'parts': list(parts), 'loaders': list(loaders), 'goals': {'object_mb': OBJECT_GOAL_MB, 'redeploy_s': REDEPLOY_GOAL_S},
              'machine': {'cpus': os.cpu_count(), 'kernel': os.uname().release, 'loadavg_start': os.getloadavg()[0]}}
    if 'packages' in parts:
        report['packages'] = measure_packages(loaders, log)
    if {'cpu', 'deploy'} & set(parts):
        report['labs'] = {loader: measure_loader(loader, parts, log) for loader in loaders}
    report['machine']['loadavg_end'] = os.getloadavg()[0]
    return report


def _replaced_cell(labs, lo, key):
    """'replaced of all' attach points of a loader's redeploy, or None when it did not run."""
    if not _get(labs, lo, key):
        return None
    return '%s of %s' % (_get(labs, lo, key, 'attach_points_replaced'), _get(labs, lo, key, 'attach_points'))


def _get(doc, *keys):
    for key in keys:
        if not isinstance(doc, dict) or doc.get(key) is None:
            return None
        doc = doc[key]
    return doc


def rows(report):
    """(label, {loader: value}, note) of the table."""
    pk, labs = report.get('packages', {}).get('loaders', {}), report.get('labs', {})
    out = []
    if pk:
        for mode, words in (('no_recommends', '--no-install-recommends'), ('recommends', 'with recommends')):
            out.append(('packages installed, %s' % words, {lo: _get(pk, lo, mode, 'count') for lo in pk}, ''))
            out.append(('installed size MB, %s' % words, {lo: '%.1f' % _get(pk, lo, mode, 'mb') for lo in pk},
                        'goal: object <= %.0f MB' % OBJECT_GOAL_MB if mode == 'no_recommends' else ''))
    if labs:
        out += [
            ('site.yml first deploy, 4 hosts (s)', {lo: _get(labs, lo, 'deploy', 'duration_s') for lo in labs}, ''),
            ('site.yml redeploy, changed define (s)', {lo: _get(labs, lo, 'redeploy', 'duration_s') for lo in labs}, ''),
            ('  attach points replaced', {lo: _replaced_cell(labs, lo, 'redeploy') for lo in labs}, ''),
            ('datapath.yml redeploy, changed define (s)', {lo: _get(labs, lo, 'datapath_redeploy', 'duration_s') for lo in labs},
             'goal: object <= %.0f s' % REDEPLOY_GOAL_S),
            ('  datapath task, slowest host (s)', {lo: _get(labs, lo, 'datapath_redeploy', 'program_task_s') for lo in labs},
             'programs, peer table, record'),
            ('  bpf_object task (controller) (s)', {lo: _get(labs, lo, 'datapath_redeploy', 'object_task_s') for lo in labs}, ''),
            ('  CPU, all processes (s)', {lo: _get(labs, lo, 'datapath_redeploy', 'cpu_s') for lo in labs},
             'controller + 4 targets, one machine'),
            ('  attach points replaced', {lo: _replaced_cell(labs, lo, 'datapath_redeploy') for lo in labs}, ''),
            ('target CPU per host, first attach (s)', {lo: _get(labs, lo, 'cpu', 'attach', 'cpu_s') for lo in labs},
             'ebpf_program core, 4 programs'),
            ('target CPU per host, replace (s)', {lo: _get(labs, lo, 'cpu', 'replace', 'cpu_s') for lo in labs}, ''),
            ('target wall per host, replace (s)', {lo: _get(labs, lo, 'cpu', 'replace', 'wall_s') for lo in labs}, ''),
            ('target peak RSS, replace (MB)', {lo: _get(labs, lo, 'cpu', 'replace', 'max_rss_mb') for lo in labs}, ''),
            ('controller CPU, once per play (s)', {lo: _get(labs, lo, 'cpu', 'controller_replace', 'cpu_s') for lo in labs},
             'clang, 2 objects'),
        ]
    return [(label, values, note) for label, values, note in out if any(v is not None for v in values.values())]


def _cell(value):
    if value is None:
        return '-'
    if isinstance(value, float):
        return '%.2f' % value if value < 10 else '%.1f' % value
    return str(value)


def format_table(report):
    loaders = report['loaders']
    ratio = 'object' in loaders and 'bcc' in loaders
    head = ['', *loaders] + (['object/bcc'] if ratio else []) + ['']
    table = [head]
    for label, values, note in rows(report):
        cells = [label] + [_cell(values.get(lo)) for lo in loaders]
        if ratio:
            o, b = values.get('object'), values.get('bcc')
            o, b = (float(v) if isinstance(v, str) and re.fullmatch(r'[\d.]+', v) else v for v in (o, b))
            cells.append('%.2f' % (o / b) if isinstance(o, (int, float)) and isinstance(b, (int, float)) and b else '-')
        table.append(cells + [note])
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = ['loaders: what the object loader (libbpf, objects built on the controller) and the bcc loader cost a target',
             'machine: %d CPUs, kernel %s, load average %.1f at the start, %.1f at the end'
             % (report['machine']['cpus'], report['machine']['kernel'], report['machine']['loadavg_start'],
                report['machine']['loadavg_end'])]
    pk = report.get('packages')
    if pk:
        fs = pk['rootfs']
        lines.append('packages: apt-get -s install in a minimal Debian %s (mmdebstrap --variant=%s --include=%s, '
                     'package lists of %s)' % (fs['suite'], fs['variant'], ','.join(fs['include']), fs['built'][:10]))
        for lo in loaders:
            lines.append('  %s: %s' % (lo, ' '.join(pk['loaders'][lo]['packages'])))
        headers = (pk['stock_kernel_release'], STOCK_KERNEL_META, report['machine']['kernel'])
        lines.append('  bcc needs the running kernel\'s headers: here those of a stock Debian 12 kernel, %s, the package '
                     '%s depends on (the machine\'s own kernel is %s)' % headers)
    for lo, lab in ((lo, report['labs'][lo]) for lo in loaders if lo in report.get('labs', {})):
        cpu_on = ', CPU measured on %s' % lab['cpu']['host'] if 'cpu' in lab else ''
        lines.append('%s: lab %s, %d hosts%s' % (lo, lab['lab'], len(lab['hosts']), cpu_on))
    lines.append('')
    lines += ['  '.join(cell.ljust(widths[i]) if i in (0, len(head) - 1) else cell.rjust(widths[i])
                        for i, cell in enumerate(row)).rstrip() for row in table]
    if pk:
        lines.append('')
        lines.append('largest packages, --no-install-recommends (MB):')
        for lo in loaders:
            largest = pk['loaders'][lo]['no_recommends']['largest']
            lines.append('  %-7s %s' % (lo, ', '.join('%s %.1f' % (p['package'], p['mb']) for p in largest)))
    for lo, lab in ((lo, report['labs'][lo]) for lo in loaders if lo in report.get('labs', {})):
        for key, playbook in REDEPLOYS:
            if key in lab:
                lines.append('')
                lines.append('slowest tasks of the %s redeploy through %s (s, slowest host):' % (lo, playbook))
                lines += ['  %6.1f  %s' % (t['seconds'], t['task']) for t in lab[key]['slowest_tasks']]
    return '\n'.join(lines)


def _list(allowed):
    def parse(text):
        items = [item.strip() for item in text.split(',') if item.strip()]
        bad = [item for item in items if item not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError('%s: choose from %s' % (text, ','.join(allowed)))
        return [item for item in allowed if item in items]
    return parse


def _interrupt(signum, frame):
    raise KeyboardInterrupt  # the labs' finally blocks tear them down


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--parts', type=_list(PARTS), default=list(PARTS),
                        help='what to measure, comma-separated (default %s)' % ','.join(PARTS))
    parser.add_argument('--loaders', type=_list(LOADERS), default=list(LOADERS),
                        help='the loaders, comma-separated (default %s)' % ','.join(LOADERS))
    parser.add_argument('--json', action='store_true', help='print the report as JSON')
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    status, report = run_reported('loaders', lambda log: run_benchmark(args.parts, args.loaders, log), args.json,
                                  format_table, errors=(ValueError,))
    if status:
        return status
    unreplaced = ['%s (%s)' % (lo, playbook) for lo, lab in report.get('labs', {}).items() for key, playbook in REDEPLOYS
                  if key in lab and not lab[key]['all_replaced']]
    if unreplaced:
        print('loaders: error: the redeploy of %s did not replace every program (see "programs"): it measured no '
              'redeploy' % ', '.join(unreplaced), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
