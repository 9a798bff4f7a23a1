# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the host has for the ebpf_program module: edgeft's filters (recognised by
their name), the clsact qdiscs and filters on the attach points (Observed),
the maps pinned under pin_root and the maps a program uses."""

from __future__ import annotations

import os

from ansible_collections.edgeft.failover.plugins.module_utils import tc
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import bpfsys
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.program.spec import NAME_PREFIX, ProgramError


def is_ours(flt):
    return flt.kind == 'bpf' and bool(flt.name) and flt.name.startswith(NAME_PREFIX)


def parse_name(name):
    """(function, digest) from an edgeft filter name, or (None, None)."""
    parts = (name or '').split(':')
    if len(parts) == 3 and parts[0] + ':' == NAME_PREFIX:
        return parts[1], parts[2]
    return None, None


class Observed:
    """What the kernel has on the interfaces of a request."""

    def __init__(self, ipr):
        self.ipr = ipr
        self.qdisc = {}
        self.filters = {}

    def qdisc_kind(self, index):
        if index not in self.qdisc:
            self.qdisc[index] = tc.qdisc_at_clsact(self.ipr, index)
        return self.qdisc[index]

    def filters_on(self, index, parent):
        if (index, parent) not in self.filters:
            kind = self.qdisc_kind(index)
            self.filters[(index, parent)] = tc.list_filters(self.ipr, index, parent) if kind == 'clsact' else []
        return self.filters[(index, parent)]


def describe(flt):
    return 'kind %s, handle 0x%x, protocol 0x%04x%s' % (
        flt.kind, flt.handle, flt.protocol, ', name %r' % flt.name if flt.name else '')


def observe(req, obs):
    """Fill each point's existing/foreign filter; refuse what edgeft must not touch."""
    for p in req.points:
        p.existing = p.foreign = None
        if p.ifindex is None:
            continue
        kind = obs.qdisc_kind(p.ifindex)
        if kind not in (None, 'clsact'):
            if req.present:
                raise ProgramError(
                    '%s.interface: %s has a %r qdisc where clsact belongs (ffff:fff1); edgeft attaches to clsact and '
                    'never replaces a qdisc it did not create: remove it (tc qdisc del dev %s %s, which drops its '
                    'filters) or attach elsewhere' % (p.where, p.interface, kind, p.interface, kind))
            continue
        for flt in obs.filters_on(p.ifindex, p.parent):
            if flt.priority != p.priority or flt.chain:
                continue
            if flt.handle == p.handle and is_ours(flt) and flt.protocol == tc.ETH_P_ALL:
                p.existing = flt
            elif p.foreign is None:
                p.foreign = flt
        if p.foreign is not None and req.present and is_ours(p.foreign):
            raise ProgramError(
                '%s.handle: %s %s priority %d already holds another edgeft filter (%s); remove it first (state=absent '
                'with that handle) or choose another %s.priority'
                % (p.where, p.interface, p.direction, p.priority, describe(p.foreign), p.where))
        if p.foreign is not None and req.present:
            raise ProgramError(
                '%s.priority: %s %s priority %d already holds a filter edgeft did not create (%s); edgeft never '
                'replaces or deletes foreign filters: choose another %s.priority, or remove that filter'
                % (p.where, p.interface, p.direction, p.priority, describe(p.foreign), p.where))


def prog_map_ids(prog_id):
    if not prog_id:
        return set()
    try:
        fd = tc.prog_fd_by_id(prog_id)
    except DatapathError:
        return set()
    try:
        return set(bpfsys.prog_map_ids(fd))
    finally:
        os.close(fd)


def _fd_map_id(fd):
    """Map id behind fd, or None if fd is not a map (a pinned program, say)."""
    try:
        with open('/proc/self/fdinfo/%d' % fd) as f:
            for line in f:
                if line.startswith('map_id:'):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def pinned_maps(pin_root):
    """{path: map id} of the maps pinned directly under pin_root."""
    out = {}
    if not os.path.isdir(pin_root):
        return out
    for entry in sorted(os.listdir(pin_root)):
        path = os.path.join(pin_root, entry)
        if not os.path.isfile(path):
            continue
        try:
            fd = bpfsys.obj_get(path)
        except DatapathError:
            continue
        try:
            map_id = _fd_map_id(fd)
        finally:
            os.close(fd)
        if map_id is not None:
            out[path] = map_id
    return out


def pins_used(pin_root, prog_ids):
    """Sorted pins under pin_root whose maps the given programs use."""
    used = set()
    for prog_id in prog_ids:
        used |= prog_map_ids(prog_id)
    return sorted(path for path, map_id in pinned_maps(pin_root).items() if map_id in used)
