# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The record the restore at boot reads (restore.py), written by the datapath module: written
whole, and the objects it no longer names removed in the same run.

The record holds the arguments the last deployment gave each step (STEPS), in JSON with
sorted keys. Its objects (ebpf_program's `object` and `attach[].object`) are what the restore
at boot loads, so an object leaves the host only once a record that does not name it is
on disk: first the new record, then the pruning.
"""

from __future__ import annotations

import json
import os

from ansible_collections.edgeft.failover.plugins.module_utils import atomicfile
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import objects
from ansible_collections.edgeft.failover.plugins.module_utils.program.errors import ProgramError

# The modules whose arguments the record holds, in the order the restore runs them.
STEPS = ('ebpf_program', 'peer_table')


def render(record: dict) -> str:
    """The record's text: Ansible's to_nice_json(indent=2, sort_keys=true), one final newline."""
    return json.dumps(record, indent=2, sort_keys=True, separators=(',', ': ')) + '\n'


def named_objects(record: dict) -> set:
    """The object paths the record's ebpf_program arguments load."""
    program = record['ebpf_program']
    named = {program.get('object')} | {a.get('object') for a in program.get('attach') or [] if isinstance(a, dict)}
    return {os.path.normpath(p) for p in named if isinstance(p, str) and p}


def validate(path, record, prune, path_option='record'):
    """(path, record, prune), or ProgramError naming the option: the record file's is
    `path_option` (the datapath module's record), the objects' directory's prune_objects."""
    if not path or not os.path.isabs(path):
        raise ProgramError('%s: %r must be an absolute path (the role uses <state_dir>/datapath.json)' % (path_option, path))
    if os.path.isdir(path):
        raise ProgramError('%s: %s is a directory; name the record file in it' % (path_option, path))
    if not isinstance(record, dict):
        raise ProgramError('record: a dict with the arguments of %s is required' % ' and '.join(STEPS))
    missing = [s for s in STEPS if not isinstance(record.get(s), dict)]
    if missing:
        raise ProgramError('record: the arguments of %s are missing (a dict each); the restore at boot runs %s'
                           % (', '.join(missing), ' then '.join(STEPS)))
    unknown = sorted(set(record) - set(STEPS))
    if unknown:
        raise ProgramError('record: %s is not a step of the restore (%s)' % (', '.join(unknown), ', '.join(STEPS)))
    if prune is not None and not os.path.isabs(prune):
        raise ProgramError('prune_objects: %r must be an absolute path (the directory of the objects)' % (prune,))
    return path, record, prune


def stale_objects(directory: str, keep: set) -> list:
    """The data path objects in directory that `keep` does not name, sorted."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    stale = []
    for name in sorted(names):
        full = os.path.normpath(os.path.join(directory, name))  # as named_objects() spells them
        if name.startswith(objects.PREFIX) and name.endswith(objects.SUFFIX) and full not in keep and os.path.isfile(full):
            stale.append(full)
    return stale


def write(path, record, prune, check_mode=False):
    """On what validate() returned: the record at path, then the objects in prune that it does
    not name removed. ({'changed', 'path', 'removed', 'diff'}, warnings); check mode changes
    nothing and says what would change."""
    after = render(record)
    try:
        with open(path) as f:
            before = f.read()
    except FileNotFoundError:
        before = ''
    except OSError as e:
        raise ProgramError('cannot read %s: %s' % (path, e.strerror or e)) from None
    removed = stale_objects(prune, named_objects(record)) if prune else []
    if not check_mode:
        if before != after:
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            atomicfile.replace(path, after.encode(), mode=0o644, root_owned=os.geteuid() == 0)
        for stale in removed:
            try:
                os.unlink(stale)
            except FileNotFoundError:
                pass
    return {'changed': before != after or bool(removed), 'path': path, 'removed': removed,
            'diff': {'before': before, 'after': after}}, []
