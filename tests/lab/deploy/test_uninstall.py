"""playbooks/uninstall.yml on a lab of its own: every host back as it was before site.yml, a
second run (and a run on hosts edgeft never touched) changes nothing, bad input and a host
steering traffic are refused before any change, and a stream across the uninstall loses nothing.

What is compared is tests/helpers/host_snapshot.py's snapshot with its neighbour entries, the
configured paths (state dir, sources, agent, configuration, pin root, and a scratch root per
host standing for its /etc, into which site.yml persists ifupdown files: lab hosts share the
machine's /etc) and the machine's edgeft units; of the pin root, what is pinned under it (the
directory is the lab's, and ebpf_program's unpin removes it once empty). Before the uninstall the hosts carry
everything a deployment leaves (programs, pins, peer table and its managed neighbours,
multihome, backup routes, persisted files), plus what a drain and a stopped agent leave: the
rules at 32689-32691 and the routes of tables 60919/60920.

Addresses: the lab itself puts every host's plane addresses on fab0/fab1 (lab/edgeft_lab/
fabric.py); multihome only adopts them (on this L2 topology it adds no address of its own), and
the uninstall keeps the plane addresses of edgeft_planes. So the streams run between plane
addresses that exist before site.yml and after the uninstall.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest
import yaml
from deploy_helpers import ONE_LINE_RESULTS, failure_messages, pinned, run_playbook
from deployed import undeployed_lab
from host_snapshot import differences, host_snapshot

from edgeft_lab.agents import Agents
from edgeft_lab.traffic import UdpStream

HOSTS = ('r1h1', 'r1h2', 'r2h1', 'r2h2')
NICS = ('fab0', 'fab1')
UNINSTALL = 'playbooks/uninstall.yml'
PPS = 2000  # per stream; the uninstall takes tens of seconds on the 2-core machine
BACKUP_ROUTES = [{'dst': '198.18.250.0/24', 'via': [{'interface': 'fab0', 'metric': 100}, {'interface': 'fab1', 'metric': 200}]}]


@pytest.fixture(scope='module')
def lab(tmp_path_factory):
    work = tmp_path_factory.mktemp('uninstall')
    with undeployed_lab(work, 'un', 'the uninstall tests') as lab:
        lab.roots = work / 'roots'
        for host in HOSTS:  # a Debian-like /etc per host, for ifupdown to be detected and written to
            (lab.roots / host / 'sbin').mkdir(parents=True)
            (lab.roots / host / 'sbin' / 'ifup').write_text('')
            # The directories Debian installs: network_files creates a missing one without a record,
            # so the uninstall cannot tell it was edgeft's and leaves it (docs/uninstall.md).
            (lab.roots / host / 'etc' / 'network' / 'interfaces.d').mkdir(parents=True)
            (lab.roots / host / 'etc' / 'sysctl.d').mkdir(parents=True)
            (lab.roots / host / 'etc' / 'network' / 'interfaces').write_text('source /etc/network/interfaces.d/*\n')
        extra = work / 'extra.json'
        extra.write_text(json.dumps({'edgeft_persist': 'ifupdown', 'edgeft_backup_routes': BACKUP_ROUTES,
                                     'network_persist_root': '%s/{{ inventory_hostname }}' % lab.roots}))
        lab.extra = ('-e', '@%s' % extra)
        with open(lab.inventory_path) as f:
            lab.hostvars = yaml.safe_load(f)['all']['children']['fabric']['hosts']
        yield lab


def snapshots(lab):
    out = {}
    for host in HOSTS:
        hv = lab.hostvars[host]
        # The pin root's contents are the snapshot's 'pins'. The directory itself the lab makes per
        # host, and ebpf_program's unpin_maps removes it once empty (on a real host it made it).
        paths = [hv[k] for k in ('edgeft_state_dir', 'edgeft_src_dir', 'edgeft_agent_dir', 'edgeft_agent_config')] \
            + [str(lab.roots / host / 'etc')]
        out[host] = host_snapshot(lab, host, NICS, hv['edgeft_state_dir'], neighbours=True, paths=paths, units=True)
    return out


def assert_same(before, after, what):
    changed = {host: differences(before[host], after[host]) for host in HOSTS}
    assert not any(changed.values()), '%s changed:\n%s' % (what, '\n'.join(
        '%s: %s' % (host, '\n'.join(d)) for host, d in changed.items() if d))


def play(lab, playbook, *extra, hosts=HOSTS):
    rc, out, recap = run_playbook(lab.inventory_path, playbook, *lab.extra, *extra)
    assert rc == 0 and set(recap) == set(hosts), out[-6000:]
    return out, recap


def deploy(lab):
    play(lab, 'playbooks/site.yml')
    for host in HOSTS:
        assert 'edgeft_peers_v1' in pinned(lab, host)


def _read(lab, host, argv):
    return subprocess.run(lab.exec_argv(host, argv), capture_output=True, text=True, check=True).stdout


def set_plane_a_of_r1h1(lab, state):
    play(lab, 'playbooks/plane_state.yml', '-e', 'edgeft_hosts=r1h1', '-e', 'edgeft_plane=a', '-e', 'edgeft_plane_state=%s' % state,
         hosts=['r1h1'])


def assert_r1h1_refused_while_steering(lab):
    """With r1h1's plane a drained (r1h1 steers traffic), an uninstall of r1h1 is refused and changes nothing."""
    rc, out, recap = run_playbook(lab.inventory_path, UNINSTALL, *lab.extra, '-e', 'edgeft_hosts=r1h1', env=ONE_LINE_RESULTS)
    assert rc != 0 and recap == {'r1h1': (0, 1)}, out[-3000:]
    assert any('plane a is drained' in m for m in failure_messages(out)['r1h1']), out[-3000:]
    assert 'edgeft_peers_v1' in pinned(lab, 'r1h1')


