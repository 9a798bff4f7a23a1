"""playbooks/site.yml on a fresh lab: --check changes nothing, a run deploys and persists each
host's network configuration, a second run changes nothing; playbooks/datapath.yml replaces the
programs of the deployed lab and nothing else."""

import json
import os
import re
import subprocess

import pytest
import yaml
from deploy_helpers import pinned, run_playbook, tc_filters

HOSTS = ('r1h1', 'r1h2', 'r2h1', 'r2h2')
BACKUP_ROUTES = [{'dst': '198.18.250.0/24', 'via': [{'interface': 'fab0', 'metric': 100}, {'interface': 'fab1', 'metric': 200}]}]


@pytest.fixture(scope='module')
def persisted(tmp_path_factory):
    """site.yml's options for a renderer (ifupdown) and backup routes: each host's plane NICs and
    routes persisted into a scratch root per host (lab hosts share the machine's /etc). Every
    site.yml run of this module passes them, so each finds what the others persisted."""
    roots = tmp_path_factory.mktemp('roots')
    for host in HOSTS:
        program = roots / host / 'sbin' / 'ifup'  # detection needs the renderer's program in the root
        program.parent.mkdir(parents=True)
        program.write_text('')
        interfaces = roots / host / 'etc' / 'network' / 'interfaces'  # as Debian installs it
        interfaces.parent.mkdir(parents=True)
        interfaces.write_text('source /etc/network/interfaces.d/*\n')
    extra = ('-e', 'edgeft_persist=ifupdown', '-e', 'network_persist_root=%s/{{ inventory_hostname }}' % roots,
             '-e', '{"edgeft_backup_routes": %s}' % json.dumps(BACKUP_ROUTES))
    return roots, extra


def host_var(lab, host, name):
    with open(lab.inventory_path) as f:
        return yaml.safe_load(f)['all']['children']['fabric']['hosts'][host][name]


def refused_on_every_host(lab, message, *extra, playbook='playbooks/site.yml'):
    """The playbook with `extra` fails on every host with `message` and changes nothing: no task
    changed, no map pinned."""
    rc, out, recap = run_playbook(lab.inventory_path, playbook, *extra)
    assert rc != 0 and all(failed for _changed, failed in recap.values()), out[-3000:]
    assert message in out, out[-3000:]
    assert all(changed == 0 for changed, _failed in recap.values()), recap
    for host in HOSTS:
        assert pinned(lab, host) == [], 'a refused run pinned maps on %s' % host


def test_impossible_agent_timers_are_refused_before_any_change(fresh_lab):
    lab = fresh_lab
    # The agent's own check (agent_config_refusal), naming the role variable.
    refused_on_every_host(lab, 'ebpf_failover_agent_hold_down_ms: 20 ms is shorter than the detection time (interval_ms '
                               '10 x multiplier 3 = 30 ms)', '-e', 'ebpf_failover_agent_hold_down_ms=20')
    for host in HOSTS:
        assert not os.path.exists(host_var(lab, host, 'edgeft_agent_config')), 'a refused run wrote the agent config'


def test_a_plane_the_data_path_cannot_carry_is_refused_before_any_change(fresh_lab, tmp_path):
    """A third plane on NICs that exist (lo) with a data path built for two: the plane model and
    the plane count are checked up front, so multihome configures nothing that ebpf_program would
    then refuse."""
    lab = fresh_lab
    # r1h1's planes and a third for every host: the refusal is the same on each, before anything differs.
    planes = host_var(lab, 'r1h1', 'edgeft_planes') + [{'name': 'c', 'interface': 'lo', 'ipv6': 'fd0e:d6ef:7c00:1::b/64'}]
    extra = tmp_path / 'three_planes.json'
    extra.write_text(json.dumps({'edgeft_planes': planes}))
    refused_on_every_host(lab, 'edgeft_planes: 3 planes, but the data path is built for 2 (EDGEFT_MAX_PLANES); declare at '
                               'most 2, or set ebpf_failover_defines.EDGEFT_MAX_PLANES to 3', '-e', '@%s' % extra)
    for host in HOSTS:
        lo = subprocess.run(lab.exec_argv(host, ['ip', '-6', 'addr', 'show', 'dev', 'lo']), capture_output=True,
                            text=True, check=True).stdout
        assert 'fd0e:d6ef:7c00' not in lo, 'a refused run configured plane c on %s' % host


