"""edgeft.failover.ebpf_program on a real kernel: throwaway namespaces, a private bpffs.

Every test builds its own host/peer namespace pair (ebpf_program_env.Lab) and
bpffs, runs the module's main() in-process inside the host namespace, and
checks the kernel's view with the tc command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from ebpf_program_env import PLANES, UdpStreams, attach_params, environment_problem, inside, run_module

from ansible_collections.edgeft.failover.plugins.module_utils import tc
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import DatapathMaps
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.program import load, record

_PROBLEM = environment_problem()
pytestmark = pytest.mark.skipif(_PROBLEM is not None, reason=_PROBLEM or '')
# The tests that count a stream's lost packets are marked serial (scripts/test.sh runs them
# alone); the others run in the parallel part.

HOOKS = [('p0', 'egress'), ('p0', 'ingress'), ('p1', 'egress'), ('p1', 'ingress')]


@pytest.fixture
def params(bpffs, tmp_path):
    return attach_params(os.path.join(bpffs, 'host'), str(tmp_path / 'state'))


@pytest.fixture
def no_compile(monkeypatch):
    """Fail the test if the module compiles anything."""
    def refuse(*args, **kwargs):
        raise AssertionError('the module compiled although nothing had to change')
    monkeypatch.setattr(load, 'load_programs', refuse)


def ok(result):
    assert not result['failed'], result.get('msg')
    return result


def failed(result):
    assert result['failed'], 'expected a failure, got %s' % json.dumps(result, default=str)[:2000]
    return result['msg']


def kernel(lab):
    """{(dev, direction): [(prio, handle, name, prog_id)]} as tc reports it."""
    return {(dev, d): lab.filters(dev, d) for dev, d in HOOKS}


def ids(result):
    return [p['prog_id'] for p in result['programs']]


def nothing_attached(lab, pin_root):
    for dev in ('p0', 'p1'):
        assert 'clsact' not in lab.qdiscs(dev), lab.qdiscs(dev)
    assert not os.path.exists(pin_root) or os.listdir(pin_root) == []


def foreign_filter(lab, dev, direction, prio, handle, name='foreign'):
    """A bpf filter edgeft did not create (a pass-through program), attached with pyroute2."""
    import bcc

    b = bcc.BPF(text=b'int foreign(struct __sk_buff *skb) { return -1; }')
    try:
        fd = b.load_func(b'foreign', bcc.BPF.SCHED_CLS).fd
        with inside(lab.ns):
            ipr = tc.open_ipr()
            try:
                idx = ipr.link_lookup(ifname=dev)[0]
                if tc.qdisc_at_clsact(ipr, idx) is None:
                    tc.add_clsact(ipr, idx)
                tc.set_bpf_filter(ipr, idx, tc.PARENTS[direction], prio, handle, fd, name)
            finally:
                ipr.close()
    finally:
        b.cleanup()


def warm_up(lab):
    """Resolve neighbours both ways so no stream packet waits in an ARP queue."""
    for ns, plane_addr in ((lab.ns, 3), (lab.peer, 2)):
        for plane in PLANES.values():
            subprocess.run(['ip', 'netns', 'exec', ns, 'ping', '-c1', '-W1', '-q', plane[plane_addr]],
                           check=True, capture_output=True)


# ------------------------------------------------------------------ attach, idempotence


def test_first_attach_creates_clsact_and_filters(lab, params):
    res = ok(run_module(lab, params))
    assert res['changed'] is True
    assert res['clsact_created'] == ['p0', 'p1']
    assert [(a['interface'], a['direction']) for a in res['attached']] == HOOKS
    assert res['replaced'] == res['removed'] == []
    for prog, (dev, direction) in zip(res['programs'], HOOKS):
        assert (prog['interface'], prog['direction'], prog['priority'], prog['handle']) == (dev, direction, 3792, 0xEDF7)
        assert prog['parent'] == {'egress': 'ffff:fff3', 'ingress': 'ffff:fff2'}[direction]
        assert prog['function'] == 'edgeft_' + direction
        assert prog['name'] == 'edgeft:edgeft_%s:%s' % (direction, prog['digest']) and len(prog['digest']) == 16
        assert isinstance(prog['prog_id'], int) and prog['prog_id'] > 0
        assert len(prog['prog_tag']) == 16
        # the kernel agrees: one filter per hook, ours
        assert lab.filters(dev, direction) == [(3792, 0xEDF7, prog['name'], prog['prog_id'])]
    assert len(set(ids(res))) == 4
    pins = sorted(os.path.join(params['pin_root'], m) for m in
                  ('edgeft_ctrs_v1', 'edgeft_fo_v1', 'edgeft_peers_v1', 'edgeft_plane_v1', 'edgeft_seen_v1', 'edgeft_sent_v1',
                   'edgeft_state_v1', 'edgeft_wake_v1', 'edgeft_xctr_v1', 'edgeft_xlat_v1'))
    assert res['pin_paths'] == pins
    with open(os.path.join(params['state_dir'], record.STATE_FILE)) as f:
        state = json.load(f)
    assert sorted(r['interface'] for r in state['clsact']) == ['p0', 'p1']
    assert 'diff' in res and set(res['diff']['after']['programs']) == {
        '%s %s prio 3792 handle 0xedf7' % hook for hook in HOOKS}


def test_second_run_is_unchanged_and_reloads_nothing(lab, params, monkeypatch):
    first = ok(run_module(lab, params))
    monkeypatch.setattr(load, 'load_programs', lambda *a, **k: pytest.fail('compiled on an unchanged run'))
    second = ok(run_module(lab, params))
    assert second['changed'] is False
    assert ids(second) == ids(first)
    assert [p['name'] for p in second['programs']] == [p['name'] for p in first['programs']]
    assert second['attached'] == second['replaced'] == second['clsact_created'] == []
    assert second['pin_paths'] == first['pin_paths']
    assert second['diff']['before'] == second['diff']['after']


def test_unpinned_maps_force_a_reload(lab, params):
    """Same digest, but the pins are gone: the old programs' maps are unreachable, so reload."""
    first = ok(run_module(lab, params))
    for path in first['pin_paths']:
        os.unlink(path)
    again = ok(run_module(lab, params))
    assert again['changed'] is True and len(again['replaced']) == 4
    assert not set(ids(again)) & set(ids(first))
    assert again['pin_paths'] == first['pin_paths']


