"""A cgroup v2 directory per lab host, for the agents' TCP program (docs/tcp.md).

On a real host the agent attaches the program to the cgroup v2 root: every process of the host.
The lab's hosts are namespaces of one machine, so that root would be the machine's. Instead the
lab mounts the cgroup v2 hierarchy once more inside its run directory (<run dir>/cgroup: outside
/sys, which `ip netns exec` remounts without cgroups, like the lab's bpffs), gives each host
<that mount>/edgeft-lab-<lab>/<host>, points the host's agent there (the inventory's
edgeft_agent_tcp_cgroup), and starts what it runs in a host (traffic, demo ranks, agents) inside
it. Nothing else of the machine is in these cgroups, so the programs never see the machine's own
sockets. Removed with the lab; a process still in one is moved back to the root first (never
signalled). A machine without cgroup v2 gets a lab without them (its agents report the program
as not attached).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from . import bpffs

PREFIX = "edgeft-lab-"


def mount_point(run_dir: Path) -> Path:
    return run_dir / "cgroup"


def host_dir(run_dir: Path, lab: str, host: str) -> Path:
    """A host's cgroup (a pure function of the lab's run directory, name and host)."""
    return mount_point(run_dir) / (PREFIX + lab) / host


def create(run_dir: Path, lab: str, hosts: list[str]) -> bool:
    """Mount the hierarchy and make the hosts' cgroups; False where the kernel has no cgroup v2."""
    top = mount_point(run_dir)
    if not bpffs.is_mounted(top):
        try:
            bpffs.mount(top, b"cgroup2", None)
        except OSError:
            top.rmdir()
            return False
    (top / (PREFIX + lab)).mkdir(exist_ok=True)
    for host in hosts:
        (top / (PREFIX + lab) / host).mkdir(exist_ok=True)
    return True


def remove(run_dir: Path, lab: str) -> None:
    """Remove the lab's cgroups (not the mount: the lab's teardown unmounts it)."""
    top = mount_point(run_dir)
    base = top / (PREFIX + lab)
    if not bpffs.is_mounted(top) or not base.is_dir():
        return
    for child in [p for p in base.iterdir() if p.is_dir()] + [base]:
        _remove_one(child, top)


def _remove_one(path: Path, top: Path) -> None:
    deadline = time.monotonic() + 5.0
    while True:
        try:
            pids = (path / "cgroup.procs").read_text().split()
        except FileNotFoundError:
            return
        for pid in pids:
            try:
                (top / "cgroup.procs").write_text(pid)
            except OSError:
                pass  # exited meanwhile
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def join(path: Path | None) -> None:
    """Move the calling process into path (no-op for None)."""
    if path is not None:
        (path / "cgroup.procs").write_text(str(os.getpid()))


def wrap(path: Path | None, argv: list[str]) -> list[str]:
    """argv started inside the cgroup at path: a shell joins it and execs argv (the PID stays the
    program's own). `ip netns exec` comes after the join."""
    if path is None:
        return list(argv)
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(path / "cgroup.procs"), *argv]