def test_a_bad_backup_route_is_refused_before_any_change(fresh_lab, tmp_path):
    """The backup routes are set after every role: their declaration is checked first, so a bad
    route leaves an undeployed host as it was instead of deployed and then refused."""
    routes = [{'dst': '198.18.2.11/32', 'via': [{'interface': 'fab0', 'metric': 300}, {'interface': 'fab1', 'metric': 200}]}]
    extra = tmp_path / 'routes.json'
    extra.write_text(json.dumps({'edgeft_backup_routes': routes}))
    refused_on_every_host(fresh_lab, 'edgeft_backup_routes[0].via[1].metric: 200', '-e', '@%s' % extra)


def test_the_data_path_playbook_refuses_hosts_site_never_deployed(fresh_lab):
    refused_on_every_host(fresh_lab, 'it was never deployed', playbook='playbooks/datapath.yml')


def test_check_then_deploy_then_idempotent(fresh_lab, persisted, tmp_path):
    """From a controller that never built the objects (an empty cache): check, deploy, again.
    With a renderer chosen, the deploy also writes each host's plane NICs and backup routes into
    one configuration per interface, and the second run finds that unchanged too."""
    lab = fresh_lab
    roots, persist = persisted
    cache = ('-e', 'edgeft_object_cache=%s' % (tmp_path / 'objects')) + persist

    rc, out, recap = run_playbook(lab.inventory_path, 'playbooks/site.yml', '--check', *cache)
    assert rc == 0, out[-6000:]
    assert set(recap) == set(HOSTS)
    assert all(changed > 0 for changed, _failed in recap.values()), recap
    assert 'would be rebuilt and replaced in place' in out
    for host in HOSTS:
        assert pinned(lab, host) == [], 'check mode pinned maps on %s' % host
        for ifname in ('fab0', 'fab1'):
            assert 'edgeft' not in tc_filters(lab, host, ifname, 'egress')
        assert not (roots / host / 'etc' / 'network' / 'interfaces.d').exists(), 'check mode persisted on %s' % host

    rc, out, recap = run_playbook(lab.inventory_path, 'playbooks/site.yml', *cache)
    assert rc == 0, out[-6000:]
    for host in HOSTS:
        assert 'edgeft_peers_v1' in pinned(lab, host)
        for ifname in ('fab0', 'fab1'):
            for direction in ('egress', 'ingress'):
                assert 'edgeft:edgeft_%s' % direction in tc_filters(lab, host, ifname, direction)
    fab0 = (roots / 'r1h1' / 'etc' / 'network' / 'interfaces.d' / '60-edgeft-fab0').read_text()
    assert 'address 198.18.1.11/16' in fab0 or '198.18.1.11/16' in fab0, fab0
    assert 'table 60901' in fab0 and '198.18.250.0/24' in fab0 and 'metric 100' in fab0, fab0
    fab1 = (roots / 'r1h1' / 'etc' / 'network' / 'interfaces.d' / '60-edgeft-fab1').read_text()
    assert '198.18.250.0/24' in fab1 and 'metric 200' in fab1, fab1
    sysctls = (roots / 'r1h1' / 'etc' / 'sysctl.d' / '60-edgeft.conf').read_text()
    assert re.search(r'^net\.ipv4\.conf\.fab0\.rp_filter\s*=\s*2$', sysctls, re.M), sysctls

    rc, out, recap = run_playbook(lab.inventory_path, 'playbooks/site.yml', *cache)
    assert rc == 0, out[-6000:]
    assert recap == {host: (0, 0) for host in HOSTS}, 'second run changed something:\n' + out[-6000:]

    # The fabric still works in both families on both planes with the programs attached.
    matrix = lab.ping_matrix()
    assert matrix.ok, matrix.format()