@pytest.mark.serial
def test_changed_defines_replace_in_place_without_losing_a_packet(lab, params, capsys):
    first = ok(run_module(lab, params))
    # Known peer on both planes: every stream packet is counted by whichever
    # program is attached, so the counters prove no packet bypassed edgeft.
    with DatapathMaps.open_pinned(params['pin_root']) as maps:
        maps.set_plane(0, lab.index['p0'])
        maps.set_plane(1, lab.index['p1'])
        maps.set_peer(7, v4=[PLANES[0][3], PLANES[1][3]])
        warm_up(lab)
        base = [maps.plane_counters(p) for p in (0, 1)]

        streams = UdpStreams(lab).start()
        try:
            time.sleep(0.6)
            params['defines'] = {'EDGEFT_SEEN_RES_NS': 200000}
            started = time.monotonic()
            res = run_module(lab, params)
            took = time.monotonic() - started
            time.sleep(0.6)
        finally:
            streams.stop()
        ok(res)
        after = [maps.plane_counters(p) for p in (0, 1)]
        peer = maps.get_peer(7)

    report = streams.report()
    with capsys.disabled():
        sys.stdout.write('\n[zero-loss] module run (compile + replace) %.2fs inside the stream; per stream '
                         '(sent, received, lost): %s\n' % (took, report))
    assert streams.send_errors == 0
    for label, (sent, _unused, lost) in report.items():
        assert sent > 1000, (label, sent)
        assert lost == 0, report
    assert sum(counts[2] for counts in report.values()) == 0

    # replaced in place: same priority/handle, one filter per hook, new program ids
    assert res['changed'] and [(r['interface'], r['direction']) for r in res['replaced']] == HOOKS
    assert res['attached'] == [] and res['clsact_created'] == []
    for old, new, hook in zip(first['programs'], res['programs'], HOOKS):
        assert (new['priority'], new['handle']) == (old['priority'], old['handle'])
        assert new['prog_id'] != old['prog_id'] and new['digest'] != old['digest']
        assert lab.filters(*hook) == [(3792, 0xEDF7, new['name'], new['prog_id'])]
    assert res['pin_paths'] == first['pin_paths']
    # the maps (peer table, counters) carried over, and every packet passed an edgeft program
    assert peer['v4'][:2] == [PLANES[0][3], PLANES[1][3]]
    for plane, way, field in ((0, 'egress', 'tx_packets'), (0, 'ingress', 'rx_packets'),
                              (1, 'egress', 'tx_packets'), (1, 'ingress', 'rx_packets')):
        counted = after[plane][field] - base[plane][field]
        assert counted == report['p%d %s' % (plane, way)][0], (plane, way, counted, report)


