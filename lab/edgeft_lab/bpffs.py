"""The lab's own mounts, outside /sys because `ip netns exec` remounts /sys: its bpffs, and its
view of the cgroup v2 hierarchy (cgroups.py)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

MNT_DETACH = 2
_libc = ctypes.CDLL(None, use_errno=True)


def is_mounted(path: Path) -> bool:
    target = str(path)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == target for line in f)


def mount(path: Path, fstype: bytes = b"bpf", data: bytes | None = b"mode=0700") -> None:
    path.mkdir(parents=True, exist_ok=True)
    if _libc.mount(fstype, str(path).encode(), fstype, 0, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mounting {fstype.decode()} at {path}: {os.strerror(err)}")


def unmount(path: Path) -> None:
    """Lazy unmount (pins held open by a program keep working until released), then rmdir."""
    while is_mounted(path):  # stacked mounts: remove them all
        if _libc.umount2(str(path).encode(), MNT_DETACH) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"unmounting {path}: {os.strerror(err)}")
    try:
        path.rmdir()
    except FileNotFoundError:
        pass