def test_restore_at_boot_rebuilds_the_data_path(fresh_lab, persisted):
    """What a reboot loses - tc filters, pinned maps, neighbour entries - comes back from
    `edgeft-agent restore-datapath` and the recorded arguments, without Ansible; a
    site.yml run afterwards finds nothing to change."""
    lab = fresh_lab
    host = 'r1h1'
    ns = lab.netns(host)
    config = os.path.join(host_var(lab, host, 'edgeft_state_dir'), 'datapath.json')
    assert os.path.exists(config), 'site.yml did not record the data path arguments'
    for ifname in ('fab0', 'fab1'):  # the reboot, as far as the data path is concerned
        subprocess.run(['tc', '-n', ns, 'qdisc', 'del', 'dev', ifname, 'clsact'], check=True)
        subprocess.run(['ip', '-n', ns, 'neigh', 'flush', 'dev', ifname], check=True)
    for name in pinned(lab, host):
        os.unlink(os.path.join(lab.pin_root(host), name))
    assert pinned(lab, host) == [] and 'edgeft' not in tc_filters(lab, host, 'fab0', 'egress')

    launcher = os.path.join(host_var(lab, host, 'edgeft_agent_dir'), 'edgeft-agent')
    r = subprocess.run(['ip', 'netns', 'exec', ns, '/usr/bin/python3', launcher, 'restore-datapath', '--datapath-config', config],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'ebpf_program changed, peer_table changed' in r.stdout, r.stdout
    for ifname in ('fab0', 'fab1'):
        for direction in ('egress', 'ingress'):
            assert 'edgeft:edgeft_%s' % direction in tc_filters(lab, host, ifname, direction)
    from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import DatapathMaps

    with DatapathMaps.open_pinned(str(lab.pin_root(host))) as maps:
        assert len(maps.peer_ids()) == len(HOSTS) - 1

    rc, out, recap = run_playbook(lab.inventory_path, 'playbooks/site.yml', *persisted[1])
    assert rc == 0, out[-6000:]
    assert recap == {h: (0, 0) for h in HOSTS}, 'site.yml after the restore changed something:\n' + out[-6000:]
    matrix = lab.ping_matrix()
    assert matrix.ok, matrix.format()


def attached(lab):
    """{(host, nic, direction): the tc filter line of edgeft's program}."""
    return {(host, nic, d): next(line for line in tc_filters(lab, host, nic, d).splitlines() if 'edgeft:' in line)
            for host in HOSTS for nic in ('fab0', 'fab1') for d in ('egress', 'ingress')}


def objects_on(lab, host):
    src = host_var(lab, host, 'edgeft_src_dir')
    return sorted(os.path.join(src, n) for n in os.listdir(src) if n.endswith('.bpf.o'))


def test_the_data_path_playbook_replaces_the_programs_alone(fresh_lab):
    """A changed tunable through datapath.yml: every attach point gets a new program, the maps and
    their contents stay, the record names the new objects and only they stay on the host; the
    plane NICs and the agent's files are not touched; a second run changes nothing."""
    from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import DatapathMaps

    lab = fresh_lab
    before = attached(lab)
    agent_config = {h: os.stat(host_var(lab, h, 'edgeft_agent_config')).st_mtime_ns for h in HOSTS}
    changed = ('-e', '{"ebpf_failover_defines": {"EDGEFT_SEEN_RES_NS": 300000}}')
    try:
        rc, out, recap = run_playbook(lab.inventory_path, 'playbooks/datapath.yml', *changed)
        assert rc == 0, out[-6000:]
        after = attached(lab)
        assert all(after[point] != before[point] for point in before), 'not every attach point was replaced'
        for host in HOSTS:
            record = json.load(open(os.path.join(host_var(lab, host, 'edgeft_state_dir'), 'datapath.json')))
            named = sorted({a['object'] for a in record['ebpf_program']['attach']})
            assert objects_on(lab, host) == named and len(named) == 2, (objects_on(lab, host), named)
            assert os.stat(host_var(lab, host, 'edgeft_agent_config')).st_mtime_ns == agent_config[host]
            with DatapathMaps.open_pinned(str(lab.pin_root(host))) as maps:
                assert len(maps.peer_ids()) == len(HOSTS) - 1
        assert 'is healthy' in out, out[-3000:]
        rc, out, recap = run_playbook(lab.inventory_path, 'playbooks/datapath.yml', *changed)
        assert rc == 0, out[-6000:]
        assert recap == {h: (0, 0) for h in HOSTS}, 'a second run changed something:\n' + out[-6000:]
        matrix = lab.ping_matrix()
        assert matrix.ok, matrix.format()
    finally:  # the next test starts from site.yml's programs
        rc, out, _recap = run_playbook(lab.inventory_path, 'playbooks/datapath.yml')
        assert rc == 0, out[-6000:]