# ------------------------------------------------------------------ check mode, diff


def test_check_mode_changes_nothing(lab, params, no_compile):
    res = ok(run_module(lab, params, check_mode=True))
    assert res['changed'] is True and len(res['attached']) == 4 and res['clsact_created'] == ['p0', 'p1']
    assert all(p['prog_id'] is None and p['digest'] for p in res['programs'])
    assert set(res['diff']['after']['programs']) and res['diff']['before']['programs'] == {}
    nothing_attached(lab, params['pin_root'])
    assert not os.path.exists(params['state_dir'])


def test_check_mode_reports_a_replace_and_absent_without_doing_it(lab, params, monkeypatch):
    first = ok(run_module(lab, params))
    before = kernel(lab)
    monkeypatch.setattr(load, 'load_programs', lambda *a, **k: pytest.fail('compiled in check mode'))
    res = ok(run_module(lab, dict(params, defines={'EDGEFT_SEEN_RES_NS': 300000}), check_mode=True))
    assert res['changed'] is True and len(res['replaced']) == 4
    assert all(p['prog_id'] is None for p in res['programs'])
    for key, entry in res['diff']['after']['programs'].items():
        assert entry['name'] != res['diff']['before']['programs'][key]['name']
    res = ok(run_module(lab, dict(params, state='absent', unpin_maps=True), check_mode=True))
    assert res['changed'] is True and len(res['removed']) == 4
    assert res['clsact_removed'] == ['p0', 'p1'] and res['unpinned'] == first['pin_paths']
    assert res['diff']['after']['programs'] == {}
    assert kernel(lab) == before and ok(run_module(lab, params))['changed'] is False
    assert all(os.path.exists(p) for p in first['pin_paths'])


# ------------------------------------------------------------------ rollback


@pytest.mark.serial
@pytest.mark.parametrize('fail_on', [2, 4], ids=['second-swap', 'last-swap'])
def test_failed_swap_rolls_back_to_the_previous_programs(lab, params, monkeypatch, fail_on):
    first = ok(run_module(lab, params))
    before = kernel(lab)
    real = tc.set_bpf_filter
    calls = []

    def flaky(*args, **kwargs):
        calls.append(args[6])  # the filter name
        if len(calls) == fail_on:
            raise tc.TcError('injected failure')
        return real(*args, **kwargs)

    monkeypatch.setattr(tc, 'set_bpf_filter', flaky)
    msg = failed(run_module(lab, dict(params, defines={'EDGEFT_SEEN_RES_NS': 200000})))
    monkeypatch.setattr(tc, 'set_bpf_filter', real)
    assert 'attach[%d] (%s %s): replace the filter: injected failure' % ((fail_on - 1,) + HOOKS[fail_on - 1]) in msg
    assert 'Rolled back: the previous programs are attached again' in msg
    # swaps done before the failure were undone with the old programs' names
    assert calls[fail_on:] == [p['name'] for p in reversed(first['programs'][:fail_on - 1])]
    assert kernel(lab) == before
    # and they still forward
    streams = UdpStreams(lab, pps_per_stream=500).start()
    try:
        time.sleep(0.5)
    finally:
        streams.stop()
    assert all(sent > 100 and lost == 0 for sent, _unused, lost in streams.report().values()), streams.report()
    again = ok(run_module(lab, params))
    assert again['changed'] is False and ids(again) == ids(first)


