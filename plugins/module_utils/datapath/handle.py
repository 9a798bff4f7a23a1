# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One map by fd (typed lookups and writes, per-CPU values), its layout check against
layout.py, and the lock that serialises writers of a host's pinned maps."""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import bpfsys, layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import BpfSyscallError, LayoutMismatchError


def check_map(fd: int, spec: layout.MapSpec, max_entries: int = None, where: str = "") -> bpfsys.MapInfo:
    """Raise LayoutMismatchError unless the map behind fd matches spec."""
    info = bpfsys.map_info(fd)
    want = (spec.map_type, ctypes.sizeof(spec.key), ctypes.sizeof(spec.value))
    have = (info.type, info.key_size, info.value_size)
    if have != want or (max_entries is not None and info.max_entries != max_entries):
        raise LayoutMismatchError(
            "map %s%s has (type, key size, value size) %s and max_entries %d, this edgeft expects %s and %s: "
            "it was created by another build; remove the pin (its state is lost) or build with the "
            "same EDGEFT_MAX_* values" % (spec.name, where, have, info.max_entries, want, max_entries or "any")
        )
    return info


@contextlib.contextmanager
def pin_dir_lock(pin_dir: str):
    """Serialise writers of one host's maps (compiles, modules, agent).

    flock on the pin directory: bcc's open-or-create of pins is not atomic, and
    the control plane's read-modify-write of a peer must not interleave with
    another writer's.
    """
    if pin_dir is None:
        yield
        return
    fd = os.open(pin_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class MapHandle:
    """One map: spec + fd; values are ctypes instances of spec.value."""

    def __init__(self, spec: layout.MapSpec, fd: int, owned: bool = False) -> None:
        self.spec = spec
        self.fd = fd
        self._owned = owned
        self.percpu = spec.map_type == layout.MAP_PERCPU_ARRAY
        self.ncpus = bpfsys.possible_cpus() if self.percpu else 1

    def close(self) -> None:
        if self._owned and self.fd >= 0:
            os.close(self.fd)
        self.fd = -1

    def _key(self, key):
        return self.spec.key(key) if isinstance(key, int) else key

    def _buffer(self):
        if not self.percpu:
            return self.spec.value()
        stride = (ctypes.sizeof(self.spec.value) + 7) & ~7
        return (ctypes.c_uint8 * (stride * self.ncpus))()

    def get(self, key):
        """Value for key, or None; per-CPU maps give a list, one value per CPU."""
        buf = self._buffer()
        if not bpfsys.map_lookup(self.fd, self._key(key), buf):
            return None
        if not self.percpu:
            return buf
        stride = len(buf) // self.ncpus
        return [self.spec.value.from_buffer_copy(buf, i * stride) for i in range(self.ncpus)]

    def put(self, key, value, flags: int = bpfsys.BPF_ANY) -> None:
        if self.percpu:
            buf = self._buffer()
            stride = len(buf) // self.ncpus
            values = value if isinstance(value, (list, tuple)) else [value] * self.ncpus
            for i, v in enumerate(values):
                ctypes.memmove(ctypes.addressof(buf) + i * stride, ctypes.addressof(v), ctypes.sizeof(v))
            value = buf
        elif isinstance(value, int):
            value = self.spec.value(value)
        bpfsys.map_update(self.fd, self._key(key), value, flags)

    def delete(self, key) -> bool:
        return bpfsys.map_delete(self.fd, self._key(key))

    def keys(self):
        """All keys (a snapshot; concurrent deletes may end the walk early)."""
        out = []
        cur = None
        while True:
            nxt = self.spec.key()
            if not bpfsys.map_next_key(self.fd, cur, nxt):
                return out
            out.append(nxt)
            cur = nxt

    def values_by_key(self) -> dict:
        """{key: value bytes} of a hash map that is not per-CPU (int keys for integer key
        types): one batch read (kernel 5.6+), else one lookup per key of a walk. Bytes, so a
        reader can tell unchanged entries from changed ones by comparing them."""
        key_size, value_size = ctypes.sizeof(self.spec.key), ctypes.sizeof(self.spec.value)
        try:
            pairs = bpfsys.hash_lookup_batch(self.fd, key_size, value_size, bpfsys.map_info(self.fd).max_entries)
        except BpfSyscallError as e:
            if not bpfsys.batch_unsupported(e):
                raise
            pairs = []  # a kernel before 5.6
            for key in self.keys():
                value = self.get(key)
                if value is not None:  # deleted during the walk
                    pairs.append((bytes(key), bytes(value)))
        as_int = not issubclass(self.spec.key, (ctypes.Structure, ctypes.Array))
        return {(self.spec.key.from_buffer_copy(k).value if as_int else k): v for k, v in pairs}

    def clear(self) -> None:
        """Hash maps: delete every entry; arrays: zero every slot; a ring buffer has no entries
        (its reader consumes its records)."""
        if self.spec.map_type == layout.MAP_RINGBUF:
            return
        if self.spec.map_type == layout.MAP_HASH:
            for k in self.keys():
                self.delete(k)
            return
        zero = self.spec.value()
        for i in range(bpfsys.map_info(self.fd).max_entries):
            self.put(i, zero)
