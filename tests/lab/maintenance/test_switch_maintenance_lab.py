"""The switch maintenance playbooks on a deployed lab: guards, --check, batches and bad input.

(The molecule scenario `default` runs the rolling maintenance of every ToR under traffic, with
real power-offs; these tests prove what must be refused and that a refusal changes nothing.
test_sixteen_host_fabric.py powers a drained ToR off under traffic on a 16-host fabric, with
peers the drain reached only in-band.)
"""

from __future__ import annotations


import pytest
import yaml


from deploy_helpers import run_maintenance, run_playbook

from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import DatapathMaps

HOSTS = ('r1h1', 'r1h2', 'r2h1', 'r2h2')


@pytest.fixture
def lab(shared_default_deployment):
    """The run's shared deployed default lab (tests/lab/conftest.py), reset."""
    return shared_default_deployment.neutral()


def datapath_state(lab):
    """Every host's plane flags and per-peer steering state, straight from the pinned maps."""
    out = {}
    for host in HOSTS:
        with DatapathMaps.open_pinned(str(lab.pin_root(host))) as maps:
            planes = [maps.planes.get(i).flags for i in range(2)]
            peers = {}
            for peer_id in maps.peer_ids():
                st = maps.state.get(peer_id)
                peers[peer_id] = (st.down_mask, st.learned_mask)
        out[host] = {'planes': planes, 'peers': peers}
    return out


@pytest.fixture
def clean(lab):
    """Every test starts and ends with nothing drained."""
    initial = datapath_state(lab)
    yield initial
    assert datapath_state(lab) == initial, 'the test left the data path changed'


def test_check_mode_shows_what_would_move_and_changes_nothing(lab, clean, tmp_path):
    rc, out, _recap, report = run_maintenance(lab, 'rolling_maintenance', 'tor-r1-a', tmp_path, '--check', '--diff')
    assert rc == 0, out[-4000:]
    assert 'Would drain tor-r1-a: plane a off on r1h1, r1h2; r2h1, r2h2 learn in-band to steer its traffic for them' in ' '.join(out.split())
    assert [(r['switch'], r['status']) for r in report] == [('tor-r1-a', 'would undrain')]
    assert datapath_state(lab) == clean


def fabric_and_spines_only(lab, tmp_path):
    """The lab's inventory as the production example writes one: group fabric, and group switches
    with the spines only; no rack, plane or switch groups (the ToRs are what the hosts name in
    edgeft_planes[].switch)."""
    inventory = yaml.safe_load(lab.inventory_path.read_text())
    children = inventory['all']['children']
    for name in [n for n in children if n.startswith(('switch_', 'rack_', 'plane_'))]:
        del children[name]
    switches = children['switches']['hosts']
    for name in [n for n, v in switches.items() if v.get('edgeft_switch_role') != 'spine']:
        del switches[name]
    path = tmp_path / 'fabric_and_spines.yml'
    path.write_text(yaml.safe_dump(inventory))
    return path


def test_an_inventory_of_fabric_and_spines_only_deploys_drains_and_maintains(lab, clean, tmp_path):
    inventory = fabric_and_spines_only(lab, tmp_path)
    rc, out, _recap = run_playbook(inventory, 'playbooks/site.yml', '--check')
    assert rc == 0, out[-4000:]
    rc, out, _recap, report = run_maintenance(lab, 'rolling_maintenance', 'tor-r1-a,spine-b', tmp_path / 'check', '--check',
                                              inventory=inventory)
    assert rc == 0, out[-4000:]
    text = ' '.join(out.split())
    assert 'Would drain tor-r1-a: plane a off on r1h1, r1h2; r2h1, r2h2 learn in-band to steer its traffic for them' in text, out[-4000:]
    assert [(r['switch'], r['status']) for r in report] == [('tor-r1-a', 'would undrain'), ('spine-b', 'would undrain')]
    assert datapath_state(lab) == clean
    # A ToR that is no inventory host at all, drained and undrained for real.
    rc, out, _recap, report = run_maintenance(lab, 'switch_drain', 'tor-r2-b', tmp_path / 'drain', inventory=inventory)
    try:
        assert rc == 0, out[-4000:]
        assert [(r['switch'], r['status'], r['lost_packets']) for r in report] == [('tor-r2-b', 'drained', 0)]
        drained = datapath_state(lab)
        assert drained['r2h1']['planes'][1] & 0x2 and drained['r2h2']['planes'][1] & 0x2
    finally:
        rc, out, _recap, report = run_maintenance(lab, 'switch_undrain', 'tor-r2-b', tmp_path / 'undrain', inventory=inventory)
    assert rc == 0, out[-4000:]
    assert datapath_state(lab) == clean


