"""Labs deployed with playbooks/site.yml, shared by the lab tests, and ways to look at their data path.

SharedDeployment holds one deployed lab of a topology for the whole run (tests/lab/conftest.py
makes one per topology on first use) and hands it out reset to what a deployment leaves. The
lab has a unique name (a developer's running lab is never touched) and is torn down even when
the deployment or a test fails. `undeployed_lab` is a lab that is up with nothing deployed, for
the tests that are about deploying. What the tests read:

- `counters(lab, host)`: the per-plane counters straight from the host's pinned maps (fast,
  so a test can take them at precise moments while traffic runs);
- `port_packets(lab, switch, port)`: a switch port's packet counters, i.e. what really
  crossed that link of the fabric;
- `query(lab, hosts)`: the plane_state module's report (state: query), run through Ansible
  as a user would, with its planes and peers.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import uuid
import warnings
from pathlib import Path

import pytest

from deploy_helpers import run_playbook
from edgeft_lab import Lab
from redeploy_under_load import lab_down  # benchmarks/

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import DatapathMaps
from repo import REPO

PLANES = ('a', 'b')
_ADHOC_RESULT = re.compile(r'^(\S+) \| (SUCCESS|CHANGED|FAILED!|UNREACHABLE!) => ', re.M)


def ansible_env():
    return dict(os.environ, ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1')


def _new_lab(work_dir, prefix, topology):
    """A lab of `topology` with a unique name, its inventory to be written to work_dir/hosts.yml."""
    lab = Lab(topology, name='%s-%s' % (prefix, uuid.uuid4().hex[:6]))
    lab.work_dir = Path(work_dir)
    lab.inventory_path = lab.work_dir / 'hosts.yml'
    return lab


@contextlib.contextmanager
def undeployed_lab(work_dir, prefix, needs, topology='default'):
    """A lab of `topology` that is up, its inventory at work_dir/hosts.yml, nothing deployed;
    for the tests that are about deploying. Torn down even when a test fails. `needs` says in
    the failure who needs root."""
    if os.geteuid() != 0:
        pytest.fail('%s need root (namespaces, tc, bpf)' % needs)
    lab = _new_lab(work_dir, prefix, topology)
    try:
        lab.up(inventory=lab.inventory_path)
        yield lab
    finally:
        lab.down()


def _deploy(inventory_dir, prefix, topology, extra=()):
    lab = _new_lab(inventory_dir, prefix, topology)
    try:
        lab.up(inventory=lab.inventory_path)
        rc, out, recap = run_playbook(lab.inventory_path, 'playbooks/site.yml', *extra)
        if rc != 0 or not recap or any(failed for _changed, failed in recap.values()):
            raise RuntimeError('playbooks/site.yml failed on lab %s:\n%s' % (lab.name, out[-6000:]))
    except BaseException:
        lab_down(lab)
        raise
    return lab


def _settle_preferences(maps):
    """Put back the deployment's preferred target (plane 0) of every peer that is not steered.

    A peer's active_plane is only where its traffic goes while its own plane is down; the data
    path and the drains move it (to the plane the peer's steered traffic came in on, to a drain's
    target) and an undrain leaves it there. It changes nothing while no bit is set, but the next
    test is promised the state a deployment leaves."""
    for peer_id in maps.peer_ids():
        st = maps.state.get(peer_id)
        if st.active_plane and not st.down_mask and not st.learned_mask:
            st.active_plane = 0
            maps.state.put(peer_id, st)


def neutral_problem(lab):
    """Why the deployed lab is not as a deployment leaves it (a plane drained or down, a peer
    steered, learned or judged down, a host unreachable), after repairing every fault and
    settling unsteered peers' preferred planes; None when it is."""
    lab.repair_all()
    for host in [h.name for h in lab.plan.hosts]:
        with DatapathMaps.open_pinned(str(lab.pin_root(host))) as maps:
            _settle_preferences(maps)
            for index in range(len(PLANES)):
                flags = maps.planes.get(index).flags
                if flags & layout.PLANE_DRAINED or not flags & layout.PLANE_UP:
                    return '%s: plane %s flags %#x (drained or down)' % (host, PLANES[index], flags)
            for peer_id in maps.peer_ids():
                st = maps.state.get(peer_id)
                if st.active_plane or st.down_mask or st.learned_mask:
                    return '%s: peer %d on plane %d, down mask %#x, learned mask %#x' % (
                        host, peer_id, st.active_plane, st.down_mask, st.learned_mask)
    matrix = lab.ping_matrix()
    return None if matrix.ok else matrix.format()


# Every shared lab of the run, so tests/lab/conftest.py can release them all once the last
# lab test is done instead of keeping them up through the scenarios.
SHARED = []


