"""A lab deployed with playbooks/site.yml, and ways to look at its data path, for the tests of this directory.

    @pytest.fixture(scope='module')
    def lab(tmp_path_factory):
        with deployed_lab(tmp_path_factory.mktemp('inv')) as lab:
            yield lab

The lab has a unique name (a developer's running lab is never touched) and is torn down even
when the deployment or a test fails. What the tests read:

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
from pathlib import Path


from deploy_helpers import run_playbook  # noqa: E402
from edgeft_lab import Lab  # noqa: E402
from redeploy_under_load import lab_down  # noqa: E402  (benchmarks/)

from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import DatapathMaps  # noqa: E402
from repo import REPO

PLANES = ('a', 'b')
_ADHOC_RESULT = re.compile(r'^(\S+) \| (SUCCESS|CHANGED|FAILED!|UNREACHABLE!) => ', re.M)


def ansible_env():
    return dict(os.environ, ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1')


@contextlib.contextmanager
def deployed_lab(inventory_dir, prefix='t', topology='default'):
    """A lab of `topology` (default: the default one), up, with its inventory at
    inventory_dir/hosts.yml, deployed with site.yml."""
    if os.geteuid() != 0:
        raise RuntimeError('a deployed lab needs root (namespaces, tc, bpf)')
    lab = Lab(topology, name='%s-%s' % (prefix, uuid.uuid4().hex[:6]))
    inventory = Path(inventory_dir) / 'hosts.yml'
    try:
        lab.up(inventory=inventory)
        lab.inventory_path = inventory
        rc, out, recap = run_playbook(inventory)
        if rc != 0 or not recap or any(failed for _changed, failed in recap.values()):
            raise RuntimeError('playbooks/site.yml failed on lab %s:\n%s' % (lab.name, out[-6000:]))
        yield lab
    finally:
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