def test_draining_the_second_tor_of_a_rack_is_refused_and_changes_nothing(lab, clean, tmp_path):
    rc, out, _recap, report = run_maintenance(lab, 'switch_drain', 'tor-r1-a', tmp_path / 'one')
    assert rc == 0, out[-4000:]
    assert [(r['switch'], r['status'], r['lost_packets']) for r in report] == [('tor-r1-a', 'drained', 0)]
    drained = datapath_state(lab)
    assert drained['r1h1']['planes'][0] & 0x2 and drained['r1h2']['planes'][0] & 0x2
    assert drained['r2h1']['peers'] != clean['r2h1']['peers']  # r2h1 avoids plane a towards r1h1 and r1h2
    try:
        rc, out, _recap, report = run_maintenance(lab, 'switch_drain', 'tor-r1-b', tmp_path / 'two')
        assert rc != 0
        text = ' '.join(out.split())
        assert ("tor-r1-b: r1h1's plane 'a' is already drained (switch tor-r1-a): draining tor-r1-b too would leave "
                "r1h1 no plane; undrain that first") in text, out[-4000:]
        assert [(r['switch'], r['status']) for r in report] == [('tor-r1-b', 'not drained, nothing changed')]
        assert datapath_state(lab) == drained
    finally:
        rc, out, _recap, report = run_maintenance(lab, 'switch_undrain', 'tor-r1-a', tmp_path / 'three')
    assert rc == 0, out[-4000:]
    assert [(r['switch'], r['status']) for r in report] == [('tor-r1-a', 'done')]


def test_a_host_holding_the_backup_plane_down_for_its_peers_is_refused_and_changes_nothing(lab, clean, tmp_path):
    # r1h1's data path holds plane b down for every peer (as its agent would judge it): draining
    # tor-r1-a would leave its traffic for them on the switch, with no plane to steer to.
    with DatapathMaps.open_pinned(str(lab.pin_root('r1h1'))) as maps:
        saved = {peer_id: maps.state.get(peer_id) for peer_id in maps.peer_ids()}
        for peer_id in saved:
            maps.set_active(peer_id, 0)
    try:
        held = datapath_state(lab)
        rc, out, _recap, report = run_maintenance(lab, 'switch_drain', 'tor-r1-a', tmp_path)
        assert rc != 0
        text = ' '.join(out.split())
        assert ("tor-r1-a: r1h1's traffic for r2h1 would have nowhere to go but plane 'a': 'b' is down for it (judged by "
                "r1h1's agent, or drained for it); find out why (edgeft.failover.plane_state state=query on r1h1) before "
                "draining tor-r1-a") in text, out[-4000:]
        assert [(r['switch'], r['status']) for r in report] == [('tor-r1-a', 'not drained, nothing changed')]
        assert datapath_state(lab) == held
    finally:
        with DatapathMaps.open_pinned(str(lab.pin_root('r1h1'))) as maps:
            for peer_id, st in saved.items():
                maps.state.put(peer_id, st)