def leave_drain_and_agent_leftovers(lab, tmp_path):
    """What a drain and a stopped agent leave: the agent's rules and the routes of its backup
    table. While the drain lasts, an uninstall of the host steering traffic is refused."""
    set_plane_a_of_r1h1(lab, 'drained')
    assert_r1h1_refused_while_steering(lab)
    set_plane_a_of_r1h1(lab, 'active')
    agents = Agents(lab, lab.inventory_path, tmp_path)
    try:
        agents.start_all()
        time.sleep(1.0)
    finally:
        agents.stop_all()
    for host in HOSTS:
        text = _read(lab, host, ['ip', 'rule']) + _read(lab, host, ['ip', 'route', 'show', 'table', '60919'])
        assert '32689:' in text and 'proto 237' in text, '%s: no agent rules or backup routes to remove:\n%s' % (host, text)


def test_bad_input_is_refused_naming_the_variable(lab):
    """On hosts edgeft never touched: each refusal names the variable, and nothing is created."""
    for extra, message in ((('-e', 'edgeft_uninstall_plane_addresses=some'),
                            'edgeft_uninstall_plane_addresses: "some" must be one of keep, remove'),
                           (('-e', 'edgeft_state_dir=/var'), 'edgeft_state_dir: "/var" must be an absolute path at least 3'),
                           (('-e', 'edgeft_uninstall_force=perhaps'), 'edgeft_uninstall_force: "perhaps" must be true or false'),
                           (('-e', 'edgeft_agent_service=true'), 'is a network namespace of this machine')):
        rc, out, recap = run_playbook(lab.inventory_path, UNINSTALL, *lab.extra, *extra, env=ONE_LINE_RESULTS)
        assert rc != 0 and all(failed for _changed, failed in recap.values()), out[-3000:]
        messages = failure_messages(out)
        assert all(any(message in m for m in messages.get(host, [])) for host in HOSTS), (message, messages)
        assert all(changed == 0 for changed, _failed in recap.values()), recap


def uninstall_under_traffic(lab):
    """playbooks/uninstall.yml on every host at once while streams of both families run across
    the racks to r2h1's plane-a addresses (the lab made them; the uninstall keeps them); nothing
    may be lost. Returns the run's output, recap and seconds."""
    streams = [UdpStream(lab, 'r1h1', 'r2h1', plane='a', family=family, pps=PPS) for family in (4, 6)]
    for stream in streams:
        stream.start()
    try:
        time.sleep(0.5)
        for stream in streams:
            stream.mark('uninstall')
        started = time.monotonic()
        out, recap = play(lab, UNINSTALL)
        uninstall_s = time.monotonic() - started
        for stream in streams:
            stream.mark('uninstalled')
        time.sleep(0.5)
    finally:
        for stream in streams:
            stream.stop()
    results = [stream.result() for stream in streams]
    for family, r in zip((4, 6), results):
        print('\nIPv%d across the uninstall (%.1f s): %s' % (family, uninstall_s, r.summary()))
    for r in results:
        assert r.sent > PPS * uninstall_s * 0.5, r.summary()
        assert r.lost == 0 and r.socket_drops == 0, r.summary()
    return out, recap, uninstall_s


def test_uninstall_puts_every_host_back_under_traffic_and_a_second_run_changes_nothing(lab, tmp_path):
    """Also: a host steering traffic is refused before any change (one deployment serves both)."""
    before = snapshots(lab)
    started = time.monotonic()
    for mode in (('--check',), ()):  # on hosts edgeft never touched: nothing to do, nothing created
        out, recap = play(lab, UNINSTALL, *mode)
        assert recap == {host: (0, 0) for host in HOSTS}, out[-6000:]
    assert_same(before, snapshots(lab), 'an uninstall of hosts edgeft never touched')
    noop_s = time.monotonic() - started

    deploy(lab)
    leave_drain_and_agent_leftovers(lab, tmp_path)
    deployed = snapshots(lab)
    assert deployed['r1h1']['path %s' % (lab.roots / 'r1h1' / 'etc')] != before['r1h1']['path %s' % (lab.roots / 'r1h1' / 'etc')]

    _out, recap = play(lab, UNINSTALL, '--check')
    assert all(changed > 0 for changed, _failed in recap.values()), recap
    assert_same(deployed, snapshots(lab), 'uninstall --check')

    _out, recap, uninstall_s = uninstall_under_traffic(lab)
    assert all(changed > 0 for changed, _failed in recap.values()), recap
    assert_same(before, snapshots(lab), 'the hosts after site.yml and uninstall.yml')
    for host in HOSTS:
        assert pinned(lab, host) == []

    started = time.monotonic()
    _out, recap = play(lab, UNINSTALL)
    again_s = time.monotonic() - started
    assert recap == {host: (0, 0) for host in HOSTS}, 'a second uninstall changed something:\n' + _out[-6000:]
    matrix = lab.ping_matrix()
    assert matrix.ok, matrix.format()
    print('\nuninstall: no-op runs (check + real) %.1f s, uninstall %.1f s, second run %.1f s' % (noop_s, uninstall_s, again_s))
