"""Reaching a VM: ssh to its forwarded port on 127.0.0.1 with the image's key."""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import LabError

OPTIONS = (
    "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
    "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "ServerAliveInterval=5",
)
# What the inventory gives Ansible (the same options as one string).
ANSIBLE_SSH_ARGS = " ".join(OPTIONS)


def argv(key: Path, port: int, command: list[str]) -> list[str]:
    return ["ssh", "-i", str(key), "-p", str(port), *OPTIONS, "root@127.0.0.1", "--", shlex.join(command)]


def run(key: Path, port: int, command: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run(argv(key, port, command), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout, check=False)


def wait_reachable(
    key: Path, port: int, timeout: float, alive: Callable[[], bool], what: str, not_boot_id: str | None = None
) -> str:
    """Wait until ssh runs a command on the VM; returns its boot id. `alive()` false, or
    `timeout` passed: LabError. With `not_boot_id`, wait for a boot other than that one."""
    deadline = time.monotonic() + timeout
    while True:
        if not alive():
            raise LabError(f"{what}: qemu exited")
        try:
            proc = run(key, port, ["cat", "/proc/sys/kernel/random/boot_id"], timeout=15)
        except subprocess.TimeoutExpired:
            proc = None
        if proc is not None and proc.returncode == 0:
            boot_id = proc.stdout.strip()
            if boot_id and boot_id != not_boot_id:
                return boot_id
        if time.monotonic() > deadline:
            raise LabError(f"{what}: no ssh login within {timeout:.0f} s")
        time.sleep(1.0)
