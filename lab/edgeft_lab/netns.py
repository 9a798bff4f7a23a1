"""Network namespace plumbing.

Work inside a namespace runs in a short-lived thread that setns()es into it and dies with it,
so the calling thread never leaves the root namespace (no risk of "forgetting" to switch
back). Netlink and inet sockets keep the namespace they were created in, so a socket made
in that thread can then be used from anywhere.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from pyroute2 import IPRoute
from pyroute2 import netns as pyroute2_netns

NETNS_DIR = Path(pyroute2_netns.NETNS_RUN_DIR)  # /var/run/netns, shared with iproute2
CLONE_NEWNET = 0x40000000

T = TypeVar("T")


def path(name: str) -> Path:
    return NETNS_DIR / name


def exists(name: str) -> bool:
    return path(name).exists()


def list_all() -> list[str]:
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def create(name: str) -> None:
    pyroute2_netns.create(name)


def remove(name: str) -> None:
    pyroute2_netns.remove(name)


def run_in(name: str, fn: Callable[[], T]) -> T:
    """Call fn() in a thread that lives in namespace `name`; return its result or raise its error."""
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            fd = os.open(path(name), os.O_RDONLY)
            try:
                pyroute2_netns.setns(fd)
            finally:
                os.close(fd)
            outcome["result"] = fn()
        except BaseException as exc:  # handed to the caller below
            outcome["error"] = exc

    thread = threading.Thread(target=target, name=f"netns:{name}", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["result"]  # type: ignore[return-value]


def iproute(name: str) -> IPRoute:
    """An IPRoute socket bound to namespace `name` (the caller closes it)."""
    return run_in(name, IPRoute)


@contextmanager
def ipr(name: str) -> Iterator[IPRoute]:
    sock = iproute(name)
    try:
        yield sock
    finally:
        sock.close()


def open_socket(name: str, family: int, kind: int, proto: int = 0) -> socket.socket:
    """An inet socket living in namespace `name` (tests and benchmarks send traffic with it)."""
    return run_in(name, lambda: socket.socket(family, kind, proto))


def write_sysctls(name: str, values: dict[str, str]) -> None:
    """Set net.* sysctls of namespace `name`; /proc/sys/net resolves to the writer's namespace."""

    def write() -> None:
        for key, value in values.items():
            Path("/proc/sys", key.replace(".", "/")).write_text(value)

    run_in(name, write)


def read_sysctl(name: str, key: str) -> str:
    return run_in(name, lambda: Path("/proc/sys", key.replace(".", "/")).read_text().strip())


def exec_argv(name: str, argv: list[str]) -> list[str]:
    """Argument list running argv inside namespace `name`."""
    return ["ip", "netns", "exec", name, *argv]
