# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load the programs of the attach points that change: a prebuilt object with
libbpf, or the source compiled with bcc. One replaceable step: the points (and
through them their units) in, {point where: program fd} out, the loaded
objects kept alive on the caller's ExitStack until the filters are swapped."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import build, layout, libbpf, objects
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.handle import check_map, pin_dir_lock
from ansible_collections.edgeft.failover.plugins.module_utils.program.spec import ProgramError

_OUTPUT_TAIL = 6000


@contextlib.contextmanager
def _captured_output():
    """bcc, clang and the verifier write to fds 1 and 2; keep it off the module's JSON channel."""
    buf = {'text': ''}
    sys.stdout.flush()
    sys.stderr.flush()
    with tempfile.TemporaryFile() as tmp:
        saved = [os.dup(1), os.dup(2)]
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            yield buf
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            tmp.seek(0)
            buf['text'] = tmp.read().decode('utf-8', 'replace')[-_OUTPUT_TAIL:]


def load_programs(req, points, stack):
    """Load the units of points and their functions: {point where: prog fd}.

    Every loaded object is registered on stack, so the fds live until the swaps are done.
    """
    units = []
    for p in points:
        if p.unit not in units:
            units.append(p.unit)
    if any(u.object_path for u in units):
        return _load_objects(req, units, points, stack)
    bcc = build.import_bcc()
    fds = {}
    for unit in units:
        with pin_dir_lock(req.pin_root), _captured_output() as out:
            try:
                bpf, error = bcc.BPF(text=unit.text, cflags=unit.cflags), None
            except Exception as e:  # bcc raises bare Exception for compile errors
                bpf, error = None, e
        if error is not None:
            raise ProgramError('src: bcc could not compile %s with %s: %s\n%s'
                               % (req.src, ' '.join(unit.cflags[1 + len(req.include_dirs):]), error, out['text']))
        stack.callback(bpf.cleanup)
        if unit.map_sizes is not None:
            for spec in layout.MAPS:
                try:
                    check_map(bpf[spec.name.encode()].map_fd, spec, unit.map_sizes[spec.name])
                except (DatapathError, KeyError) as e:
                    raise ProgramError('pin_root: %s' % e) from None
        for p in points:
            if p.unit is not unit:
                continue
            with _captured_output() as out:
                try:
                    fds[p.where], error = bpf.load_func(p.function.encode(), bcc.BPF.SCHED_CLS).fd, None
                except Exception as e:  # unknown function, verifier rejection
                    error = e
            if error is not None:
                raise ProgramError('%s.function: loading %s from %s failed: %s\n%s'
                                   % (p.where, p.function, req.src, error, out['text']))
    return fds


def _load_objects(req, units, points, stack):
    """libbpf: reuse or create the maps pinned under pin_root, load, hand out the functions' fds."""
    fds = {}
    for unit in units:
        where = unit.points[0].where + ('.object' if unit.points[0].object else '')
        try:
            obj = libbpf.BpfObject(unit.object_path)
        except DatapathError as e:
            raise ProgramError('%s: %s' % (where, e)) from None
        stack.callback(obj.close)
        try:
            if unit.map_sizes is not None:
                objects.check_layout(obj)
                names = [spec.name for spec in layout.MAPS]
            else:
                names = [m.name for m in obj.maps() if '.' not in m.name]  # not .rodata/.bss: private
            obj.pin_maps(req.pin_root, names)
        except DatapathError as e:
            raise ProgramError('%s: %s' % (where, e)) from None
        with pin_dir_lock(req.pin_root), _captured_output() as out:
            try:
                obj.load()
                error = None
            except DatapathError as e:
                error = e
        if error is not None:
            raise ProgramError('%s: %s (the verifier\'s or libbpf\'s words follow)\n%s' % (where, error, out['text']))
        if unit.map_sizes is not None:
            for spec in layout.MAPS:
                try:
                    check_map(obj.map_fd(spec.name), spec, unit.map_sizes[spec.name])
                except DatapathError as e:
                    raise ProgramError('pin_root: %s' % e) from None
        for p in points:
            if p.unit is unit:
                try:
                    fds[p.where] = obj.prog_fd(p.function)
                except DatapathError as e:
                    raise ProgramError('%s.function: %s' % (p.where, e)) from None
    return fds