def maintain_with_a_task(lab, tmp_path, switches, during, host, name, task, *extra):
    """rolling_maintenance.yml of `switches` whose maintenance, while switch `during` is drained,
    runs one task on `host` (`task`: its module and arguments as YAML lines, indented by two):
    (return code, output, {switch: its row of the report} in the report's order)."""
    tasks = tmp_path / 'maintenance_tasks.yml'
    tasks.write_text('- name: %s\n%s  delegate_to: %s\n  when: inventory_hostname == %r\n' % (name, task, host, during))
    rc, out, _recap, report = run_maintenance(lab, 'rolling_maintenance', switches, tmp_path / 'run',
                                              '-e', 'edgeft_maintenance_tasks=%s' % tasks, *extra)
    return rc, out, {r['switch']: r for r in report or []}


def test_a_host_failing_mid_batch_stops_later_batches(lab, clean, tmp_path):
    # While tor-r2-a (the second batch) is maintained, r2h1 - a host behind it - fails: its data
    # path becomes unreadable for the rest of the run (a wrong pin_root, as when its bpffs
    # vanished). tor-r2-a cannot be proven healthy from r2h1, so it is not undrained and stays
    # drained, and with the default max_fail_percentage of 0 the batch after it (tor-r1-b) never
    # starts.
    try:
        # Two health checks a second apart instead of 30 two seconds apart: the broken host never
        # answers, and the role's default patience would only make the test wait a minute.
        rc, out, rows = maintain_with_a_task(
            lab, tmp_path, 'tor-r1-a,tor-r2-a,tor-r1-b', 'tor-r2-a', 'r2h1', 'Break the data path of r2h1 for the rest of the run',
            '  ansible.builtin.set_fact:\n    edgeft_pin_root: /nonexistent/edgeft\n  delegate_facts: true\n',
            '-e', 'switch_maintenance_healthy_retries=2', '-e', 'switch_maintenance_healthy_delay=1')
        assert rc != 0
        assert list(rows) == ['tor-r1-a', 'tor-r2-a'], out[-4000:]
        assert rows['tor-r1-a']['status'] == 'done'
        assert rows['tor-r2-a']['status'] == 'undrain failed, left drained'
        assert 'r2h1' in ' '.join(rows['tor-r2-a']['failures'])
        state = datapath_state(lab)
        assert state['r2h1']['planes'][0] & 0x2 and state['r2h2']['planes'][0] & 0x2  # tor-r2-a: still drained
        assert not any(state[h]['planes'][1] & 0x2 for h in HOSTS)  # tor-r1-b: never touched
    finally:
        rc, out, _recap, report = run_maintenance(lab, 'switch_undrain', 'tor-r2-a', tmp_path / 'undrain')
    assert rc == 0, out[-4000:]


def test_a_later_batch_is_guarded_by_a_reading_of_its_own(lab, clean, tmp_path):
    # The preflight's reading is the first batch's guard (roles/switch_maintenance/tasks/preflight.yml);
    # every later batch reads its hosts and probes their backup planes again just before its
    # drain. While tor-r1-a (the first batch) is maintained, r2h1's plane-b NIC goes down:
    # tor-r2-a's guard must see it, although the preflight's probes crossed plane b, and refuse
    # with nothing changed.
    try:
        rc, out, rows = maintain_with_a_task(
            lab, tmp_path, 'tor-r1-a,tor-r2-a', 'tor-r1-a', 'r2h1', "Take r2h1's plane-b NIC down behind the run's back",
            '  ansible.builtin.command:\n    argv: [ip, link, set, fab1, down]\n  changed_when: true\n')
        assert rc != 0
        assert rows['tor-r1-a']['status'] == 'done', out[-4000:]
        assert rows['tor-r2-a']['status'] == 'not drained, nothing changed', out[-4000:]
        text = ' '.join(out.split())
        assert ("tor-r2-a: r2h1's backup plane 'b' is unhealthy: check probes to r1h1, r1h2, r2h2 were lost; repair it "
                "before draining tor-r2-a") in text, out[-4000:]
        assert datapath_state(lab) == clean
    finally:
        with lab.ipr('r2h1') as ipr:
            ipr.link('set', index=ipr.link_lookup(ifname='fab1')[0], state='up')


