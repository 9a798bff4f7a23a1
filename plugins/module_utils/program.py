# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Logic of the ebpf_program module: validate, plan, apply, roll back.

Compiles tc programs with bcc and attaches them as direct-action bpf filters
on clsact qdiscs (tc.py). Kept free of Ansible imports so tests drive it
directly; the module file only parses options and reports.

Ownership and idempotence live in the kernel: every filter edgeft attaches
is named ``edgeft:<function>:<digest>`` (TCA_BPF_NAME), where the digest
covers everything that goes into the compiler. A run reads the names back,
compiles only what differs and replaces those filters in place. The only
thing the kernel cannot tell is who created a clsact qdisc: that is recorded
in a small JSON file under state_dir.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import sys
import tempfile

from ansible_collections.edgeft.failover.plugins.module_utils import atomicfile, constants, jsonrecord, netlink, tc
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import bpfsys, build, layout, layout_check
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import check_map
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError

NAME_PREFIX = 'edgeft:'
DIRECTIONS = ('ingress', 'egress')
# Priority 0x0ed0: low enough that edgeft decides before most classifiers
# (tc's automatic priorities start at 49152 and count down) and unusual
# enough not to collide. Its programs return TC_ACT_UNSPEC for what they do
# not steer, so filters behind it still run.
DEFAULT_PRIORITY = 0x0ED0
DEFAULT_HANDLE = constants.TC_HANDLE
DEFAULT_STATE_DIR = constants.STATE_DIR
STATE_FILE = 'ebpf_program.json'
LOCK_FILE = 'ebpf_program.lock'
MAPS_HEADER = 'edgeft_maps.h'
RESERVED_DEFINES = ('EDGEFT_PIN_DIR',)
DIGEST_LEN = 16
_DIGEST_SCHEME = b'edgeft-ebpf-program/1'
_IDENT = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\r\n]+)[>"]', re.M)
_OUTPUT_TAIL = 6000


# The module's argument spec, here so that restore.py fills the same defaults.
ARGUMENT_SPEC = dict(
    src=dict(type='path'),
    include_dirs=dict(type='list', elements='path', default=[]),
    defines=dict(type='dict', default={}),
    pin_root=dict(type='path', required=True),
    attach=dict(type='list', elements='dict', required=True, options=dict(
        interface=dict(type='str', required=True),
        direction=dict(type='str', required=True, choices=['ingress', 'egress']),
        function=dict(type='str'),
        plane=dict(type='int'),
        defines=dict(type='dict'),
        priority=dict(type='int', default=DEFAULT_PRIORITY),
        handle=dict(type='int', default=DEFAULT_HANDLE),
    )),
    state=dict(type='str', choices=['present', 'absent'], default='present'),
    unpin_maps=dict(type='bool', default=False),
    state_dir=dict(type='path', default=DEFAULT_STATE_DIR),
)


class ProgramError(EdgeftError):
    """Bad input or a failed change; the text names the option or what was rolled back."""


# ---------------------------------------------------------------- validation


class Point:
    """One attach point: where it goes, what is loaded there, and what the kernel has."""

    def __init__(self, where, interface, direction, priority, handle, function, defines):
        self.where = where
        self.interface = interface
        self.direction = direction
        self.parent = tc.PARENTS[direction]
        self.priority = priority
        self.handle = handle
        self.function = function
        self.defines = defines  # merged: top level, then this point's, then plane
        self.plane_where = where + '.plane'  # the option EDGEFT_PLANE came from
        self.ifindex = None
        self.unit = None
        self.digest = None
        self.name = None
        self.existing = None  # our filter in the slot (tc.Filter)
        self.foreign = None  # a filter edgeft did not create, in the slot
        self.action = None  # keep | attach | replace (present); remove | none (absent)

    def label(self):
        return '%s (%s %s)' % (self.where, self.interface, self.direction)

    def ident(self):
        return {'interface': self.interface, 'direction': self.direction,
                'priority': self.priority, 'handle': self.handle}


class Unit:
    """One bcc compile: the source with one set of defines (shared by points)."""

    def __init__(self, key, text, cflags, digest_base, tunables):
        self.key = key
        self.text = text
        self.cflags = cflags
        self.digest_base = digest_base
        self.tunables = tunables
        self.points = []


class Request:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _define_flag(name, value, where):
    if not isinstance(name, str) or not _IDENT.match(name):
        raise ProgramError('%s: %r is not a C macro name' % (where, name))
    if name in RESERVED_DEFINES:
        raise ProgramError('%s: %s is set by the module from pin_root; do not set it' % (where, name))
    if value is None:
        return '-D%s' % name
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, (dict, list)):
        raise ProgramError('%s.%s: a define value must be a string or a number, not %s' % (where, name, type(value).__name__))
    text = str(value)
    if '\n' in text or '\0' in text:
        raise ProgramError('%s.%s: a define value must be one line' % (where, name))
    return '-D%s=%s' % (name, text)


