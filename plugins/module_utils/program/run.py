# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ebpf_program module end to end: validate, plan, apply (present or absent)
with rollback of every step done so far, report."""

from __future__ import annotations

import contextlib
import json
import os

from ansible_collections.edgeft.failover.plugins.module_utils import tc
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import bpfsys
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.program import load
from ansible_collections.edgeft.failover.plugins.module_utils.program.changes import make_plan
from ansible_collections.edgeft.failover.plugins.module_utils.program.kernel import Observed, parse_name, pinned_maps, pins_used
from ansible_collections.edgeft.failover.plugins.module_utils.program.record import StateStore
from ansible_collections.edgeft.failover.plugins.module_utils.program.spec import ProgramError
from ansible_collections.edgeft.failover.plugins.module_utils.program.validate import validate


class _Undo:
    """Inverse steps of what was done so far, replayed newest first."""

    def __init__(self):
        self._steps = []

    def push(self, what, func, *args):
        self._steps.append((what, func, args))

    def rollback(self):
        failures = []
        while self._steps:
            what, func, args = self._steps.pop()
            try:
                func(*args)
            except Exception as e:  # keep undoing the rest; report every step that failed
                failures.append('%s: %s' % (what, e))
        return failures


def _unpin_new(pin_root, before):
    for entry in sorted(set(os.listdir(pin_root)) - before):
        os.unlink(os.path.join(pin_root, entry))


def _rmdirs(top, leaf):
    """Remove leaf and its parents up to top while they are empty (undo of makedirs)."""
    cur = leaf
    while True:
        with contextlib.suppress(OSError):
            os.rmdir(cur)
        if cur == top or os.path.dirname(cur) == cur:
            break
        cur = os.path.dirname(cur)


def _failed(step, error, failures, undone):
    if failures:
        return ('%s: %s. Rolling back did not fully succeed, the host may be half-changed: %s'
                % (step, error, '; '.join(failures)))
    return '%s: %s. Rolled back: %s' % (step, error, undone)


def apply_present(req, plan, ipr, store):
    """Compile everything that changes, then swap filters; on any failure undo it all."""
    undo = _Undo()
    loads = plan.points_changing
    with contextlib.ExitStack() as stack:
        try:
            if not os.path.isdir(req.pin_root):
                top = req.pin_root
                while not os.path.isdir(os.path.dirname(top)):
                    top = os.path.dirname(top)
                os.makedirs(req.pin_root)
                undo.push('remove the created %s' % top, _rmdirs, top, req.pin_root)
            before = set(os.listdir(req.pin_root))
            undo.push('unpin the maps this run created', _unpin_new, req.pin_root, before)
            fds = load.load_programs(req, loads, stack)
        except Exception as e:
            failures = undo.rollback()
            msg = str(e) if isinstance(e, ProgramError) else 'compile: %s' % e
            if failures:
                msg += '; cleaning up failed: %s' % '; '.join(failures)
            raise ProgramError(msg + ('' if failures else ' (nothing was changed)')) from None

        step = 'prepare'
        try:
            old_fds = {}
            for p in loads:
                if p.action == 'replace':
                    # Hold the old program: once replaced, the filter's reference is gone.
                    step = '%s: open the attached program' % p.label()
                    if not p.existing.prog_id:
                        raise tc.TcError('the kernel did not report its id, so it could not be put back on failure')
                    old_fds[p.where] = tc.prog_fd_by_id(p.existing.prog_id)
                    stack.callback(os.close, old_fds[p.where])
            step = 'record in %s' % store.path
            data = store.load()
            old = json.loads(json.dumps(data))
            data['clsact'].extend(store.clsact_record(index, iface) for index, iface in plan.clsact_add)
            _record_pins(store, data, req.pin_root, before)
            if data != old:
                store.save(data)
                undo.push('restore %s' % store.path, store.save, old)
            for index, iface in plan.clsact_add:
                step = 'add a clsact qdisc on %s' % iface
                tc.add_clsact(ipr, index)
                undo.push('delete the clsact qdisc on %s' % iface, tc.del_clsact, ipr, index)
            for p in loads:
                step = '%s: %s the filter' % (p.label(), p.action)
                replace = p.action == 'replace'
                tc.set_bpf_filter(ipr, p.ifindex, p.parent, p.priority, p.handle, fds[p.where], p.name, replace=replace)
                if not replace:
                    undo.push('delete the filter of %s' % p.label(), tc.del_filter, ipr, p.ifindex, p.parent, p.priority, p.handle)
                else:
                    undo.push('put back the previous program of %s' % p.label(), tc.set_bpf_filter, ipr, p.ifindex,
                              p.parent, p.priority, p.handle, old_fds[p.where], p.existing.name, True, p.existing.flags)
        except Exception as e:
            failures = undo.rollback()
            raise ProgramError(_failed(step, e, failures, 'the previous programs are attached again and nothing '
                                                          'else changed')) from None


def _record_pins(store, data, pin_root, before):
    """Note the pins this run created, so unpin_maps finds them even after the filters are gone."""
    known = {r['path'] for r in data['pins']}
    for entry in sorted(set(os.listdir(pin_root)) - before):
        path = os.path.join(pin_root, entry)
        if path not in known:
            data['pins'].append(store.pin_record(path))


def apply_absent(req, plan, ipr, store):
    """Delete our filters, our clsact qdiscs, and (unpin_maps) the pins; on failure put everything back."""
    undo = _Undo()
    step = 'prepare'
    with contextlib.ExitStack() as stack:
        try:
            old_fds = {}
            for p in plan.points_changing:
                if p.existing.prog_id:
                    step = '%s: open the attached program id %d' % (p.label(), p.existing.prog_id)
                    old_fds[p.where] = tc.prog_fd_by_id(p.existing.prog_id)
                    stack.callback(os.close, old_fds[p.where])
            pin_fds = {}
            for path in plan.unpin:
                step = 'open pinned %s' % path
                pin_fds[path] = bpfsys.obj_get(path)  # keeps the map, so it can be pinned again
                stack.callback(os.close, pin_fds[path])
            data = store.load()
            old = json.loads(json.dumps(data))
            for p in plan.points_changing:
                step = '%s: delete the filter' % p.label()
                tc.del_filter(ipr, p.ifindex, p.parent, p.priority, p.handle)
                if p.where in old_fds:
                    undo.push('put back the filter of %s' % p.label(), tc.set_bpf_filter, ipr, p.ifindex, p.parent,
                              p.priority, p.handle, old_fds[p.where], p.existing.name, False, p.existing.flags)
            for index, iface in plan.clsact_del:
                step = 'delete the clsact qdisc on %s' % iface
                tc.del_clsact(ipr, index)
                undo.push('add back the clsact qdisc on %s' % iface, tc.add_clsact, ipr, index)
                data['clsact'] = [r for r in data['clsact'] if r != store.clsact_record(index, iface)]
            for path in plan.unpin:
                step = 'unpin %s' % path
                os.unlink(path)
                undo.push('pin %s again' % path, bpfsys.obj_pin, pin_fds[path], path)
            data['pins'] = [r for r in data['pins'] if r['path'] not in plan.unpin]
            if data != old:
                step = 'record in %s' % store.path
                store.save(data)
        except Exception as e:
            failures = undo.rollback()
            raise ProgramError(_failed(step, e, failures, 'every removed filter, qdisc and pin is back')) from None
    if plan.unpin:
        with contextlib.suppress(OSError):
            os.rmdir(req.pin_root)  # only when empty: pins of others stay, and so does the directory


def _program_entry(p, flt):
    """The result entry of a point; flt is the kernel's filter (None: not loaded yet)."""
    name = flt.name if flt is not None else p.name
    return {
        'interface': p.interface,
        'direction': p.direction,
        'parent': tc.parent_name(p.parent),
        'priority': p.priority,
        'handle': p.handle,
        'function': p.function,
        'name': name,
        'digest': parse_name(name)[1],
        'prog_id': flt.prog_id if flt is not None else None,
        'prog_tag': flt.prog_tag if flt is not None else None,
    }