def report_rebuild(what, problem):
    """Say loudly that a test left a shared lab broken: in the warnings summary and in the log."""
    message = 'shared lab %s left broken by an earlier test, rebuilt: %s' % (what, problem)
    print('\n' + message)
    warnings.warn(message, UserWarning, stacklevel=2)


def held(shared):
    """For a session fixture: yield `shared` (a SharedDeployment, or the agent tests' SharedLab)
    and release its lab when the session is done with it."""
    try:
        yield shared
    finally:
        shared.release()


class SharedDeployment:
    """One deployed lab of a topology for every test of the run that only needs a deployed
    lab (tests/lab/conftest.py); `neutral()` hands it out as a deployment leaves it. A lab a
    test left broken is reported and rebuilt, never passed on."""

    def __init__(self, inventory_dir, prefix, topology, extra=()):
        """extra: arguments of its site.yml run (e.g. -e ebpf_failover_loader=bcc)."""
        self.inventory_dir, self.prefix, self.topology, self.extra = inventory_dir, prefix, topology, tuple(extra)
        self.lab = None
        SHARED.append(self)

    def neutral(self):
        if self.lab is None:
            self.lab = _deploy(self.inventory_dir, self.prefix, self.topology, self.extra)
        try:
            problem = neutral_problem(self.lab)
        except Exception as e:  # noqa: BLE001  (whatever the check hit, the lab is not fit)
            problem = '%s: %s' % (type(e).__name__, e)
        if problem:
            report_rebuild('%s (%s)' % (self.lab.name, self.topology), problem)
            self.release()
            self.lab = _deploy(self.inventory_dir, self.prefix, self.topology, self.extra)
            problem = neutral_problem(self.lab)
            assert problem is None, 'a freshly deployed %s lab is not neutral: %s' % (self.topology, problem)
        return self.lab

    def release(self):
        if self.lab is not None:
            lab, self.lab = self.lab, None
            lab_down(lab)


def counters(lab, host):
    """{plane: {counter: value summed over CPUs}} from the host's pinned maps."""
    with DatapathMaps.open_pinned(str(lab.pin_root(host))) as maps:
        return {name: maps.plane_counters(index) for index, name in enumerate(PLANES)}


def xlat_counters(lab, host, plane_name):
    """The routed-mode translation counters of one plane, summed over CPUs."""
    with DatapathMaps.open_pinned(str(lab.pin_root(host))) as maps:
        return maps.xlat_counters_of(PLANES.index(plane_name))


def delta(after, before):
    """Counter differences of two counters() snapshots: {plane: {counter: after - before}}."""
    return {plane: {k: after[plane][k] - before[plane][k] for k in after[plane]} for plane in after}


def port_packets(lab, switch, port):
    """(rx, tx) packets of a switch port: rx is what the node at the other end sent into the switch."""
    out = subprocess.run(['ip', '-n', lab.netns(switch), '-s', '-j', 'link', 'show', 'dev', port],
                         capture_output=True, text=True, check=True).stdout
    stats = json.loads(out)[0]['stats64']
    return stats['rx']['packets'], stats['tx']['packets']


def query(lab, hosts):
    """The plane_state module's report for each host, run as an Ansible ad-hoc task: {host: result}."""
    args = json.dumps({'pin_root': '{{ edgeft_pin_root }}', 'state_dir': '{{ edgeft_state_dir }}', 'state': 'query'})
    proc = subprocess.run(['ansible', ','.join(hosts), '-i', str(lab.inventory_path), '-m', 'edgeft.failover.plane_state',
                           '-a', args], cwd=REPO, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False,
                          env=dict(ansible_env(), ANSIBLE_CALLBACK_RESULT_FORMAT='json'))
    results, decoder = {}, json.JSONDecoder()
    for match in _ADHOC_RESULT.finditer(proc.stdout):
        result, _end = decoder.raw_decode(proc.stdout, match.end())
        if match.group(2) not in ('SUCCESS', 'CHANGED'):
            raise AssertionError('plane_state query failed on %s: %s' % (match.group(1), result.get('msg', result)))
        results[match.group(1)] = result
    if proc.returncode != 0 or set(results) != set(hosts):
        raise AssertionError('plane_state query of %s failed (rc %d):\n%s%s'
                             % (hosts, proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))
    return results


def peer(report, name):
    """One peer's entry of a plane_state report."""
    found = [p for p in report['peers'] if p['name'] == name]
    assert len(found) == 1, 'peer %s not in the report: %s' % (name, [p['name'] for p in report['peers']])
    return found[0]


def plane(report, name):
    """One plane's entry of a plane_state report."""
    found = [p for p in report['planes'] if p['name'] == name]
    assert len(found) == 1, 'plane %s not in the report' % name
    return found[0]
