"""The object build (bpf_object's core): once per sources and settings, named by their digest,
nothing built in check mode, and bad options refused by name. Needs clang, not root."""

from __future__ import annotations

import os
import shutil

import pytest

from repo import REPO

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import libbpf, objects
from ansible_collections.edgeft.failover.plugins.module_utils.program.build_objects import run
from ansible_collections.edgeft.failover.plugins.module_utils.program.spec import ProgramError

BPF_DIR = str(REPO / 'bpf')
pytestmark = pytest.mark.skipif(shutil.which('clang') is None, reason='clang missing: run scripts/bootstrap.sh')


def params(cache, **extra):
    return dict({'src_dir': BPF_DIR, 'planes': None, 'defines': {}, 'cache_dir': str(cache), 'clang': 'clang'}, **extra)


def test_check_mode_names_the_objects_then_a_run_builds_them_once(tmp_path):
    cache = tmp_path / 'cache'
    preview = run(params(cache), check_mode=True)[0]
    assert preview['changed'] is True and not cache.exists()
    assert [o['plane'] for o in preview['objects']] == [0, 1]  # every plane below EDGEFT_MAX_PLANES
    built = run(params(cache))[0]
    assert built['changed'] is True
    assert [o['path'] for o in built['objects']] == [o['path'] for o in preview['objects']]
    for o in built['objects']:
        assert o['file'] == 'edgeft-p%d-%s.bpf.o' % (o['plane'], o['digest'])
        with libbpf.BpfObject(o['path']) as obj:
            assert sorted(obj.programs()) == ['edgeft_egress', 'edgeft_ingress']
            objects.check_layout(obj)
    tcp = built['tcp_object']
    assert tcp['path'] == preview['tcp_object']['path'] and tcp['file'] == 'edgeft-tcp-%s.bpf.o' % tcp['digest']
    with libbpf.BpfObject(tcp['path']) as obj:
        assert obj.programs() == ['edgeft_tcp']
        objects.check_layout(obj)
    again = run(params(cache))[0]
    assert again['changed'] is False and all(o['cached'] for o in again['objects']) and again['tcp_object']['cached']
    assert sorted(os.listdir(cache)) == sorted([o['file'] for o in built['objects']] + [tcp['file']])


def test_the_digest_follows_sources_and_settings(tmp_path):
    base = {o['plane']: o['digest'] for o in run(params(tmp_path), check_mode=True)[0]['objects']}
    bigger = run(params(tmp_path, defines={'EDGEFT_MAX_PEERS': 8192}), check_mode=True)[0]['objects']
    assert all(o['digest'] != base[o['plane']] for o in bigger)
    src = tmp_path / 'bpf'
    shutil.copytree(BPF_DIR, src)
    with open(src / 'edgeft_parse.h', 'a') as f:
        f.write('\n/* a changed header */\n')
    changed = run(params(tmp_path, src_dir=str(src)), check_mode=True)[0]['objects']
    assert all(o['digest'] != base[o['plane']] for o in changed)
    assert base[0] != base[1]


@pytest.mark.parametrize('option,value,words', [
    ('src_dir', '/nonexistent', "src_dir: '/nonexistent' has no failover_tc.c"),
    ('defines', {'EDGEFT_NOPE': 1}, 'defines:'),
    ('defines', {'EDGEFT_MAX_PEERS': 'many'}, 'defines:'),
    ('planes', [2], 'planes[0]: 2 is not a plane index below EDGEFT_MAX_PLANES (2)'),
    ('planes', [], 'planes: at least one plane index is required'),
    ('cache_dir', 'relative/dir', "cache_dir: 'relative/dir' must be an absolute path"),
    ('clang', 'clang-that-is-not-there', 'clang (clang-that-is-not-there) is needed where the objects are built'),
])
def test_bad_options_are_named(tmp_path, option, value, words):
    with pytest.raises(ProgramError) as e:
        run(params(tmp_path / 'cache', **{option: value}))
    assert words in str(e.value)
    assert not (tmp_path / 'cache').exists()


def broken_build(tmp_path, source, plane):
    """Build plane's objects from a copy of bpf/ whose `source` does not compile: (its dir, error)."""
    src = tmp_path / 'bpf'
    shutil.copytree(BPF_DIR, src)
    with open(src / source, 'a') as f:
        f.write('\nthis is not C;\n')
    with pytest.raises(ProgramError) as e:
        run(params(tmp_path / 'cache', src_dir=str(src), planes=[plane]))
    return src, e


def test_a_compile_error_names_the_plane_and_the_source(tmp_path):
    src, e = broken_build(tmp_path, 'failover_tc.c', 1)
    assert 'clang could not build the programs of plane 1 from %s/failover_tc.c' % src in str(e.value)
    # No object of the plane, no temporary file left; the TCP program, from a source of its own,
    # built beside it.
    assert [n for n in os.listdir(tmp_path / 'cache') if not n.startswith(objects.TCP_PREFIX)] == []


def test_a_compile_error_in_the_tcp_program_names_its_source(tmp_path):
    src, e = broken_build(tmp_path, 'tcp_peers.c', 0)
    assert 'clang could not build the TCP program from %s/tcp_peers.c' % src in str(e.value)
    assert [n for n in os.listdir(tmp_path / 'cache') if n.startswith(objects.TCP_PREFIX) or n.startswith('.')] == []


def test_builds_from_another_checkout_and_cache_are_byte_for_byte_the_same(tmp_path):
    """A rebuild elsewhere (another controller, checkout or cache) must not make every host
    replace programs that did not change: the object's bytes depend on its inputs only."""
    here = run(params(tmp_path / 'one', planes=[0]))[0]['objects'][0]
    src = tmp_path / 'elsewhere' / 'bpf'
    shutil.copytree(BPF_DIR, src)
    there = run(params(tmp_path / 'two', src_dir=str(src), planes=[0]))[0]['objects'][0]
    assert there['digest'] == here['digest']
    with open(here['path'], 'rb') as a, open(there['path'], 'rb') as b:
        assert a.read() == b.read()
