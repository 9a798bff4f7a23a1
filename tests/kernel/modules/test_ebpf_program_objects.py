"""edgeft.failover.ebpf_program with prebuilt objects (the object loader): the
objects are built here with clang, as the controller builds them, and loaded by
the system's libbpf inside throwaway namespaces with a private bpffs.

Bad objects, objects of another layout or size, a missing libbpf and a kernel
below the minimum are refused before anything is replaced: the programs
attached before stay attached (same ids) and keep forwarding.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from ebpf_program_env import PLANES, UdpStreams, attach_params, environment_problem, run_module
from repo import REPO

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import kernel_version, libbpf, objects
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import DatapathMaps
from ansible_collections.edgeft.failover.plugins.module_utils.program import load

_PROBLEM = environment_problem() or (None if shutil.which('clang') else 'clang missing: run scripts/bootstrap.sh')
pytestmark = pytest.mark.skipif(_PROBLEM is not None, reason=_PROBLEM or '')
# The tests that count a stream's lost packets are marked serial (scripts/test.sh runs them
# alone); the others run in the parallel part.

BPF_DIR = str(REPO / 'bpf')


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    """Both planes' objects, built once for the module as the controller builds them."""
    cache = str(tmp_path_factory.mktemp('objects'))
    return {plane: objects.build(plane, None, BPF_DIR, cache).path for plane in (0, 1)}


def object_params(params, built):
    """The same attach points, each with its plane's object instead of src and plane."""
    out = dict(params)
    del out['src']
    out['attach'] = [{'interface': a['interface'], 'direction': a['direction'], 'object': built[a['plane']]}
                     for a in params['attach']]
    return out


@pytest.fixture
def params(bpffs, tmp_path, built):
    return object_params(attach_params(os.path.join(bpffs, 'host'), str(tmp_path / 'state')), built)


def ok(result):
    assert not result['failed'], result.get('msg')
    return result


def refused(lab, params, before):
    """Run, expect a failure, and prove the programs attached before are untouched."""
    res = run_module(lab, params)
    assert res['failed'], res
    assert filters(lab) == before, 'a refused run changed the attached filters'
    return res['msg']


def filters(lab):
    return {(dev, d): lab.filters(dev, d) for dev in ('p0', 'p1') for d in ('egress', 'ingress')}


def forwards_without_loss(lab, seconds=0.5):
    streams = UdpStreams(lab).start()
    try:
        time.sleep(seconds)
    finally:
        streams.stop()
    report = streams.report()
    assert streams.send_errors == 0
    assert all(sent > 100 and lost == 0 for sent, _unused, lost in report.values()), report


@pytest.mark.serial
def test_objects_attach_then_a_second_run_loads_nothing(lab, params, monkeypatch):
    first = ok(run_module(lab, params))
    assert first['changed'] and len(first['attached']) == 4
    names = {p['name'] for p in first['programs']}
    assert all(n.startswith('edgeft:edgeft_') for n in names) and len(names) == 4
    assert sorted(os.path.basename(p) for p in first['pin_paths']) == sorted(
        s for s in os.listdir(params['pin_root']))
    monkeypatch.setattr(load, 'load_programs', lambda *a, **k: pytest.fail('loaded on an unchanged run'))
    again = ok(run_module(lab, params))
    assert again['changed'] is False
    assert [p['prog_id'] for p in again['programs']] == [p['prog_id'] for p in first['programs']]
    forwards_without_loss(lab)


@pytest.mark.serial
def test_switching_from_bcc_to_objects_replaces_in_place_and_keeps_the_maps(lab, params, bpffs, tmp_path):
    """The redeploy of a fleet moving to the object loader: no packet lost, the peer table kept."""
    bcc_params = attach_params(params['pin_root'], params['state_dir'])
    ok(run_module(lab, bcc_params))
    with DatapathMaps.open_pinned(params['pin_root']) as maps:
        maps.set_plane(0, lab.index['p0'])
        maps.set_plane(1, lab.index['p1'])
        maps.set_peer(7, v4=[PLANES[0][3], PLANES[1][3]])
        streams = UdpStreams(lab).start()
        try:
            time.sleep(0.4)
            res = run_module(lab, params)
            time.sleep(0.4)
        finally:
            streams.stop()
        ok(res)
        assert len(res['replaced']) == 4
        assert maps.get_peer(7)['v4'][:2] == [PLANES[0][3], PLANES[1][3]]
        counted = sum(maps.plane_counters(p)['tx_packets'] for p in (0, 1))
    report = streams.report()
    assert all(lost == 0 for _unused, _unused2, lost in report.values()), report
    assert counted > 0  # the object's programs count the same pinned counters


