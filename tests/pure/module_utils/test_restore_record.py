"""program/restore_record.py (the datapath module's record): the record written whole and as
to_nice_json would, the objects it no longer names removed after it, bad input refused."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils import restore
from ansible_collections.edgeft.failover.plugins.module_utils.program import restore_record
from ansible_collections.edgeft.failover.plugins.module_utils.program.spec import ProgramError


def record(*objects):
    return {'ebpf_program': {'pin_root': '/sys/fs/bpf/edgeft',
                             'attach': [{'interface': 'fab%d' % i, 'direction': 'egress', 'object': o} for i, o in enumerate(objects)]},
            'peer_table': {'pin_root': '/sys/fs/bpf/edgeft', 'planes': [], 'peers': []}}


@pytest.fixture
def objects_dir(tmp_path):
    folder = tmp_path / 'bpf'
    folder.mkdir()
    for name in ('edgeft-p0-aaaa.bpf.o', 'edgeft-p1-aaaa.bpf.o', 'edgeft-p0-bbbb.bpf.o', 'edgeft-p1-bbbb.bpf.o',
                 'failover_tc.c', 'other.bpf.o'):
        (folder / name).write_bytes(b'x')
    (folder / 'edgeft-p9-dir.bpf.o').mkdir()  # not a file: left alone
    return folder


def params(tmp_path, rec, prune=None):
    return {'path': str(tmp_path / 'state' / 'datapath.json'), 'record': rec, 'prune_objects': prune}


def run(p, check_mode=False):
    """validate() then write(), as the datapath module runs them (the record file's option is
    named path here)."""
    return restore_record.write(*restore_record.validate(p['path'], p['record'], p['prune_objects'], path_option='path'),
                                check_mode=check_mode)


def test_the_record_is_written_then_the_unnamed_objects_go(tmp_path, objects_dir):
    keep = [str(objects_dir / 'edgeft-p0-bbbb.bpf.o'), str(objects_dir / 'edgeft-p1-bbbb.bpf.o')]
    result, warnings = run(params(tmp_path, record(*keep), str(objects_dir)))
    assert result['changed'] and not warnings
    assert result['removed'] == [str(objects_dir / 'edgeft-p0-aaaa.bpf.o'), str(objects_dir / 'edgeft-p1-aaaa.bpf.o')]
    assert sorted(os.listdir(objects_dir)) == ['edgeft-p0-bbbb.bpf.o', 'edgeft-p1-bbbb.bpf.o', 'edgeft-p9-dir.bpf.o',
                                               'failover_tc.c', 'other.bpf.o']
    written = (tmp_path / 'state' / 'datapath.json').read_text()
    assert json.loads(written) == record(*keep)
    assert written == json.dumps(record(*keep), indent=2, sort_keys=True, separators=(',', ': ')) + '\n'
    assert oct((tmp_path / 'state' / 'datapath.json').stat().st_mode & 0o777) == '0o644'
    # What the restore at boot reads is what was written.
    assert restore.load(str(tmp_path / 'state' / 'datapath.json')) == record(*keep)

    again, _warnings = run(params(tmp_path, record(*keep), str(objects_dir)))
    assert not again['changed'] and again['removed'] == []


def test_check_mode_says_what_would_change_and_changes_nothing(tmp_path, objects_dir):
    keep = [str(objects_dir / 'edgeft-p0-bbbb.bpf.o')]
    result, _warnings = run(params(tmp_path, record(*keep), str(objects_dir)), check_mode=True)
    assert result['changed'] and len(result['removed']) == 3
    assert result['diff']['before'] == '' and json.loads(result['diff']['after']) == record(*keep)
    assert not (tmp_path / 'state').exists() and len(os.listdir(objects_dir)) == 7


def test_without_prune_objects_no_file_goes(tmp_path, objects_dir):
    result, _warnings = run(params(tmp_path, record()))
    assert result['changed'] and result['removed'] == [] and len(os.listdir(objects_dir)) == 7


@pytest.mark.parametrize('path, rec, prune, message', [
    ('datapath.json', record(), None, 'path: '),
    ('/abs/datapath.json', {'ebpf_program': {}}, None, 'the arguments of peer_table are missing'),
    ('/abs/datapath.json', dict(record(), agent={}), None, 'record: agent is not a step of the restore'),
    ('/abs/datapath.json', record(), 'bpf', 'prune_objects: '),
])
def test_bad_input_is_refused_naming_the_option(path, rec, prune, message):
    with pytest.raises(ProgramError, match=message):
        run({'path': path, 'record': rec, 'prune_objects': prune})


def test_a_directory_as_the_record_is_refused(tmp_path):
    with pytest.raises(ProgramError, match='is a directory'):
        run({'path': str(tmp_path), 'record': record(), 'prune_objects': None})
