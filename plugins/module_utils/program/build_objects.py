# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bpf_object module: build the data path's objects once, where clang is (the
controller), one per plane and the TCP program's, cached by the digest of sources and build
settings."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout, objects
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.program.errors import ProgramError

ARGUMENT_SPEC = dict(
    src_dir=dict(type='path', required=True),
    planes=dict(type='list', elements='int'),
    defines=dict(type='dict', default={}),
    cache_dir=dict(type='path', required=True),
    clang=dict(type='str', default='clang'),
)


def _validate(params):
    src_dir = params.get('src_dir')
    if not src_dir or not os.path.isfile(os.path.join(src_dir, objects.SOURCE)):
        raise ProgramError('src_dir: %r has no %s: point it at the collection\'s bpf/ directory' % (src_dir, objects.SOURCE))
    try:
        tunables = layout.tunables(params.get('defines') or {})
    except (TypeError, ValueError) as e:
        raise ProgramError('defines: %s (an object is built with the data path\'s tunables only: %s)'
                           % (e, ', '.join(sorted(layout.TUNABLES)))) from None
    planes = params.get('planes')
    if planes is None:
        planes = list(range(tunables['EDGEFT_MAX_PLANES']))
    if not planes:
        raise ProgramError('planes: at least one plane index is required (leave it out for every plane)')
    for i, plane in enumerate(planes):
        if isinstance(plane, bool) or not isinstance(plane, int) or not 0 <= plane < tunables['EDGEFT_MAX_PLANES']:
            raise ProgramError('planes[%d]: %r is not a plane index below EDGEFT_MAX_PLANES (%d)'
                               % (i, plane, tunables['EDGEFT_MAX_PLANES']))
    cache_dir = params.get('cache_dir')
    if not cache_dir or not os.path.isabs(cache_dir):
        raise ProgramError('cache_dir: %r must be an absolute path on the controller' % cache_dir)
    if os.path.exists(cache_dir) and not os.path.isdir(cache_dir):
        raise ProgramError('cache_dir: %s exists and is not a directory' % cache_dir)
    return os.path.normpath(src_dir), sorted(set(planes)), tunables, os.path.normpath(cache_dir)


def run(params, check_mode=False):
    """{'changed', 'objects': [{plane, path, file, digest, cached}], 'tcp_object': {path, file, digest, cached},
    'compiler'}; check mode computes the digests only (and builds nothing)."""
    src_dir, planes, tunables, cache_dir = _validate(params)
    clang = params.get('clang') or 'clang'
    try:
        compiler = objects.clang_version(clang)
        if check_mode:
            built = [objects.cached(plane, tunables, src_dir, cache_dir, compiler) for plane in planes]
            tcp = objects.tcp_cached(tunables, src_dir, cache_dir, compiler)
        else:
            # One clang per object, side by side: each is a process of its own.
            with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
                tcp_job = pool.submit(objects.build_tcp, tunables, src_dir, cache_dir, clang, compiler)
                built = list(pool.map(lambda plane: objects.build(plane, tunables, src_dir, cache_dir, clang, compiler), planes))
                tcp = tcp_job.result()
    except DatapathError as e:
        raise ProgramError(str(e)) from None
    out = [{'plane': b.plane, 'path': b.path, 'file': os.path.basename(b.path), 'digest': b.digest, 'cached': b.cached}
           for b in built]
    tcp_out = {'path': tcp.path, 'file': os.path.basename(tcp.path), 'digest': tcp.digest, 'cached': tcp.cached}
    changed = any(not o['cached'] for o in out + [tcp_out])
    return {'changed': changed, 'objects': out, 'tcp_object': tcp_out, 'compiler': compiler}, []