def test_failed_first_attach_leaves_nothing_behind(lab, params, monkeypatch):
    real = tc.set_bpf_filter
    calls = []

    def flaky(*args, **kwargs):
        calls.append(args)
        if len(calls) == 3:
            raise tc.TcError('injected failure')
        return real(*args, **kwargs)

    monkeypatch.setattr(tc, 'set_bpf_filter', flaky)
    msg = failed(run_module(lab, params))
    assert 'attach[2] (p1 egress): attach the filter: injected failure' in msg and 'Rolled back' in msg
    nothing_attached(lab, params['pin_root'])
    assert not os.path.exists(params['pin_root'])  # created by the run, removed by the rollback
    with open(os.path.join(params['state_dir'], record.STATE_FILE)) as f:
        assert json.load(f)['clsact'] == []


# ------------------------------------------------------------------ foreign objects, absent


def test_foreign_clsact_is_used_and_never_deleted(lab, params):
    lab.tc('qdisc', 'add', 'dev', 'p0', 'clsact')
    res = ok(run_module(lab, params))
    assert res['clsact_created'] == ['p1']
    res = ok(run_module(lab, dict(params, state='absent')))
    assert len(res['removed']) == 4 and res['clsact_removed'] == ['p1']
    assert 'clsact' in lab.qdiscs('p0')
    assert 'clsact' not in lab.qdiscs('p1')
    assert all(not f for f in kernel(lab).values())


def test_foreign_filter_at_our_priority_is_refused(lab, params):
    foreign_filter(lab, 'p1', 'ingress', 3792, 1)
    msg = failed(run_module(lab, params))
    assert 'attach[3].priority: p1 ingress priority 3792 already holds a filter edgeft did not create' in msg
    assert "name 'foreign'" in msg and 'handle 0x1' in msg
    assert 'clsact' not in lab.qdiscs('p0') and not os.path.exists(params['pin_root'])
    assert [f[2] for f in lab.filters('p1', 'ingress')] == ['foreign']
    assert lab.filters('p1', 'egress') == []


def test_foreign_filter_in_our_slot_is_refused_and_left_on_absent(lab, params):
    foreign_filter(lab, 'p0', 'egress', 3792, 0xEDF7, name='someone-else')
    msg = failed(run_module(lab, params))
    assert 'attach[0].priority' in msg and "'someone-else'" in msg
    res = ok(run_module(lab, dict(params, state='absent')))
    assert res['changed'] is False and res['removed'] == []
    assert any('not created by edgeft' in w for w in res['warnings'])
    assert [f[2] for f in lab.filters('p0', 'egress')] == ['someone-else']


def test_own_filter_under_another_handle_is_not_duplicated(lab, params):
    ok(run_module(lab, params))
    before = kernel(lab)
    params['attach'][0]['handle'] = 5
    msg = failed(run_module(lab, params))
    assert 'attach[0].handle: p0 egress priority 3792 already holds another edgeft filter' in msg
    assert kernel(lab) == before


def test_absent_removes_only_ours(lab, params):
    ok(run_module(lab, params))
    foreign_filter(lab, 'p0', 'egress', 100, 1, name='keep-me')
    res = ok(run_module(lab, dict(params, state='absent')))
    assert [(r['interface'], r['direction']) for r in res['removed']] == HOOKS
    # p0's clsact is ours but still carries a foreign filter: kept; p1's is ours and empty: gone
    assert res['clsact_removed'] == ['p1']
    assert [f[2] for f in lab.filters('p0', 'egress')] == ['keep-me']
    assert lab.filters('p0', 'ingress') == [] and 'clsact' not in lab.qdiscs('p1')
    assert res['unpinned'] == [] and len(res['pin_paths']) == len(layout.MAPS)  # maps stay by default
    again = ok(run_module(lab, dict(params, state='absent')))
    assert again['changed'] is False


