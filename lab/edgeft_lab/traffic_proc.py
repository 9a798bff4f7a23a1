"""Measuring processes, each living in one lab namespace.

A sender or receiver runs in a process of its own (not a thread), so neither the test
process's GIL nor the other end's work distorts its timing. Each is a fresh interpreter
(`python -m edgeft_lab.traffic_worker FD`: nothing inherited from the caller, and unlike
multiprocessing's spawn it never re-runs the caller's main script) that moves itself into its
namespace with setns first. Protocol over a socketpair carrying pickled messages
(multiprocessing.connection): the parent sends (netns, cgroup, function, config); the child
joins the host's cgroup (lab/cgroups.py) if there is one, and answers
("ready", info) once set up and ("result", payload) after the parent's "stop"; ("error", text)
ends it at any point. A child whose parent is gone reads EOF and stops.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from pyroute2 import netns as pyroute2_netns

from . import cgroups, netns
from .errors import LabError

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # for the child's imports
START_TIMEOUT = 20.0  # a spawned interpreter imports the package first; slow on a busy machine
FINISH_TIMEOUT = 20.0
COMMAND_INTERVAL_NS = 5_000_000  # how often a busy worker looks for a command


class Control:
    """The worker's end of the pipe."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._next_check = 0

    def ready(self, **info: Any) -> None:
        self._conn.send(("ready", info))

    def receive(self, timeout: float = START_TIMEOUT) -> Any:
        """Wait for the parent's next message (e.g. the receiver's port for a sender)."""
        if not self._conn.poll(timeout):
            raise TimeoutError(f"no word from the parent within {timeout:.0f} s")
        return self._conn.recv()

    def command(self, now: int | None = None) -> str | None:
        """The parent's next command, if any; "stop" if the parent is gone. Given `now`, looks
        at most every COMMAND_INTERVAL_NS (a pipe poll costs a few system calls)."""
        if now is not None:
            if now < self._next_check:
                return None
            self._next_check = now + COMMAND_INTERVAL_NS
        try:
            return self._conn.recv() if self._conn.poll() else None
        except (EOFError, OSError):
            return "stop"

    def result(self, payload: dict[str, Any]) -> None:
        self._conn.send(("result", payload))


def _raise_priority() -> None:
    """Paced workers must run when due, also on a busy machine, or the machine's load shows up
    as network gaps. They sleep most of the time, so the lowest real-time priority costs
    others little (and the kernel's RT throttling still bounds it); nice -10 where RT is refused."""
    try:
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1))
    except OSError:
        try:
            os.nice(-10)
        except OSError:
            pass  # unprivileged: measure at normal priority


def child_main(fd: int) -> None:
    """The worker process: read its job from the parent, enter the namespace, run."""
    conn = Connection(fd)
    try:
        ns, cgroup, target, config = conn.recv()
        cgroups.join(cgroup)  # before setns: the TCP program of the host sees this process's sockets
        ns_fd = os.open(netns.path(ns), os.O_RDONLY)
        try:
            pyroute2_netns.setns(ns_fd)
        finally:
            os.close(ns_fd)
        if config.get("realtime"):
            _raise_priority()
        target(Control(conn), config)
    except Exception as exc:  # reported to the parent, which raises it as a LabError
        try:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
        except OSError:
            pass  # the parent is gone: nobody to tell


class Worker:
    """The parent's handle on one measuring process."""

    def __init__(self, label: str, ns: str, target: Callable[[Control, dict[str, Any]], None], config: dict[str, Any],
                 cgroup: Path | None = None) -> None:
        if not netns.exists(ns):
            raise LabError(f"namespace {ns} does not exist: is the lab up?")
        self.label = label
        self._job = (ns, cgroup, target, config)
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None

    def launch(self) -> None:
        """Start the process (it becomes ready in the background: see wait_ready)."""
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "edgeft_lab.traffic_worker", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env,
                start_new_session=True,  # a Ctrl-C is the parent's to handle: it stops the workers
            )
        finally:
            theirs.close()  # the child holds it now, so its exit reads as EOF here
        self._conn = Connection(ours.detach())
        self._conn.send(self._job)

    def wait_ready(self, timeout: float = START_TIMEOUT) -> dict[str, Any]:
        """What the worker reported once set up."""
        return self._expect("ready", timeout)

    def command(self, message: Any) -> None:
        if self._conn is not None:
            self._conn.send(message)

    def finish(self, timeout: float = FINISH_TIMEOUT) -> dict[str, Any]:
        """Ask the worker to stop; returns its result."""
        try:
            self.command("stop")
        except OSError:
            pass  # already gone: _expect reports how
        payload = self._expect("result", timeout)
        self.kill()
        return payload

    def kill(self) -> None:
        """End the process if it still runs and reap it (idempotent)."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                self._proc.wait(0.5)  # it normally exits right after its result
            except subprocess.TimeoutExpired:
                self._proc.terminate()
                try:
                    self._proc.wait(2.0)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _expect(self, kind: str, timeout: float) -> dict[str, Any]:
        if self._conn is None:
            raise LabError(f"traffic {self.label}: not running")
        try:
            if not self._conn.poll(timeout):
                raise LabError(f"traffic {self.label}: no {kind} report within {timeout:.0f} s")
            message, payload = self._conn.recv()
        except (EOFError, OSError):
            code = self._proc.wait() if self._proc is not None else None
            self.kill()
            raise LabError(f"traffic {self.label}: the process ended unexpectedly (exit code {code})") from None
        except LabError:
            self.kill()
            raise
        if message == "error":
            self.kill()
            raise LabError(f"traffic {self.label}: {payload}")
        return payload
