"""The few bpf(2) commands edgeft needs, through ctypes (stdlib only).

A process that did not compile the programs (agent, status CLI, later module
runs) reaches the pinned maps with these, without bcc or bpftool. The attr
structs are prefixes of the kernel's `union bpf_attr` variants: the kernel
accepts a shorter attr and zero-fills the rest.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import (
    BpfSyscallError,
    DatapathError,
)

ENOTSUPP = 524  # the kernel's own "operation not supported" (not in errno), e.g. a batch op a map lacks

# __NR_bpf per architecture (asm/unistd*.h).
_NR_BPF = {
    "x86_64": 321,
    "aarch64": 280,
    "riscv64": 280,
    "loongarch64": 280,
    "ppc64le": 361,
    "ppc64": 361,
    "s390x": 351,
    "armv7l": 386,
    "i686": 357,
}

# enum bpf_cmd
MAP_LOOKUP_ELEM = 1
MAP_UPDATE_ELEM = 2
MAP_DELETE_ELEM = 3
MAP_GET_NEXT_KEY = 4
OBJ_PIN = 6
OBJ_GET = 7
PROG_TEST_RUN = 10
MAP_GET_FD_BY_ID = 14
OBJ_GET_INFO_BY_FD = 15
MAP_LOOKUP_BATCH = 24
LINK_CREATE = 28

# enum bpf_attach_type
CGROUP_SOCK_OPS = 3

# map update flags
BPF_ANY = 0
BPF_NOEXIST = 1
BPF_EXIST = 2

BPF_FS_MAGIC = 0xCAFE4A11
CGROUP2_SUPER_MAGIC = 0x63677270

_libc = None


class MapElemAttr(ctypes.Structure):
    _fields_ = [
        ("map_fd", ctypes.c_uint32),
        ("_pad", ctypes.c_uint32),
        ("key", ctypes.c_uint64),
        ("value", ctypes.c_uint64),  # or next_key
        ("flags", ctypes.c_uint64),
    ]


class BatchAttr(ctypes.Structure):
    _fields_ = [
        ("in_batch", ctypes.c_uint64),
        ("out_batch", ctypes.c_uint64),
        ("keys", ctypes.c_uint64),
        ("values", ctypes.c_uint64),
        ("count", ctypes.c_uint32),
        ("map_fd", ctypes.c_uint32),
        ("elem_flags", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
    ]


class ObjAttr(ctypes.Structure):
    _fields_ = [
        ("pathname", ctypes.c_uint64),
        ("bpf_fd", ctypes.c_uint32),
        ("file_flags", ctypes.c_uint32),
    ]


class LinkCreateAttr(ctypes.Structure):
    _fields_ = [
        ("prog_fd", ctypes.c_uint32),
        ("target_fd", ctypes.c_uint32),
        ("attach_type", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
    ]


class IdAttr(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32), ("next_id", ctypes.c_uint32), ("open_flags", ctypes.c_uint32)]


class InfoAttr(ctypes.Structure):
    _fields_ = [
        ("bpf_fd", ctypes.c_uint32),
        ("info_len", ctypes.c_uint32),
        ("info", ctypes.c_uint64),
    ]


class ProgRunAttr(ctypes.Structure):
    _fields_ = [
        ("prog_fd", ctypes.c_uint32),
        ("retval", ctypes.c_uint32),
        ("data_size_in", ctypes.c_uint32),
        ("data_size_out", ctypes.c_uint32),
        ("data_in", ctypes.c_uint64),
        ("data_out", ctypes.c_uint64),
        ("repeat", ctypes.c_uint32),
        ("duration", ctypes.c_uint32),
        ("ctx_size_in", ctypes.c_uint32),
        ("ctx_size_out", ctypes.c_uint32),
        ("ctx_in", ctypes.c_uint64),
        ("ctx_out", ctypes.c_uint64),
        ("flags", ctypes.c_uint32),
        ("cpu", ctypes.c_uint32),
        ("batch_size", ctypes.c_uint32),
    ]


class ProgInfo(ctypes.Structure):
    """Prefix of struct bpf_prog_info up to name."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("id", ctypes.c_uint32),
        ("tag", ctypes.c_uint8 * 8),
        ("jited_prog_len", ctypes.c_uint32),
        ("xlated_prog_len", ctypes.c_uint32),
        ("jited_prog_insns", ctypes.c_uint64),
        ("xlated_prog_insns", ctypes.c_uint64),
        ("load_time", ctypes.c_uint64),
        ("created_by_uid", ctypes.c_uint32),
        ("nr_map_ids", ctypes.c_uint32),
        ("map_ids", ctypes.c_uint64),
        ("name", ctypes.c_char * 16),
    ]