def _check_defines(defines, where):
    if defines is None:
        return {}
    if not isinstance(defines, dict):
        raise ProgramError('%s: must be a dictionary of macro names to values' % where)
    for name, value in defines.items():
        _define_flag(name, value, where)
    return dict(defines)


def _int_in(value, lo, hi, where):
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ProgramError('%s: %r is not an integer in %d..%d (0x%x..0x%x)' % (where, value, lo, hi, lo, hi))
    return value


def _resolve_includes(src, include_dirs):
    """(name, bytes) of every header the source includes that lives with it.

    Looks where clang will (the including file's directory, then -I dirs) and
    follows includes recursively. Headers not found there are the kernel's and
    bcc's; they are identified by the bcc version instead.
    """
    found, seen = [], set()
    search = [os.path.dirname(src)] + list(include_dirs)

    def scan(path, data):
        for kind, name in _INCLUDE.findall(data):
            name = name.decode('utf-8', 'replace').strip()
            dirs = ([os.path.dirname(path)] if kind == b'"' else []) + search
            for d in dirs:
                cand = os.path.normpath(os.path.join(d, name))
                if os.path.isfile(cand):
                    if cand not in seen:
                        seen.add(cand)
                        with open(cand, 'rb') as f:
                            content = f.read()
                        found.append((name, content))
                        scan(cand, content)
                    break

    with open(src, 'rb') as f:
        scan(src, f.read())
    return found


def _bpffs_ancestor(path):
    """Nearest existing directory at or above path."""
    cur = path
    while not os.path.exists(cur):
        parent = os.path.dirname(cur)
        if parent == cur:
            break
        cur = parent
    return cur


