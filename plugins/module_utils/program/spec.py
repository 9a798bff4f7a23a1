# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ebpf_program module's options and what validation makes of them: the
attach points, the units loaded (one bcc compile per set of defines, or one
prebuilt object per file) and their digests. Pure: reads the C source, its
headers or the objects, never the kernel."""

from __future__ import annotations

import hashlib
import os
import re

from ansible_collections.edgeft.failover.plugins.module_utils import constants, tc
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout, layout_check
from ansible_collections.edgeft.failover.plugins.module_utils.program.errors import ProgramError

NAME_PREFIX = 'edgeft:'
DIRECTIONS = ('ingress', 'egress')
# Priority 0x0ed0: low enough that edgeft decides before most classifiers
# (tc's automatic priorities start at 49152 and count down) and unusual
# enough not to collide. Its programs return TC_ACT_UNSPEC for what they do
# not steer, so filters behind it still run.
DEFAULT_PRIORITY = 0x0ED0
DEFAULT_HANDLE = constants.TC_HANDLE
DEFAULT_STATE_DIR = constants.STATE_DIR
MAPS_HEADER = 'edgeft_maps.h'
RESERVED_DEFINES = ('EDGEFT_PIN_DIR',)
DIGEST_LEN = 16
_DIGEST_SCHEME = b'edgeft-ebpf-program/1'
_OBJECT_DIGEST_SCHEME = b'edgeft-ebpf-object/1'
IDENT = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\r\n]+)[>"]', re.M)


# The module's argument spec, here so that restore.py fills the same defaults.
ARGUMENT_SPEC = dict(
    src=dict(type='path'),
    object=dict(type='path'),
    include_dirs=dict(type='list', elements='path', default=[]),
    defines=dict(type='dict', default={}),
    pin_root=dict(type='path', required=True),
    attach=dict(type='list', elements='dict', required=True, options=dict(
        interface=dict(type='str', required=True),
        direction=dict(type='str', required=True, choices=['ingress', 'egress']),
        function=dict(type='str'),
        object=dict(type='path'),
        plane=dict(type='int'),
        defines=dict(type='dict'),
        priority=dict(type='int', default=DEFAULT_PRIORITY),
        handle=dict(type='int', default=DEFAULT_HANDLE),
    )),
    state=dict(type='str', choices=['present', 'absent'], default='present'),
    unpin_maps=dict(type='bool', default=False),
    state_dir=dict(type='path', default=DEFAULT_STATE_DIR),
)


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
    """What is loaded once for its points: a bcc compile of the source with one set of
    defines, or one prebuilt object (object_path)."""

    def __init__(self, key, text, cflags, digest_base, map_sizes, object_path=None):
        self.key = key
        self.text = text
        self.cflags = cflags
        self.digest_base = digest_base
        # {map name: max_entries} of the edgeft layout's maps (None: not the edgeft data path)
        self.map_sizes = map_sizes
        self.object_path = object_path
        self.points = []


def object_unit(path, content, map_sizes):
    """The unit of a prebuilt object: its digest covers the file's bytes."""
    h = hashlib.sha256(_OBJECT_DIGEST_SCHEME)
    h.update(b'%d:' % len(content) + content)
    return Unit(('object', path), None, None, h.digest(), map_sizes, object_path=path)


class Request:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def define_flag(name, value, where):
    if not isinstance(name, str) or not IDENT.match(name):
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


def check_defines(defines, where):
    if defines is None:
        return {}
    if not isinstance(defines, dict):
        raise ProgramError('%s: must be a dictionary of macro names to values' % where)
    for name, value in defines.items():
        define_flag(name, value, where)
    return dict(defines)


def int_in(value, lo, hi, where):
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ProgramError('%s: %r is not an integer in %d..%d (0x%x..0x%x)' % (where, value, lo, hi, lo, hi))
    return value


def resolve_includes(src, include_dirs):
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


def make_unit(req, key, point, source, includes):
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
    sizes = None if tun is None else {spec.name: spec.max_entries(tun) for spec in layout.MAPS}
    return Unit(key, text, cflags, h.digest(), sizes)


def digest(unit, function):
    return hashlib.sha256(unit.digest_base + function.encode()).hexdigest()[:DIGEST_LEN]
