# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an ebpf_program run changes: the action of every attach point, the clsact
qdiscs to add or delete, the pins to unpin, from what the kernel and the record
hold."""

from __future__ import annotations

import os

from ansible_collections.edgeft.failover.plugins.module_utils import tc
from ansible_collections.edgeft.failover.plugins.module_utils.program.kernel import describe, is_ours, observe, pinned_maps, pins_used, prog_map_ids


class Plan:
    def __init__(self, req):
        self.req = req
        self.clsact_add = []  # (ifindex, interface) edgeft creates
        self.clsact_del = []  # (ifindex, interface) edgeft created and now deletes
        self.unpin = []
        self.warnings = []

    @property
    def points_changing(self):
        wanted = ('attach', 'replace') if self.req.present else ('remove',)
        return [p for p in self.req.points if p.action in wanted]

    @property
    def changed(self):
        return bool(self.points_changing or self.clsact_add or self.clsact_del or self.unpin)


def _maps_current(req, p):
    """For the edgeft layout: does the attached program use the maps pinned now?

    If the pins were removed or recreated, the old program writes to maps no
    other process can reach, so it must be reloaded even with the same digest.
    """
    if not req.edgeft_layout or not p.existing.prog_id:
        return True
    used = prog_map_ids(p.existing.prog_id)
    return bool(used) and used <= set(pinned_maps(req.pin_root).values())


def make_plan(req, obs, store):
    observe(req, obs)
    plan = Plan(req)
    data = store.load()
    if req.present:
        for p in req.points:
            if p.existing is None:
                p.action = 'attach'
                if obs.qdisc_kind(p.ifindex) is None and (p.ifindex, p.interface) not in plan.clsact_add:
                    plan.clsact_add.append((p.ifindex, p.interface))
            elif (p.existing.name == p.name and p.existing.flags & tc.TCA_BPF_FLAG_ACT_DIRECT
                  and _maps_current(req, p)):
                p.action = 'keep'
            else:
                p.action = 'replace'
        return plan

    removing = set()
    for p in req.points:
        if p.existing is not None:
            p.action = 'remove'
            removing.add((p.ifindex, p.parent, p.priority, p.handle))
        else:
            p.action = 'none'
            if p.foreign is not None and p.foreign.handle == p.handle:
                plan.warnings.append('%s: the filter at %s %s priority %d handle 0x%x was not created by edgeft '
                                     '(%s); left in place' % (p.where, p.interface, p.direction, p.priority,
                                                              p.handle, describe(p.foreign)))
    for p in req.points:
        if p.ifindex is None or obs.qdisc_kind(p.ifindex) != 'clsact' or (p.ifindex, p.interface) in plan.clsact_del:
            continue
        if not store.owns_clsact(data, p.ifindex, p.interface):
            continue
        left = [f for parent in tc.PARENTS.values() for f in obs.filters_on(p.ifindex, parent)
                if (f.index, f.parent, f.priority, f.handle) not in removing]
        if not left:
            plan.clsact_del.append((p.ifindex, p.interface))
    if req.unpin_maps:
        plan.unpin = _pins_to_unpin(req, plan, data, obs)
    return plan


def _pins_to_unpin(req, plan, data, obs):
    removed_ids = [p.existing.prog_id for p in req.points if p.action == 'remove']
    candidates = set(pins_used(req.pin_root, removed_ids))
    root = req.pin_root + os.sep
    candidates |= {r['path'] for r in data['pins'] if r['path'].startswith(root) and os.path.exists(r['path'])}
    if not candidates:
        return []
    # Keep maps that edgeft programs staying attached in this namespace still use.
    removing = {(p.ifindex, p.parent, p.priority, p.handle) for p in req.points if p.action == 'remove'}
    still = set()
    for link in obs.ipr.get_links():
        index = link['index']
        for parent in tc.PARENTS.values():
            for flt in obs.filters_on(index, parent):
                if is_ours(flt) and (index, parent, flt.priority, flt.handle) not in removing:
                    still |= prog_map_ids(flt.prog_id)
    pins = pinned_maps(req.pin_root)
    keep = sorted(path for path in candidates if pins.get(path) in still)
    if keep:
        plan.warnings.append('unpin_maps: kept %s, still used by other edgeft filters on this host' % ', '.join(keep))
    return sorted(path for path in candidates if path not in keep)