@pytest.mark.serial
def test_bad_objects_are_refused_and_the_attached_programs_keep_forwarding(lab, params, built, tmp_path):
    ok(run_module(lab, params))
    before = filters(lab)

    truncated = tmp_path / 'truncated.bpf.o'
    truncated.write_bytes(open(built[0], 'rb').read()[:4096])
    not_elf = tmp_path / 'garbage.bpf.o'
    not_elf.write_bytes(b'this is not an object' * 100)
    for bad in (truncated, not_elf):
        changed = dict(params, attach=[dict(a, object=str(bad)) if a['interface'] == 'p0' else a for a in params['attach']])
        msg = refused(lab, changed, before)
        assert str(bad) in msg and 'attach[0].object' in msg, msg

    missing = dict(params, attach=[dict(params['attach'][0], object=str(tmp_path / 'nope.bpf.o'))] + params['attach'][1:])
    assert 'cannot read' in refused(lab, missing, before)

    # Sources of another layout version: every map renamed to _v2.
    other = tmp_path / 'bpf-v2'
    shutil.copytree(BPF_DIR, other)
    for name in os.listdir(other):
        text = (other / name).read_text().replace('_v1', '_v2')
        (other / name).write_text(text)
    v2 = objects.build(0, None, str(other), str(tmp_path / 'cache')).path
    msg = refused(lab, dict(params, attach=[dict(params['attach'][0], object=v2)] + params['attach'][1:]), before)
    assert 'lacks the maps' in msg and 'layout version 1' in msg and v2 in msg, msg

    # Other sizes than the maps pinned: refused before libbpf is asked to reuse them.
    bigger = objects.build(0, {'EDGEFT_MAX_PEERS': 128}, BPF_DIR, str(tmp_path / 'cache')).path
    msg = refused(lab, dict(params, attach=[dict(a, object=bigger) for a in params['attach'][:2]] + params['attach'][2:]), before)
    assert 'edgeft_state_v1' in msg and 'EDGEFT_MAX_' in msg, msg

    msg = refused(lab, dict(params, attach=[dict(params['attach'][0], function='edgeft_nope')] + params['attach'][1:]), before)
    assert 'attach[0].function' in msg and 'edgeft_nope' in msg
    forwards_without_loss(lab)


def test_conflicting_options_are_refused(lab, params):
    ok(run_module(lab, params))
    before = filters(lab)
    msg = refused(lab, dict(params, src=str(REPO / 'bpf' / 'failover_tc.c')), before)
    assert msg.startswith('src and attach[0].object'), msg
    msg = refused(lab, dict(params, defines={'EDGEFT_MAX_PEERS': 64}), before)
    assert msg.startswith('defines:') and 'bpf_object' in msg, msg
    msg = refused(lab, dict(params, attach=[dict(params['attach'][0], plane=0)] + params['attach'][1:]), before)
    assert msg.startswith('attach[0].defines:') and 'built into an object' in msg, msg
    msg = refused(lab, dict(params, attach=[{k: v for k, v in params['attach'][0].items() if k != 'object'}]
                            + params['attach'][1:]), before)
    assert msg.startswith('attach[0].object: every attach point needs an object'), msg


def test_a_host_without_libbpf_is_told_the_package(lab, params, monkeypatch):
    """libbpf cannot be absent from this machine: its lookup is pointed at a library that does not exist."""
    ok(run_module(lab, params))
    before = filters(lab)
    monkeypatch.setattr(libbpf, '_lib', None)
    monkeypatch.setattr(libbpf, 'SONAMES', ('libbpf-absent.so.1',))
    monkeypatch.setattr(libbpf.ctypes.util, 'find_library', lambda name: None)
    msg = refused(lab, dict(params, attach=[dict(a, object=a['object'] + '.new') for a in params['attach']]), before)
    assert msg.startswith('object:') and 'libbpf1' in msg and 'ebpf_failover_loader: bcc' in msg, msg


def test_a_kernel_below_the_minimum_is_refused(lab, params, monkeypatch):
    """This machine's kernel is new: the release the module reads is replaced by an old one."""
    real = os.uname()
    fake = os.uname_result((real.sysname, real.nodename, '5.10.0-28-amd64', real.version, real.machine))
    monkeypatch.setattr(kernel_version.os, 'uname', lambda: fake)
    res = run_module(lab, params)
    assert res['failed'] and '5.10.0-28-amd64' in res['msg'] and '5.12' in res['msg'], res
    assert filters(lab) == {k: [] for k in filters(lab)}
