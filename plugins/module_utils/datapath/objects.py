# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build the data path once into BPF objects, and check an object against the layout.

build() runs where clang is (the Ansible controller, once per play): one
object per (sources, build settings), named by the digest of both and kept in
a cache directory, so a fleet of any size compiles each plane's programs once.
The programs use only UAPI types and no CO-RE relocations, so one object
serves every kernel the data path supports.

check_layout() runs on the target before anything is loaded: an object built
for another layout version, or with other sizes than the maps already pinned,
is refused by name.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import subprocess
import tempfile
from collections import namedtuple

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout, layout_check
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import CompileError, ObjectError

SOURCE = 'failover_tc.c'
PROGRAMS = ('edgeft_egress', 'edgeft_ingress')
PREFIX = 'edgeft-p'  # every object's name: PREFIX<plane>-<digest>SUFFIX
TCP_SOURCE = 'tcp_peers.c'  # the sock_ops program the agent loads (docs/tcp.md)
TCP_PREFIX = 'edgeft-tcp-'  # its object: TCP_PREFIX<digest>SUFFIX
SUFFIX = '.bpf.o'
# Bump when the build command changes what an object holds for the same inputs.
_DIGEST_SCHEME = b'edgeft-bpf-object/2'
DIGEST_LEN = 16
# BPF ISA v3: the atomic compare-and-swap of edgeft_claim_change (kernel 5.12+).
CLANG_FLAGS = ('-O2', '-g', '-target', 'bpf', '-mcpu=v3', '-Wall', '-Werror')

Built = namedtuple('Built', 'path digest plane cached')