def validate(params):
    """Check every option and the host; return a Request. Changes nothing."""
    if os.geteuid() != 0:
        raise ProgramError('this module must run as root (tc and bpf(2) need CAP_NET_ADMIN and CAP_BPF): use become: true')
    netlink.require(ProgramError)
    state = params.get('state') or 'present'
    if state not in ('present', 'absent'):
        raise ProgramError('state: must be present or absent, not %r' % state)
    present = state == 'present'

    pin_root = params.get('pin_root')
    if not pin_root:
        raise ProgramError('pin_root: required (a directory on a bpf filesystem, e.g. /sys/fs/bpf/edgeft)')
    if not os.path.isabs(pin_root) or any(c in pin_root for c in '"\\\n'):
        raise ProgramError('pin_root: %r must be an absolute path without quotes, backslashes or newlines' % pin_root)
    pin_root = os.path.normpath(pin_root)
    if os.path.exists(pin_root) and not os.path.isdir(pin_root):
        raise ProgramError('pin_root: %s exists and is not a directory' % pin_root)
    anchor = _bpffs_ancestor(pin_root)
    if (present or os.path.exists(pin_root)) and not bpfsys.is_bpffs(anchor):
        raise ProgramError(
            'pin_root: %s is not on a bpf filesystem (%s is not a bpffs): mount one first, e.g. '
            '"mount -t bpf bpf /sys/fs/bpf" on a host, or a bpffs outside /sys for hosts run under '
            '"ip netns exec" (it remounts /sys), and point pin_root into it' % (pin_root, anchor))

    state_dir = params.get('state_dir') or DEFAULT_STATE_DIR
    if not os.path.isabs(state_dir):
        raise ProgramError('state_dir: %r must be an absolute path' % state_dir)
    if os.path.exists(state_dir) and not os.path.isdir(state_dir):
        raise ProgramError('state_dir: %s exists and is not a directory' % state_dir)

    top_defines = _check_defines(params.get('defines'), 'defines')
    attach = params.get('attach')
    if not attach:
        raise ProgramError('attach: at least one attach point is required')

    points, slots = [], {}
    for i, entry in enumerate(attach):
        where = 'attach[%d]' % i
        if not isinstance(entry, dict):
            raise ProgramError('%s: must be a dictionary' % where)
        iface = entry.get('interface')
        if not iface or not isinstance(iface, str):
            raise ProgramError('%s.interface: an interface name is required' % where)
        if len(iface) > 15 or '/' in iface or any(c.isspace() for c in iface):
            raise ProgramError('%s.interface: %r is not a valid interface name (at most 15 characters, no "/" or spaces)' % (where, iface))
        direction = entry.get('direction')
        if direction not in DIRECTIONS:
            raise ProgramError('%s.direction: must be one of %s, not %r' % (where, ', '.join(DIRECTIONS), direction))
        priority = _int_in(DEFAULT_PRIORITY if entry.get('priority') is None else entry['priority'], 1, 0xFFFF, where + '.priority')
        handle = _int_in(DEFAULT_HANDLE if entry.get('handle') is None else entry['handle'], 1, 0xFFFFFFFF, where + '.handle')
        function = entry.get('function') or 'edgeft_%s' % direction
        if not isinstance(function, str) or not _IDENT.match(function):
            raise ProgramError('%s.function: %r is not a C function name' % (where, function))
        defines = dict(top_defines)
        defines.update(_check_defines(entry.get('defines'), where + '.defines'))
        plane = entry.get('plane')
        plane_where = where + ('.plane' if plane is not None else '.defines')
        if plane is not None:
            _int_in(plane, 0, layout.PLANE_SLOTS - 1, where + '.plane')
            if 'EDGEFT_PLANE' in defines and str(defines['EDGEFT_PLANE']) != str(plane):
                raise ProgramError('%s.plane: %d conflicts with EDGEFT_PLANE=%s from the defines; set one of them'
                                   % (where, plane, defines['EDGEFT_PLANE']))
            defines['EDGEFT_PLANE'] = plane
        key = (iface, direction, priority)
        if key in slots:
            raise ProgramError('%s: %s %s priority %d is already declared by %s' % (where, iface, direction, priority, slots[key]))
        slots[key] = where
        points.append(Point(where, iface, direction, priority, handle, function, defines))
        points[-1].plane_where = plane_where

    req = Request(state=state, present=present, pin_root=pin_root, state_dir=state_dir, points=points,
                  unpin_maps=bool(params.get('unpin_maps')), src=None, include_dirs=[], units=[],
                  edgeft_layout=False, bcc_version=None)

    with tc.open_ipr() as ipr:
        for p in points:
            found = ipr.link_lookup(ifname=p.interface)
            if found:
                p.ifindex = found[0]
            elif present:
                raise ProgramError('%s.interface: interface %r does not exist on this host' % (p.where, p.interface))

    if present:
        _validate_build(req, params)
    return req


def _validate_build(req, params):
    src = params.get('src')
    if not src:
        raise ProgramError('src: required with state=present (path on the target of the C source, '
                           'e.g. /usr/local/lib/edgeft/bpf/failover_tc.c)')
    if not os.path.isabs(src):
        raise ProgramError('src: %r must be an absolute path on the target' % src)
    try:
        with open(src, 'rb') as f:
            f.read(1)
    except OSError as e:
        raise ProgramError('src: cannot read %s: %s' % (src, e.strerror or e)) from None
    if not os.path.isfile(src):
        raise ProgramError('src: %s is not a regular file' % src)
    include_dirs = []
    for i, d in enumerate(params.get('include_dirs') or []):
        if not isinstance(d, str) or not os.path.isabs(d) or not os.path.isdir(d):
            raise ProgramError('include_dirs[%d]: %r is not an existing directory (absolute path)' % (i, d))
        include_dirs.append(os.path.normpath(d))
    req.src, req.include_dirs = os.path.normpath(src), include_dirs

    try:
        bcc = build.import_bcc()
        build.check_headers()
    except DatapathError as e:
        raise ProgramError(str(e)) from None
    req.bcc_version = str(getattr(bcc, '__version__', 'unknown'))

    includes = _resolve_includes(req.src, include_dirs)
    req.edgeft_layout = any(os.path.basename(inc[0]) == MAPS_HEADER for inc in includes)
    with open(req.src, 'rb') as f:
        source = f.read()
    if req.edgeft_layout:
        try:  # name the top-level option when the value is wrong there
            layout.tunables(dict((k, v) for k, v in (params.get('defines') or {}).items() if k in layout.TUNABLES))
        except (TypeError, ValueError) as e:
            raise ProgramError('defines: %s' % e) from None

    units = {}
    for p in req.points:
        key = tuple(sorted((k, _define_flag(k, v, '')) for k, v in p.defines.items()))
        unit = units.get(key)
        if unit is None:
            unit = units[key] = _make_unit(req, key, p, source, includes)
        unit.points.append(p)
        p.unit = unit
        p.digest = _digest(unit, p.function)
        p.name = '%s%s:%s' % (NAME_PREFIX, p.function, p.digest)
    req.units = list(units.values())

    if req.edgeft_layout:
        _validate_layout(req)