def test_absent_with_unpin_maps_removes_the_pins(lab, params):
    first = ok(run_module(lab, params))
    ok(run_module(lab, dict(params, state='absent')))
    assert all(os.path.exists(p) for p in first['pin_paths'])
    # the filters are gone; the pins are still found through the state record
    res = ok(run_module(lab, dict(params, state='absent', unpin_maps=True)))
    assert res['changed'] is True and res['unpinned'] == first['pin_paths'] and res['removed'] == []
    assert not os.path.exists(params['pin_root'])
    assert ok(run_module(lab, dict(params, state='absent', unpin_maps=True)))['changed'] is False


def test_unpin_keeps_maps_other_edgeft_filters_use(lab, params):
    first = ok(run_module(lab, params))
    res = ok(run_module(lab, dict(params, state='absent', unpin_maps=True, attach=params['attach'][:2])))
    assert len(res['removed']) == 2 and res['unpinned'] == []
    assert any('still used by other edgeft filters' in w for w in res['warnings'])
    assert all(os.path.exists(p) for p in first['pin_paths'])


def test_absent_of_nothing_is_unchanged(lab, params):
    res = ok(run_module(lab, dict(params, state='absent', unpin_maps=True, attach=params['attach'] + [
        {'interface': 'gone0', 'direction': 'egress'}])))
    assert res['changed'] is False and res['removed'] == []
    nothing_attached(lab, params['pin_root'])


# ------------------------------------------------------------------ bad input


def _broken_source(tmp_path):
    path = tmp_path / 'broken.c'
    path.write_text('int edgeft_egress(struct __sk_buff *skb) { return }\n')
    return str(path)


_REAL_UNAME = os.uname()


def _fake_uname():
    real = _REAL_UNAME
    return type(real)((real.sysname, real.nodename, '6.99.0-edgeft-test', real.version, real.machine))