def _diff_view(entry):
    key = '%s %s prio %d handle 0x%x' % (entry['interface'], entry['direction'], entry['priority'], entry['handle'])
    return key, dict((k, entry[k]) for k in ('function', 'name', 'digest', 'prog_id'))


def run(params, check_mode=False):
    """Validate, plan and (unless check_mode) apply; return the module result.

    The result holds 'warnings' (for module.warn) and 'diff' (before/after).
    """
    try:
        return _run(params, check_mode)
    except (tc.TcError, DatapathError, OSError) as e:  # not expected after validation: still say what failed
        raise ProgramError('%s: %s' % (type(e).__name__, e)) from None


def _run(params, check_mode):
    req = validate(params)
    store = StateStore(req.state_dir)
    with tc.open_ipr() as ipr:
        plan = make_plan(req, Observed(ipr), store)
        if plan.changed and not check_mode:
            with store.locked():
                plan = make_plan(req, Observed(ipr), store)  # again under the lock: another run may have acted
                if plan.changed:
                    (apply_present if req.present else apply_absent)(req, plan, ipr, store)
        before = dict(_diff_view(_program_entry(p, p.existing)) for p in req.points if p.existing is not None)
        result = _report(req, plan, ipr, applied=plan.changed and not check_mode)
    if req.present:
        after = dict(_diff_view(e) for e in result['programs'])
    else:
        after = dict((k, v) for k, v in before.items()
                     if k not in {_diff_view(_program_entry(p, p.existing))[0] for p in plan.points_changing})
    result['diff'] = {'before': {'programs': before}, 'after': {'programs': after}}
    result['warnings'] = plan.warnings
    return result


def _report(req, plan, ipr, applied):
    result = {'changed': plan.changed, 'pin_root': req.pin_root, 'attached': [], 'replaced': [], 'removed': [],
              'unpinned': list(plan.unpin), 'clsact_created': [iface for index, iface in plan.clsact_add],
              'clsact_removed': [iface for index, iface in plan.clsact_del], 'programs': [], 'pin_paths': []}
    lists = {'attach': 'attached', 'replace': 'replaced', 'remove': 'removed'}
    for p in req.points:
        if p.action in lists:
            item = p.ident()
            item['name'] = p.existing.name if p.action == 'remove' else p.name
            result[lists[p.action]].append(item)
    if not req.present:
        result['pin_paths'] = sorted(pinned_maps(req.pin_root))
        return result
    obs = Observed(ipr) if applied else None
    for p in req.points:
        if obs is not None:
            flt = next((f for f in obs.filters_on(p.ifindex, p.parent)
                        if f.priority == p.priority and f.handle == p.handle and not f.chain), None)
        else:
            flt = p.existing if p.action == 'keep' else None  # check mode: nothing loaded yet
        result['programs'].append(_program_entry(p, flt))
    result['pin_paths'] = pins_used(req.pin_root, [e['prog_id'] for e in result['programs'] if e['prog_id']])
    return result