def _make_unit(req, key, point, source, includes):
    tun = None
    text = source
    if req.edgeft_layout:
        # The data path's layout mirror is asserted in every compile, as datapath.build does.
        try:
            tun = layout.tunables(dict((k, v) for k, v in point.defines.items() if k in layout.TUNABLES))
        except (TypeError, ValueError) as e:
            raise ProgramError('%s.defines: %s' % (point.where, e)) from None
        plane = point.defines.get('EDGEFT_PLANE')
        try:
            plane_ok = plane is None or 0 <= int(plane) < tun['EDGEFT_MAX_PLANES']
        except (TypeError, ValueError):
            plane_ok = False
        if not plane_ok:
            raise ProgramError('%s: plane %s is not below EDGEFT_MAX_PLANES (%d)' % (point.plane_where, plane, tun['EDGEFT_MAX_PLANES']))
        text = source + b'\n' + layout_check.c_asserts(tun).encode()
    defs = [item[1] for item in key] + ['-DEDGEFT_PIN_DIR="%s"' % req.pin_root]
    cflags = ['-I%s' % os.path.dirname(req.src)] + ['-I%s' % d for d in req.include_dirs] + defs
    h = hashlib.sha256()
    for part in [_DIGEST_SCHEME, req.bcc_version.encode(), text] + [d.encode() for d in defs]:
        h.update(b'%d:' % len(part) + part)
    for name, content in includes:
        h.update(b'%d:%s%d:' % (len(name), name.encode(), len(content)) + content)
    return Unit(key, text, cflags, h.digest(), tun)


def _digest(unit, function):
    return hashlib.sha256(unit.digest_base + function.encode()).hexdigest()[:DIGEST_LEN]


def _validate_layout(req):
    """Every program shares one set of pins: sizes must agree with each other and with existing pins."""
    first = req.units[0]
    for unit in req.units[1:]:
        for spec in layout.MAPS:
            if spec.max_entries(unit.tunables) != spec.max_entries(first.tunables):
                raise ProgramError('%s.defines: map %s would get %d entries, %s sets %d; all programs share the '
                                   'maps pinned under pin_root, so their EDGEFT_MAX_* defines must agree'
                                   % (unit.points[0].where, spec.name, spec.max_entries(unit.tunables),
                                      first.points[0].where, spec.max_entries(first.tunables)))
    for spec in layout.MAPS:
        path = os.path.join(req.pin_root, spec.name)
        if not os.path.exists(path):
            continue
        try:
            fd = bpfsys.obj_get(path)
            try:
                check_map(fd, spec, spec.max_entries(first.tunables), ' (pinned at %s)' % path)
            finally:
                os.close(fd)
        except DatapathError as e:
            raise ProgramError('pin_root: %s' % e) from None


# ---------------------------------------------------------------- kernel state


def _here():
    """(network namespace inode, boot id): where a clsact record is valid."""
    ino = netlink.netns_inode()[1]
    try:
        with open('/proc/sys/kernel/random/boot_id') as f:
            boot = f.read().strip()
    except OSError:
        boot = ''
    return ino, boot


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


def _describe(flt):
    return 'kind %s, handle 0x%x, protocol 0x%04x%s' % (
        flt.kind, flt.handle, flt.protocol, ', name %r' % flt.name if flt.name else '')


def _observe(req, obs):
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
                % (p.where, p.interface, p.direction, p.priority, _describe(p.foreign), p.where))
        if p.foreign is not None and req.present:
            raise ProgramError(
                '%s.priority: %s %s priority %d already holds a filter edgeft did not create (%s); edgeft never '
                'replaces or deletes foreign filters: choose another %s.priority, or remove that filter'
                % (p.where, p.interface, p.direction, p.priority, _describe(p.foreign), p.where))


