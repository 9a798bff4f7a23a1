# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load a prebuilt BPF object with the system's libbpf (Debian's libbpf1, RHEL's
libbpf), through ctypes: no compiler, no kernel headers on the target.

An object is opened first (parsed, nothing in the kernel), so its maps and
programs can be checked against the layout before anything is created; load()
then creates or reuses the pinned maps and loads every program. The object's
fds live until close().
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from collections import namedtuple

from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import LibbpfMissingError, ObjectError

# libbpf1 1.x: the soname every supported distribution ships.
SONAMES = ('libbpf.so.1',)
PACKAGE_HINT = 'libbpf1 (Debian/Ubuntu) or libbpf (RHEL family)'

ObjectMap = namedtuple('ObjectMap', 'name type key_size value_size max_entries')


_lib = None


def _bind(lib):
    sig = {
        'bpf_object__open_file': (ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_void_p]),
        'bpf_object__load': (ctypes.c_int, [ctypes.c_void_p]),
        'bpf_object__close': (None, [ctypes.c_void_p]),
        'bpf_object__next_map': (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_void_p]),
        'bpf_object__next_program': (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_void_p]),
        'bpf_object__find_map_by_name': (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]),
        'bpf_object__find_program_by_name': (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]),
        'bpf_map__name': (ctypes.c_char_p, [ctypes.c_void_p]),
        'bpf_map__type': (ctypes.c_int, [ctypes.c_void_p]),
        'bpf_map__key_size': (ctypes.c_uint32, [ctypes.c_void_p]),
        'bpf_map__value_size': (ctypes.c_uint32, [ctypes.c_void_p]),
        'bpf_map__max_entries': (ctypes.c_uint32, [ctypes.c_void_p]),
        'bpf_map__set_pin_path': (ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
        'bpf_map__fd': (ctypes.c_int, [ctypes.c_void_p]),
        'bpf_program__name': (ctypes.c_char_p, [ctypes.c_void_p]),
        'bpf_program__fd': (ctypes.c_int, [ctypes.c_void_p]),
        'libbpf_major_version': (ctypes.c_uint32, []),
        'libbpf_minor_version': (ctypes.c_uint32, []),
    }
    for name, (restype, argtypes) in sig.items():
        func = getattr(lib, name)
        func.restype = restype
        func.argtypes = argtypes
    return lib


def library():
    """The bound libbpf, or LibbpfMissingError naming the package to install."""
    global _lib
    if _lib is None:
        candidates = list(SONAMES) + [ctypes.util.find_library('bpf')]
        tried = []
        for name in candidates:
            if not name:
                continue
            try:
                lib = _bind(ctypes.CDLL(name, use_errno=True))
            except (OSError, AttributeError) as e:
                tried.append('%s: %s' % (name, e))
                continue
            if lib.libbpf_major_version() < 1:
                tried.append('%s is libbpf %d.%d, 1.0 or newer is needed'
                             % (name, lib.libbpf_major_version(), lib.libbpf_minor_version()))
                continue
            _lib = lib
            break
        else:
            raise LibbpfMissingError('the object loader needs libbpf 1.x, not found (%s): install %s, or set '
                                     'ebpf_failover_loader: bcc' % ('; '.join(tried) or 'no candidates', PACKAGE_HINT))
    return _lib


def version() -> str:
    lib = library()
    return '%d.%d' % (lib.libbpf_major_version(), lib.libbpf_minor_version())


def _walk(next_func, obj):
    cur = None
    while True:
        cur = next_func(obj, cur)
        if not cur:
            return
        yield cur


class BpfObject:
    """One object file: opened on construction, loaded by load(), released by close()."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lib = library()
        try:
            with open(path, 'rb') as f:
                magic = f.read(4)
        except OSError as e:
            raise ObjectError('%s: cannot read the object: %s' % (path, e.strerror or e)) from None
        if magic != b'\x7fELF':
            raise ObjectError('%s is not an ELF object (a corrupt or truncated file?): rebuild it' % path)
        ctypes.set_errno(0)
        self._obj = self._lib.bpf_object__open_file(path.encode(), None)
        if not self._obj:
            err = ctypes.get_errno() or errno.EINVAL
            raise ObjectError('%s: libbpf could not open the object: %s (a corrupt or truncated file, or not a '
                              'BPF object): rebuild it' % (path, os.strerror(err)))
        self.loaded = False

    def maps(self) -> list:
        lib = self._lib
        return [ObjectMap(lib.bpf_map__name(m).decode(), lib.bpf_map__type(m), lib.bpf_map__key_size(m),
                          lib.bpf_map__value_size(m), lib.bpf_map__max_entries(m))
                for m in _walk(lib.bpf_object__next_map, self._obj)]

    def programs(self) -> list:
        lib = self._lib
        return [lib.bpf_program__name(p).decode() for p in _walk(lib.bpf_object__next_program, self._obj)]

    def pin_maps(self, pin_dir: str, names) -> None:
        """At load, reuse <pin_dir>/<name> if pinned (libbpf checks it is compatible), else create and pin it."""
        for name in names:
            m = self._lib.bpf_object__find_map_by_name(self._obj, name.encode())
            if not m:
                raise ObjectError('%s has no map %s' % (self.path, name))
            rc = self._lib.bpf_map__set_pin_path(m, os.path.join(pin_dir, name).encode())
            if rc < 0:
                raise ObjectError('%s: pin path of %s: %s' % (self.path, name, os.strerror(-rc)))

    def load(self) -> None:
        """Create or reuse the maps and load every program; the error carries libbpf's errno."""
        rc = self._lib.bpf_object__load(self._obj)
        if rc < 0:
            raise ObjectError('%s: libbpf could not load the object: %s' % (self.path, os.strerror(-rc)))
        self.loaded = True

    def prog_fd(self, name: str) -> int:
        p = self._lib.bpf_object__find_program_by_name(self._obj, name.encode())
        if not p:
            raise ObjectError('%s has no program %s (it has %s)' % (self.path, name, ', '.join(self.programs()) or 'none'))
        fd = self._lib.bpf_program__fd(p)
        if fd < 0:
            raise ObjectError('%s: program %s is not loaded' % (self.path, name))
        return fd

    def map_fd(self, name: str) -> int:
        m = self._lib.bpf_object__find_map_by_name(self._obj, name.encode())
        fd = self._lib.bpf_map__fd(m) if m else -1
        if fd < 0:
            raise ObjectError('%s: map %s is not loaded' % (self.path, name))
        return fd

    def has_map(self, name: str) -> bool:
        return bool(self._lib.bpf_object__find_map_by_name(self._obj, name.encode()))

    def close(self) -> None:
        if self._obj:
            self._lib.bpf_object__close(self._obj)
            self._obj = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