def clang_version(clang: str) -> str:
    """clang's first --version line, or CompileError naming the package."""
    try:
        out = subprocess.run([clang, '--version'], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise CompileError('clang (%s) is needed where the objects are built (the controller): %s. Install clang and '
                           'libbpf-dev there (Debian/Ubuntu: apt install clang libbpf-dev; RHEL family: dnf install '
                           'clang libbpf-devel)' % (clang, e)) from None
    return out.splitlines()[0].strip() if out else clang


def _multiarch_include() -> list:
    """Debian keeps asm/ under /usr/include/<triplet>; clang -target bpf does not look there."""
    machine = platform.machine()
    for cand in ('/usr/include/%s-linux-gnu' % machine, '/usr/include/%s-linux-gnu' % machine.replace('_', '-')):
        if os.path.isdir(os.path.join(cand, 'asm')):
            return ['-idirafter', cand]
    return []


def plane_defines(plane: int, tunables: dict) -> list:
    """The -D flags of one plane's build: the plane and every tunable, sorted (part of the digest)."""
    tun = layout.tunables(tunables)
    if not 0 <= plane < tun['EDGEFT_MAX_PLANES']:
        raise CompileError('plane %d out of range 0..%d (EDGEFT_MAX_PLANES)' % (plane, tun['EDGEFT_MAX_PLANES'] - 1))
    return ['-DEDGEFT_PLANE=%d' % plane] + ['-D%s=%d' % kv for kv in sorted(tun.items())]


def _headers(bpf_dir: str) -> list:
    return sorted(n for n in os.listdir(bpf_dir) if n.endswith('.h'))


def digest(bpf_dir: str, defines: list, compiler: str, tunables: dict, source: str = SOURCE) -> str:
    """Content digest of one build: sources, headers, layout asserts, defines and compiler."""
    h = hashlib.sha256()
    parts = [_DIGEST_SCHEME, compiler.encode(), ' '.join(CLANG_FLAGS).encode(), '\0'.join(defines).encode(),
             layout_check.c_asserts(layout.tunables(tunables)).encode()]
    for name in [source] + _headers(bpf_dir):
        with open(os.path.join(bpf_dir, name), 'rb') as f:
            parts += [name.encode(), f.read()]
    for part in parts:
        h.update(b'%d:' % len(part) + part)
    return h.hexdigest()[:DIGEST_LEN]


def object_name(plane: int, digest_: str) -> str:
    return '%s%d-%s%s' % (PREFIX, plane, digest_, SUFFIX)


def tcp_object_name(digest_: str) -> str:
    return '%s%s%s' % (TCP_PREFIX, digest_, SUFFIX)


def cached(plane: int, tunables: dict, bpf_dir: str, cache_dir: str, compiler: str) -> Built:
    """Where build() puts the object of one plane's programs, and whether it is there
    already; builds nothing. compiler: clang_version() of the clang that builds it."""
    name = digest(bpf_dir, plane_defines(plane, tunables), compiler, tunables)
    path = os.path.join(cache_dir, object_name(plane, name))
    return Built(path, name, plane, os.path.isfile(path))


def build(plane: int, tunables: dict, bpf_dir: str, cache_dir: str, clang: str = 'clang', compiler: str | None = None) -> Built:
    """The object of one plane's programs, compiled unless the cache has it.

    compiler: clang_version(clang), when the caller has it already."""
    found = cached(plane, tunables, bpf_dir, cache_dir, compiler or clang_version(clang))
    if not found.cached:
        _compile(SOURCE, plane_defines(plane, tunables), tunables, bpf_dir, found.path, clang, 'the programs of plane %d' % plane)
    return found


def _tcp_defines(tunables: dict) -> list:
    return ['-D%s=%d' % kv for kv in sorted(layout.tunables(tunables).items())]


def tcp_cached(tunables: dict, bpf_dir: str, cache_dir: str, compiler: str) -> Built:
    """Where build_tcp() puts the TCP program's object, and whether it is there; builds nothing."""
    name = digest(bpf_dir, _tcp_defines(tunables), compiler, tunables, source=TCP_SOURCE)
    path = os.path.join(cache_dir, tcp_object_name(name))
    return Built(path, name, None, os.path.isfile(path))


def build_tcp(tunables: dict, bpf_dir: str, cache_dir: str, clang: str = 'clang', compiler: str | None = None) -> Built:
    """The object of the sock_ops program (bpf/tcp_peers.c, one for every plane), compiled
    unless the cache has it. Its plane is None."""
    found = tcp_cached(tunables, bpf_dir, cache_dir, compiler or clang_version(clang))
    if not found.cached:
        _compile(TCP_SOURCE, _tcp_defines(tunables), tunables, bpf_dir, found.path, clang, 'the TCP program')
    return found


def _compile(source: str, defines: list, tunables: dict, bpf_dir: str, path: str, clang: str, what: str) -> None:
    cache_dir = os.path.dirname(path)
    os.makedirs(cache_dir, exist_ok=True)
    with open(os.path.join(bpf_dir, source), 'rb') as f:
        text = f.read() + b'\n' + layout_check.c_asserts(layout.tunables(tunables)).encode()
    fd, tmp = tempfile.mkstemp(prefix='.edgeft-', suffix=SUFFIX, dir=cache_dir)
    os.close(fd)
    # Reproducible bytes: the debug info and BTF line info name the sources' directory and the
    # working directory; map both to fixed names, so a build from another checkout, controller or
    # cache directory is byte for byte the same object (and no host replaces its programs).
    reproducible = ['-ffile-prefix-map=%s=bpf' % bpf_dir, '-fdebug-compilation-dir=.']
    cmd = [clang, *CLANG_FLAGS, *reproducible, '-I', bpf_dir, *_multiarch_include(), *defines, '-x', 'c', '-c', '-', '-o', tmp]
    try:
        done = subprocess.run(cmd, input=text, capture_output=True, check=False, cwd=bpf_dir)
        if done.returncode != 0:
            raise CompileError('clang could not build %s from %s: %s'
                               % (what, os.path.join(bpf_dir, source), done.stderr.decode('utf-8', 'replace')[-6000:]))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)  # atomic: a concurrent build of the same digest writes the same bytes
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def check_layout(bpf_object, pinned_max_entries=None) -> dict:
    """Refuse an object whose maps are not this layout's; return {map name: max_entries}.

    pinned_max_entries: {name: max_entries} of maps already pinned; the object
    must agree (libbpf would refuse to reuse them with a less helpful message).
    """
    have = {m.name: m for m in bpf_object.maps()}
    missing = [s.name for s in layout.MAPS if s.name not in have]
    if missing:
        other = ', '.join(sorted(n for n in have if n.startswith('edgeft_'))) or 'none'
        raise ObjectError('%s lacks the maps %s of layout version %d (it has %s): it was built from other sources; '
                          'build the objects from this collection\'s bpf/'
                          % (bpf_object.path, ', '.join(missing), layout.LAYOUT_VERSION, other))
    sizes = {}
    for spec in layout.MAPS:
        m = have[spec.name]
        want = (spec.map_type, ctypes.sizeof(spec.key), ctypes.sizeof(spec.value))
        if (m.type, m.key_size, m.value_size) != want:
            raise ObjectError('%s: map %s has (type, key size, value size) %s, layout version %d has %s: the object was '
                              'built from other sources' % (bpf_object.path, spec.name, (m.type, m.key_size, m.value_size),
                                                            layout.LAYOUT_VERSION, want))
        pinned = (pinned_max_entries or {}).get(spec.name)
        if pinned is not None and pinned != m.max_entries:
            raise ObjectError('%s: map %s has %d entries, the one pinned has %d: build the objects with the same '
                              'EDGEFT_MAX_* values, or remove the pin (its state is lost)'
                              % (bpf_object.path, spec.name, m.max_entries, pinned))
        sizes[spec.name] = m.max_entries
    return sizes