BAD = [
    ('missing interface', lambda p, t, m, lab: p['attach'][1].update(interface='nope0'),
     ["attach[1].interface: interface 'nope0' does not exist"]),
    ('bad direction', lambda p, t, m, lab: p['attach'][0].update(direction='sideways'),
     ['direction', 'attach', 'ingress, egress']),
    ('duplicate attach point', lambda p, t, m, lab: p['attach'].append(dict(p['attach'][0])),
     ['attach[4]: p0 egress priority 3792 is already declared by attach[0]']),
    ('pin_root not on bpffs', lambda p, t, m, lab: p.update(pin_root=str(t / 'plain' / 'edgeft')),
     ['pin_root:', 'is not on a bpf filesystem', 'mount -t bpf']),
    ('pin_root relative', lambda p, t, m, lab: p.update(pin_root='bpf/edgeft'), ['pin_root:']),
    ('src missing', lambda p, t, m, lab: p.update(src=str(t / 'nope.c')), ['src: cannot read']),
    ('src not given', lambda p, t, m, lab: p.pop('src'), ['src or object: one is required with state=present']),
    ('include dir missing', lambda p, t, m, lab: p.update(include_dirs=[str(t / 'nope')]), ['include_dirs[0]:']),
    ('bad define name', lambda p, t, m, lab: p.update(defines={'BAD-NAME': 1}), ["defines: 'BAD-NAME' is not a C macro name"]),
    ('reserved define', lambda p, t, m, lab: p.update(defines={'EDGEFT_PIN_DIR': '"/x"'}), ['defines: EDGEFT_PIN_DIR is set by the module']),
    ('bad tunable', lambda p, t, m, lab: p.update(defines={'EDGEFT_MAX_PLANES': 9}), ['defines: EDGEFT_MAX_PLANES must be']),
    ('bad tunable of one point', lambda p, t, m, lab: p['attach'][1].update(defines={'EDGEFT_MAX_PEERS': 'many'}),
     ['attach[1].defines:', 'many']),
    ('plane from defines above MAX_PLANES', lambda p, t, m, lab: p['attach'][1].update(plane=None, defines={'EDGEFT_PLANE': 3}),
     ['attach[1].defines: plane 3 is not below EDGEFT_MAX_PLANES']),
    ('plane out of range', lambda p, t, m, lab: p['attach'][2].update(plane=7), ['attach[2].plane:']),
    ('plane above MAX_PLANES', lambda p, t, m, lab: p['attach'][2].update(plane=2), ['attach[2].plane: plane 2 is not below EDGEFT_MAX_PLANES']),
    ('plane conflicts with defines', lambda p, t, m, lab: p['attach'][0].update(defines={'EDGEFT_PLANE': 1}),
     ['attach[0].plane: 0 conflicts with EDGEFT_PLANE=1']),
    ('priority 0', lambda p, t, m, lab: p['attach'][1].update(priority=0), ['attach[1].priority:']),
    ('handle too big', lambda p, t, m, lab: p['attach'][1].update(handle=1 << 32), ['attach[1].handle:']),
    ('function not an identifier', lambda p, t, m, lab: p['attach'][3].update(function='edgeft-x'), ['attach[3].function:']),
    ('unknown function', lambda p, t, m, lab: p['attach'][3].update(function='edgeft_nope'),
     ['attach[3].function: loading edgeft_nope', 'nothing was changed']),
    ('source does not compile', lambda p, t, m, lab: p.update(src=_broken_source(t)), ['src: bcc could not compile', 'nothing was changed']),
    ('bcc missing', lambda p, t, m, lab: m.setitem(sys.modules, 'bcc', None), ['python3-bpfcc']),
    ('headers missing', lambda p, t, m, lab: (m.delenv('BCC_KERNEL_SOURCE', raising=False), m.setattr(os, 'uname', _fake_uname)),
     ['linux-headers-6.99.0-edgeft-test']),
    ('not root', lambda p, t, m, lab: m.setattr(os, 'geteuid', lambda: 1000), ['must run as root']),
    ('ingress qdisc in the way', lambda p, t, m, lab: lab.tc('qdisc', 'add', 'dev', 'p1', 'ingress'),
     ["attach[2].interface: p1 has a 'ingress' qdisc where clsact belongs"]),
    ('state_dir is a file', lambda p, t, m, lab: (t / 'file').write_text('') or p.update(state_dir=str(t / 'file')), ['state_dir:']),
]


@pytest.mark.parametrize('mutate, expected', [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_names_the_option_and_changes_nothing(lab, params, tmp_path, monkeypatch, mutate, expected):
    mutate(params, tmp_path, monkeypatch, lab)
    msg = failed(run_module(lab, params))
    monkeypatch.undo()
    for part in expected:
        assert part in msg, msg
    assert 'clsact' not in lab.qdiscs('p0')
    assert all(not f for f in kernel(lab).values())
    assert not os.path.exists(os.path.join(params['pin_root']))


def test_pins_of_another_size_are_refused_before_anything_changes(lab, params):
    first = ok(run_module(lab, dict(params, defines={'EDGEFT_MAX_PEERS': 64, 'EDGEFT_MAX_ADDRS': 512})))
    before = kernel(lab)
    msg = failed(run_module(lab, params))
    assert msg.startswith('pin_root: map edgeft_') and 'remove the pin' in msg
    assert kernel(lab) == before and ids(ok(run_module(lab, dict(params, defines={
        'EDGEFT_MAX_PEERS': 64, 'EDGEFT_MAX_ADDRS': 512})))) == ids(first)


def test_sizes_must_agree_between_attach_points(lab, params):
    params['attach'][2]['defines'] = {'EDGEFT_MAX_PEERS': 128}
    msg = failed(run_module(lab, params))
    assert 'attach[2].defines: map edgeft_' in msg and 'must agree' in msg
    assert all(not f for f in kernel(lab).values())