class MapInfo(ctypes.Structure):
    """Prefix of struct bpf_map_info up to name."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("id", ctypes.c_uint32),
        ("key_size", ctypes.c_uint32),
        ("value_size", ctypes.c_uint32),
        ("max_entries", ctypes.c_uint32),
        ("map_flags", ctypes.c_uint32),
        ("name", ctypes.c_char * 16),
    ]


def _syscall():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc.syscall


def bpf(cmd: int, attr: ctypes.Structure, what: str) -> int:
    """Run one bpf(2) command; raise BpfSyscallError naming `what` on failure."""
    nr = _NR_BPF.get(platform.machine())
    if nr is None:
        raise DatapathError("bpf(2) syscall number unknown for %s" % platform.machine())
    ret = _syscall()(ctypes.c_long(nr), ctypes.c_int(cmd), ctypes.byref(attr), ctypes.c_uint(ctypes.sizeof(attr)))
    if ret < 0:
        err = ctypes.get_errno()
        fix = "run as root (CAP_BPF + CAP_NET_ADMIN)" if err == 1 else ""
        raise BpfSyscallError(what, err, fix)
    return ret


def addr(obj) -> int:
    """Address of a ctypes object, as the u64 the kernel wants."""
    return ctypes.addressof(obj) if obj is not None else 0


def obj_get(path: str) -> int:
    """fd of the object pinned at path (caller closes it)."""
    p = ctypes.create_string_buffer(os.fsencode(path))
    return bpf(OBJ_GET, ObjAttr(pathname=ctypes.addressof(p)), "open pinned %s" % path)


def link_create(prog_fd: int, target_fd: int, attach_type: int, what: str) -> int:
    """fd of a new BPF link (the program detaches when the last fd of it closes)."""
    return bpf(LINK_CREATE, LinkCreateAttr(prog_fd=prog_fd, target_fd=target_fd, attach_type=attach_type), what)


def obj_pin(fd: int, path: str) -> None:
    p = ctypes.create_string_buffer(os.fsencode(path))
    bpf(OBJ_PIN, ObjAttr(pathname=ctypes.addressof(p), bpf_fd=fd), "pin %s" % path)


def _info(fd: int, info: ctypes.Structure, what: str):
    a = InfoAttr(bpf_fd=fd, info_len=ctypes.sizeof(info), info=ctypes.addressof(info))
    bpf(OBJ_GET_INFO_BY_FD, a, what)
    return info


def prog_info(fd: int) -> ProgInfo:
    return _info(fd, ProgInfo(), "program info of fd %d" % fd)


def prog_map_ids(fd: int) -> list:
    """Ids of the maps a loaded program uses (to prove which pins it shares)."""
    n = prog_info(fd).nr_map_ids
    ids = (ctypes.c_uint32 * max(n, 1))()
    info = ProgInfo(nr_map_ids=n, map_ids=ctypes.addressof(ids))
    _info(fd, info, "map ids of program fd %d" % fd)
    return list(ids[: min(n, info.nr_map_ids)])


def map_fd_by_id(map_id: int) -> int:
    return bpf(MAP_GET_FD_BY_ID, IdAttr(id=map_id), "open map id %d" % map_id)


def map_info(fd: int) -> MapInfo:
    return _info(fd, MapInfo(), "map info of fd %d" % fd)


def map_lookup(fd: int, key, value) -> bool:
    """Fill value for key; False if the key is absent."""
    a = MapElemAttr(map_fd=fd, key=addr(key), value=addr(value))
    try:
        bpf(MAP_LOOKUP_ELEM, a, "map lookup")
    except BpfSyscallError as e:
        if e.errno == 2:  # ENOENT
            return False
        raise
    return True


def map_update(fd: int, key, value, flags: int = BPF_ANY) -> None:
    a = MapElemAttr(map_fd=fd, key=addr(key), value=addr(value), flags=flags)
    bpf(MAP_UPDATE_ELEM, a, "map update")


def map_delete(fd: int, key) -> bool:
    """Delete key; False if it was absent."""
    try:
        bpf(MAP_DELETE_ELEM, MapElemAttr(map_fd=fd, key=addr(key)), "map delete")
    except BpfSyscallError as e:
        if e.errno == 2:
            return False
        raise
    return True


def array_lookup_batch(fd: int, values, count: int) -> int:
    """Read the first `count` slots of an array map into values (a ctypes array)
    with one syscall (BPF_MAP_LOOKUP_BATCH, kernel 5.6+); the number read."""
    keys = (ctypes.c_uint32 * count)()
    out_batch = ctypes.c_uint32()
    a = BatchAttr(out_batch=addr(out_batch), keys=addr(keys), values=addr(values), count=count, map_fd=fd)
    try:
        bpf(MAP_LOOKUP_BATCH, a, "map batch lookup")
    except BpfSyscallError as e:
        if e.errno != 2:  # ENOENT: the map ended before count; a.count says how many
            raise
    return a.count


def batch_unsupported(error: BpfSyscallError) -> bool:
    """Whether a batch command failed because the kernel has none (before 5.6): the caller then
    reads one entry at a time."""
    return error.errno in (errno.EINVAL, errno.EOPNOTSUPP, ENOTSUPP)


def hash_lookup_batch(fd: int, key_size: int, value_size: int, count: int) -> list:
    """[(key bytes, value bytes)] of every entry of a hash map (not per-CPU), read with
    BPF_MAP_LOOKUP_BATCH (kernel 5.6+) up to `count` entries a call. Pass the map's
    max_entries: a call needs room for a whole bucket (ENOSPC otherwise)."""
    keys = (ctypes.c_uint8 * (key_size * count))()
    values = (ctypes.c_uint8 * (value_size * count))()
    # The kernel's position between calls (a hash map's bucket index); none on the first call.
    position, after = ctypes.c_uint64(), ctypes.c_uint64()
    out, first = [], True
    while True:
        a = BatchAttr(in_batch=0 if first else addr(position), out_batch=addr(after), keys=addr(keys),
                      values=addr(values), count=count, map_fd=fd)
        try:
            bpf(MAP_LOOKUP_BATCH, a, "map batch lookup")
            done = False
        except BpfSyscallError as e:
            if e.errno != 2:  # ENOENT: no entry after this call's
                raise
            done = True
        key_bytes, value_bytes = bytes(keys), bytes(values)
        out.extend((key_bytes[i * key_size:(i + 1) * key_size], value_bytes[i * value_size:(i + 1) * value_size])
                   for i in range(a.count))
        if done or not a.count:
            return out
        position.value, first = after.value, False


def map_next_key(fd: int, key, next_key) -> bool:
    """Fill next_key with the key after key (None: the first); False at the end."""
    a = MapElemAttr(map_fd=fd, key=addr(key), value=addr(next_key))
    try:
        bpf(MAP_GET_NEXT_KEY, a, "map iterate")
    except BpfSyscallError as e:
        if e.errno == 2:
            return False
        raise
    return True


def possible_cpus() -> int:
    """Number of possible CPUs: the stride count of per-CPU map values."""
    with open("/sys/devices/system/cpu/possible") as f:
        spec = f.read().strip()
    n = 0
    for part in spec.split(","):
        n = max(n, int(part.split("-")[-1]) + 1)  # "0-3" or "0,2-5"
    return n


def _fs_magic(path: str):
    """statfs(2)'s f_type of path, or None when it cannot be read."""

    class _Statfs(ctypes.Structure):
        _fields_ = [("f_type", ctypes.c_long), ("_rest", ctypes.c_byte * 120)]

    libc = ctypes.CDLL(None, use_errno=True)
    buf = _Statfs()
    if libc.statfs(os.fsencode(path), ctypes.byref(buf)) != 0:
        return None
    return buf.f_type & 0xFFFFFFFF


def is_bpffs(path: str) -> bool:
    """True if path lies on a bpf filesystem (pins only work there)."""
    return _fs_magic(path) == BPF_FS_MAGIC


def is_cgroup2(path: str) -> bool:
    """True if path is on the cgroup v2 hierarchy (where cgroup programs attach)."""
    return _fs_magic(path) == CGROUP2_SUPER_MAGIC