def _prog_map_ids(prog_id):
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


def _pins_used(pin_root, prog_ids):
    """Sorted pins under pin_root whose maps the given programs use."""
    used = set()
    for prog_id in prog_ids:
        used |= _prog_map_ids(prog_id)
    return sorted(path for path, map_id in pinned_maps(pin_root).items() if map_id in used)


# ---------------------------------------------------------------- state file


class StateStore:
    """What edgeft created that the kernel cannot attribute: clsact qdiscs, pins.

    Records carry the network namespace and boot they belong to, so a state_dir
    shared by several namespaces, or surviving a reboot, never makes a clsact
    someone else created look like ours.
    """

    def __init__(self, state_dir):
        self.state_dir = state_dir
        self.path = os.path.join(state_dir, STATE_FILE)
        self.netns, self.boot = _here()

    def load(self):
        try:
            with open(self.path) as f:
                data = json.load(f)
        except FileNotFoundError:
            data = {}
        except (OSError, ValueError) as e:
            raise ProgramError('state_dir: cannot read %s: %s' % (self.path, e)) from None
        data.setdefault('version', 1)
        data['clsact'] = [r for r in data.get('clsact', []) if r.get('boot_id') == self.boot]
        data['pins'] = [r for r in data.get('pins', []) if r.get('boot_id') == self.boot]
        return data

    def save(self, data):
        jsonrecord.write(self.state_dir, self.path, data)

    def locked(self):
        """Serialise module runs of one host (and of hosts sharing the directory)."""
        return atomicfile.locked(self.state_dir, LOCK_FILE)

    def clsact_record(self, index, interface):
        return {'interface': interface, 'ifindex': index, 'netns': self.netns, 'boot_id': self.boot}

    def owns_clsact(self, data, index, interface):
        return self.clsact_record(index, interface) in data['clsact']

    def pin_record(self, path):
        return {'path': path, 'boot_id': self.boot}


# ---------------------------------------------------------------- planning


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
    used = _prog_map_ids(p.existing.prog_id)
    return bool(used) and used <= set(pinned_maps(req.pin_root).values())


def make_plan(req, obs, store):
    _observe(req, obs)
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
                                                              p.handle, _describe(p.foreign)))
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
    candidates = set(_pins_used(req.pin_root, removed_ids))
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
                    still |= _prog_map_ids(flt.prog_id)
    pins = pinned_maps(req.pin_root)
    keep = sorted(path for path in candidates if pins.get(path) in still)
    if keep:
        plan.warnings.append('unpin_maps: kept %s, still used by other edgeft filters on this host' % ', '.join(keep))
    return sorted(path for path in candidates if path not in keep)


# ---------------------------------------------------------------- applying


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


@contextlib.contextmanager
def _dir_lock(path):
    """Serialise compiles sharing pins: bcc's open-or-create of a pinned map is not atomic."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _compile(req, points, stack):
    """Compile the units of points and load their functions: {point where: prog fd}.

    Every bcc object is registered on stack, so the fds live until the swaps are done.
    """
    bcc = build.import_bcc()
    units = []
    for p in points:
        if p.unit not in units:
            units.append(p.unit)
    fds = {}
    for unit in units:
        with _dir_lock(req.pin_root), _captured_output() as out:
            try:
                bpf, error = bcc.BPF(text=unit.text, cflags=unit.cflags), None
            except Exception as e:  # bcc raises bare Exception for compile errors
                bpf, error = None, e
        if error is not None:
            raise ProgramError('src: bcc could not compile %s with %s: %s\n%s'
                               % (req.src, ' '.join(unit.cflags[1 + len(req.include_dirs):]), error, out['text']))
        stack.callback(bpf.cleanup)
        if unit.tunables is not None:
            for spec in layout.MAPS:
                try:
                    check_map(bpf[spec.name.encode()].map_fd, spec, spec.max_entries(unit.tunables))
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
            fds = _compile(req, loads, stack)
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


# ---------------------------------------------------------------- reporting


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
    result['pin_paths'] = _pins_used(req.pin_root, [e['prog_id'] for e in result['programs'] if e['prog_id']])
    return result