def test_a_batch_of_two_tors_drains_both_racks_at_once(lab, clean, tmp_path):
    # Every host step of the batch runs on the four hosts at once; each switch judges its own two.
    rc, out, _recap, report = run_maintenance(lab, 'switch_drain', 'tor-r1-a,tor-r2-a', tmp_path / 'drain', '-e', 'edgeft_serial=2')
    try:
        assert rc == 0, out[-4000:]
        assert [(r['switch'], r['status'], r['lost_packets']) for r in report] == [('tor-r1-a', 'drained', 0),
                                                                                   ('tor-r2-a', 'drained', 0)]
        drained = datapath_state(lab)
        assert all(drained[h]['planes'][0] & 0x2 for h in HOSTS)
        assert not any(drained[h]['planes'][1] & 0x2 for h in HOSTS)
        # The host steps ran as the hosts' own tasks, not as a loop delegated from the switch.
        assert 'changed: [r1h1]' in out and 'changed: [r2h2]' in out and 'tor-r1-a -> r1h1' not in out, out[-4000:]
    finally:
        rc, out, _recap, report = run_maintenance(lab, 'switch_undrain', 'tor-r1-a,tor-r2-a', tmp_path / 'undrain', '-e', 'edgeft_serial=2')
    assert rc == 0, out[-4000:]
    assert [(r['switch'], r['status']) for r in report] == [('tor-r1-a', 'done'), ('tor-r2-a', 'done')]


@pytest.mark.parametrize('switches, extra, message', [
    ('tor-r1-a,tor-r1-b', ['-e', 'edgeft_serial=2'],
     'tor-r1-a and tor-r1-b are in the same batch and both serve r1h1 (planes a and b): maintain them in different batches'),
    ('tor-r1-a', ['-e', 'edgeft_serial=0'], 'edgeft_serial: 0 switches per batch would maintain nothing'),
    ('tor-r1-a', ['-e', 'edgeft_max_fail_percentage=150'], 'edgeft_max_fail_percentage: 150 is out of range (0 to 100)'),
])
def test_bad_batches_fail_before_any_host_changes(lab, clean, tmp_path, switches, extra, message):
    rc, out, _recap, report = run_maintenance(lab, 'rolling_maintenance', switches, tmp_path, *extra)
    assert rc != 0
    assert message in ' '.join(out.split()), out[-4000:]
    assert report is None  # refused on the controller: no switch started


@pytest.mark.parametrize('switch, extra_inventory, message', [
    ('tor-r9-a', None, "edgeft_switch: 'tor-r9-a' is neither a switch of the inventory nor a group of switches"),
    ('empty_tors', 'all:\n  children:\n    empty_tors:\n      hosts: {}\n', "edgeft_switch: group 'empty_tors' is empty"),
    ('tor-r2-a', 'all:\n  children:\n    fabric:\n      hosts:\n        r2h2:\n          ansible_host: edgeft-nowhere\n',
     'edgeft_switch: r2h2 did not answer (unreachable, or no edgeft data path): nothing was changed'),
    # r2h2 answers, but its reading (with the first batch's check probes) fails: the reason is named.
    ('tor-r2-a', 'all:\n  children:\n    fabric:\n      hosts:\n        r2h2:\n          edgeft_pin_root: /nonexistent/edgeft\n',
     "edgeft_switch: r2h2 did not answer (unreachable, or no edgeft data path): nothing was changed; fix them or take them "
     "out of the switches' groups. r2h2: pin_root: /nonexistent/edgeft does not exist: attach the programs first"),
])
def test_bad_requests_fail_before_any_host_changes(lab, clean, tmp_path, switch, extra_inventory, message):
    extra = []
    if extra_inventory:
        path = tmp_path / 'extra.yml'
        path.write_text(extra_inventory)
        extra = ['-i', str(path)]
    rc, out, _recap, _report = run_maintenance(lab, 'rolling_maintenance', switch, tmp_path, *extra)
    assert rc != 0
    assert message in ' '.join(out.split()), out[-4000:]
