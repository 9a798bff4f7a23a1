"""Background processes the lab starts (flappers): identified by PID *and* start time, so a
recycled PID is never signalled. Nothing is ever killed by name."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    return text[text.rindex(")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """The process start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def is_running(pid: int, started: int) -> bool:
    fields = _stat_fields(pid)
    if fields is None or int(fields[19]) != started:
        return False
    if fields[0] in ("Z", "X"):
        _reap(pid)
        return False
    return True


def _reap(pid: int) -> None:
    """Collect our own exited child so it does not linger as a zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child: init reaps it


def stop(pid: int, started: int, timeout: float = 2.0) -> None:
    """SIGTERM (the flapper restores its link and exits), SIGKILL if it does not."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not is_running(pid, started):
            return
        os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not is_running(pid, started):
                return
            time.sleep(0.01)


def spawn(argv: list[str], log_path: Path, env: dict[str, str]) -> tuple[int, int]:
    """Start a detached process (own session: a Ctrl-C on the CLI does not reach it)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/", env=env, start_new_session=True
        )
    started = start_time(proc.pid)
    if started is None:
        raise RuntimeError(f"background process {argv} exited at once; see {log_path}")
    return proc.pid, started
