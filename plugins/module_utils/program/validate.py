# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check every option of the ebpf_program module against the host and build the
Request: root, pyroute2, the bpf filesystem, the interfaces, the kernel's
version, bcc and the kernel headers or libbpf and the objects, the sizes of
maps already pinned. Changes nothing."""

from __future__ import annotations

import os

from ansible_collections.edgeft.failover.plugins.module_utils import netlink, tc
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import bpfsys, build, kernel_version, layout, libbpf, objects
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.handle import check_map
from ansible_collections.edgeft.failover.plugins.module_utils.program.spec import (
    DEFAULT_HANDLE,
    DEFAULT_PRIORITY,
    DEFAULT_STATE_DIR,
    DIRECTIONS,
    IDENT,
    MAPS_HEADER,
    NAME_PREFIX,
    Point,
    ProgramError,
    Request,
    check_defines,
    define_flag,
    digest,
    int_in,
    make_unit,
    object_unit,
    resolve_includes,
)


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

    top_defines = check_defines(params.get('defines'), 'defines')
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
        priority = int_in(DEFAULT_PRIORITY if entry.get('priority') is None else entry['priority'], 1, 0xFFFF, where + '.priority')
        handle = int_in(DEFAULT_HANDLE if entry.get('handle') is None else entry['handle'], 1, 0xFFFFFFFF, where + '.handle')
        function = entry.get('function') or 'edgeft_%s' % direction
        if not isinstance(function, str) or not IDENT.match(function):
            raise ProgramError('%s.function: %r is not a C function name' % (where, function))
        defines = dict(top_defines)
        defines.update(check_defines(entry.get('defines'), where + '.defines'))
        plane = entry.get('plane')
        plane_where = where + ('.plane' if plane is not None else '.defines')
        if plane is not None:
            int_in(plane, 0, layout.PLANE_SLOTS - 1, where + '.plane')
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
        points[-1].object = entry.get('object')
        points[-1].own_defines = entry.get('defines') or plane is not None

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
    try:
        kernel_version.require()
    except DatapathError as e:
        raise ProgramError(str(e)) from None
    src = params.get('src')
    with_object = [p.where + '.object' for p in req.points if p.object] + (['object'] if params.get('object') else [])
    if src and with_object:
        raise ProgramError('src and %s: give the C source (compiled here by bcc) or prebuilt objects (loaded with '
                           'libbpf), not both' % with_object[0])
    if with_object:
        _validate_objects(req, params)
        return
    if not src:
        raise ProgramError('src or object: one is required with state=present (the C source on the target, e.g. '
                           '/usr/local/lib/edgeft/bpf/failover_tc.c, compiled by bcc; or a prebuilt object, '
                           'e.g. from edgeft.failover.bpf_object)')
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

    includes = resolve_includes(req.src, include_dirs)
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
        key = tuple(sorted((k, define_flag(k, v, '')) for k, v in p.defines.items()))
        unit = units.get(key)
        if unit is None:
            unit = units[key] = make_unit(req, key, p, source, includes)
        unit.points.append(p)
        p.unit = unit
        p.digest = digest(unit, p.function)
        p.name = '%s%s:%s' % (NAME_PREFIX, p.function, p.digest)
    req.units = list(units.values())

    if req.edgeft_layout:
        _validate_layout(req)


def _validate_objects(req, params):
    """Object mode: every point's object readable, parsed by libbpf, of this layout."""
    try:
        libbpf.library()
    except DatapathError as e:
        raise ProgramError('object: %s' % e) from None
    units = {}
    for p in req.points:
        where = p.where + '.object' if p.object else 'object'
        path = p.object or params.get('object')
        if not path:
            raise ProgramError('%s.object: every attach point needs an object when object is not set at the top' % p.where)
        if p.own_defines or params.get('defines'):
            raise ProgramError('%s: defines and plane are built into an object; set them where the object is built '
                               '(edgeft.failover.bpf_object), not here' % (p.where + '.defines' if p.own_defines else 'defines'))
        if not os.path.isabs(path):
            raise ProgramError('%s: %r must be an absolute path on the target' % (where, path))
        path = os.path.normpath(path)
        unit = units.get(path)
        if unit is None:
            unit = units[path] = _object_unit(req, path, where)
        if p.function not in unit.programs:
            raise ProgramError('%s.function: %s is not a program of %s (it has %s)'
                               % (p.where, p.function, path, ', '.join(unit.programs) or 'none'))
        unit.points.append(p)
        p.unit = unit
        p.digest = digest(unit, p.function)
        p.name = '%s%s:%s' % (NAME_PREFIX, p.function, p.digest)
    req.units = list(units.values())
    req.edgeft_layout = any(u.map_sizes is not None for u in req.units)
    if req.edgeft_layout:
        if not all(u.map_sizes is not None for u in req.units):
            raise ProgramError('object: the edgeft data path\'s objects and other objects share pin_root; give them '
                               'pin roots of their own')
        _validate_layout(req)


def _object_unit(req, path, where):
    try:
        with open(path, 'rb') as f:
            content = f.read()
    except OSError as e:
        raise ProgramError('%s: cannot read %s: %s' % (where, path, e.strerror or e)) from None
    try:
        with libbpf.BpfObject(path) as obj:
            edgeft = any(m.name in layout.MAPS_BY_NAME or m.name.startswith('edgeft_') for m in obj.maps())
            sizes = objects.check_layout(obj) if edgeft else None
            programs = obj.programs()
    except DatapathError as e:
        raise ProgramError('%s: %s' % (where, e)) from None
    unit = object_unit(path, content, sizes)
    unit.programs = programs
    return unit


def _validate_layout(req):
    """Every program shares one set of pins: sizes must agree with each other and with existing pins."""
    first = req.units[0]
    option = 'object' if first.object_path else 'defines'
    for unit in req.units[1:]:
        for spec in layout.MAPS:
            if unit.map_sizes[spec.name] != first.map_sizes[spec.name]:
                raise ProgramError('%s.%s: map %s would get %d entries, %s sets %d; all programs share the '
                                   'maps pinned under pin_root, so their EDGEFT_MAX_* defines must agree'
                                   % (unit.points[0].where, option, spec.name, unit.map_sizes[spec.name],
                                      first.points[0].where, first.map_sizes[spec.name]))
    for spec in layout.MAPS:
        path = os.path.join(req.pin_root, spec.name)
        if not os.path.exists(path):
            continue
        try:
            fd = bpfsys.obj_get(path)
            try:
                check_map(fd, spec, first.map_sizes[spec.name], ' (pinned at %s)' % path)
            finally:
                os.close(fd)
        except DatapathError as e:
            raise ProgramError('pin_root: %s' % e) from None
