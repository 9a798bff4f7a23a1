# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sock_ops program for TCP to fabric peers (bpf/tcp_peers.c, docs/tcp.md).

TcpProgram loads its object over the host's pinned maps (it reads the peer table), writes its
settings, attaches it to a cgroup v2 directory with a BPF link, and reads its ring buffer and
counters. Whoever holds it owns the attachment: close(), or the end of the process, detaches
the program; connections it tuned keep their settings, new ones get the kernel's.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gzip
import os
import platform
from collections import namedtuple

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import bpfsys, layout, libbpf, objects, ringbuf
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import BpfSyscallError, DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.handle import MapHandle

# The kernel's TCP_RTO_MIN and TCP_DELACK_MAX (200 ms): what bpf_setsockopt accepts at most.
KERNEL_MAX_US = 200000
# ... and at least TCP_TIMEOUT_MIN, two jiffies (8 ms at HZ=250, 2 ms at HZ=1000).
TIMEOUT_MIN_JIFFIES = 2

TcpSettings = namedtuple("TcpSettings", "rto_min_us delack_max_us signal_hold_ns")


def cgroup2_root(mounts: str = "/proc/self/mounts") -> str | None:
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on a
    hybrid host), or None."""
    try:
        with open(mounts) as f:
            for line in f:
                fields = line.split()
                if len(fields) > 2 and fields[2] == "cgroup2":
                    return fields[1].replace("\\040", " ")
    except OSError:
        return None
    return None


def resolve_cgroup(value: str) -> str | None:
    """The cgroup directory of tcp.cgroup: an absolute path as is, a relative one under the cgroup
    v2 root, empty for the root itself; None without a cgroup v2 hierarchy (for a relative one)."""
    if value.startswith("/"):
        return value
    top = cgroup2_root()
    return None if top is None else os.path.normpath(os.path.join(top, value)) if value else top


def kernel_config(*names: str) -> dict:
    """{name: value} of the running kernel's build configuration (/proc/config.gz or
    /boot/config-<release>) for names; empty where neither is readable. A name the kernel was built
    without is given as "n"."""
    candidates = (("/proc/config.gz", gzip.open), ("/boot/config-%s" % platform.release(), open))
    for path, opener in candidates:
        try:
            with opener(path, "rt") as f:
                found = {}
                for line in f:
                    key, sep, value = line.strip().partition("=")
                    if sep and key in names:
                        found[key] = value
                return {name: found.get(name, "n") for name in names}
        except OSError:
            continue
    return {}


def kernel_hz() -> int | None:
    """CONFIG_HZ of the running kernel, or None where its configuration is not readable."""
    value = kernel_config("CONFIG_HZ").get("CONFIG_HZ")
    return int(value) if value and value.isdigit() else None


def minimum_us(hz: int | None) -> int | None:
    """The shortest RTO minimum or delayed-ACK maximum the kernel accepts, in us (None: unknown HZ)."""
    return None if not hz else TIMEOUT_MIN_JIFFIES * 1000000 // hz


def check_settings(settings: TcpSettings, hz: int | None) -> None:
    """Refuse values the kernel's bpf_setsockopt would refuse, naming the option."""
    floor = minimum_us(hz)
    for option, value in (("rto_min_ms", settings.rto_min_us), ("delack_max_ms", settings.delack_max_us)):
        if not value:
            continue
        if value > KERNEL_MAX_US:
            raise DatapathError("tcp.%s: %d ms is above the kernel's 200 ms, the default it lowers" % (option, value // 1000))
        if floor is not None and value < floor:
            raise DatapathError("tcp.%s: %d ms is below what this kernel accepts: %d jiffies, %d ms at HZ=%d; set it to at "
                                "least %d" % (option, value // 1000, TIMEOUT_MIN_JIFFIES, -(-floor // 1000), hz, -(-floor // 1000)))


class TcpProgram:
    """One attachment of edgeft_tcp to one cgroup, over the maps pinned under pin_root."""

    def __init__(self, object_path: str, pin_root: str, cgroup: str, settings: TcpSettings) -> None:
        self.cgroup = cgroup
        self.settings = settings
        self._release = contextlib.ExitStack()  # what is held so far, released in reverse by close()
        if not os.path.isdir(cgroup) or not bpfsys.is_cgroup2(cgroup):
            raise DatapathError("tcp.cgroup: %s is not a directory of the cgroup v2 hierarchy (mounted at %s here): "
                                "set it to one, or leave it empty for the whole host" % (cgroup, cgroup2_root() or "nowhere"))
        pinned = {}
        for spec in layout.MAPS:
            path = os.path.join(pin_root, spec.name)
            try:
                fd = bpfsys.obj_get(path)
            except BpfSyscallError:
                raise DatapathError("pin_root: %s is not pinned: the data path is not loaded on this host; the TCP "
                                    "program reads its peer table" % path) from None
            try:
                pinned[spec.name] = bpfsys.map_info(fd).max_entries
            finally:
                os.close(fd)
        try:
            self._obj = libbpf.BpfObject(object_path)
            self._release.callback(self._obj.close)
            objects.check_layout(self._obj, pinned)
            missing = [n for n in [m.name for m in layout.TCP_MAPS] + [layout.TCP_EVENTS_MAP] if not self._obj.has_map(n)]
            if missing or layout.TCP_PROGRAM not in self._obj.programs():
                raise DatapathError("tcp.object: %s is not the TCP program's object (it lacks %s): build it from bpf/%s"
                                    % (object_path, ", ".join(missing) or layout.TCP_PROGRAM, objects.TCP_SOURCE))
            self._obj.pin_maps(pin_root, [m.name for m in layout.MAPS])
            self._obj.load()
            config = self._map(layout.TCP_MAPS[0])
            config.put(0, layout.TcpConfig(rto_min_us=settings.rto_min_us, delack_max_us=settings.delack_max_us,
                                           signal_hold_ns=settings.signal_hold_ns))
            self._ring = ringbuf.RingBuffer(self._obj.map_fd(layout.TCP_EVENTS_MAP))
            self._release.callback(self._ring.close)
            cg = os.open(cgroup, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                link = bpfsys.link_create(self._obj.prog_fd(layout.TCP_PROGRAM), cg, bpfsys.CGROUP_SOCK_OPS,
                                          "attach the TCP program to cgroup %s" % cgroup)
                self._release.callback(os.close, link)  # the last fd of the link: closing it detaches
            finally:
                os.close(cg)
        except Exception:
            self.close()
            raise

    def _map(self, spec) -> MapHandle:
        return MapHandle(spec, self._obj.map_fd(spec.name))

    def fileno(self) -> int:
        """Readable when records wait in the ring buffer."""
        return self._ring.fileno()

    def events(self) -> list:
        """The records that arrived since the last call (layout.TcpEvent)."""
        size = ctypes.sizeof(layout.TcpEvent)
        return [layout.TcpEvent.from_buffer_copy(r[:size]) for r in self._ring.consume() if len(r) >= size]

    def counters(self) -> dict:
        """edgeft_tcpctr summed over the CPUs; last_error: a failed setting's errno name, or None."""
        handle = self._map(layout.TCP_MAPS[1])
        per_slot = {name: handle.get(i) or [] for i, name in enumerate(layout.TCP_COUNTERS)}
        out = {name: sum(v.value for v in values) for name, values in per_slot.items() if name != "last_error"}
        codes = [ctypes.c_int64(v.value).value for v in per_slot["last_error"] if v.value]
        out["last_error"] = errno.errorcode.get(-codes[-1], str(codes[-1])) if codes else None
        return out

    def close(self) -> None:
        self._release.close()
