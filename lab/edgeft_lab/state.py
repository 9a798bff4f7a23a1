"""The lab's state file and lock under /run/edgeft-lab/<name>/.

The state file is also the intent log: every namespace and mount is recorded (and the file
flushed to disk) BEFORE it is created, so `down` can undo an `up` that crashed or was killed
at any point. Active faults, including flapper PIDs, are recorded here too.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .vm.paths import VM_DIR

RUN_ROOT = Path("/run/edgeft-lab")
STATE_VERSION = 1

PHASE_BUILDING = "building"
PHASE_UP = "up"
PHASE_TEARING_DOWN = "tearing-down"


@dataclass
class LabState:
    name: str
    topology: dict[str, Any]  # normalized topology document (Topology.to_dict())
    source: str  # the topology file it came from
    fingerprint: str
    phase: str = PHASE_BUILDING
    created_at: float = field(default_factory=time.time)
    namespaces: list[str] = field(default_factory=list)  # intended or created, in order
    mounts: list[str] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    version: int = STATE_VERSION

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> LabState:
        known = {k: v for k, v in doc.items() if k in cls.__dataclass_fields__}
        return cls(**known)


class StateStore:
    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.path = run_dir / "state.json"
        self.lock_path = run_dir / "lock"

    def load(self) -> LabState | None:
        try:
            return LabState.from_json(json.loads(self.path.read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, TypeError):
            # A torn or foreign file: keep what can be used for cleanup.
            return None

    def save(self, state: LabState) -> None:
        """Atomic and durable: an interrupted write never leaves a half file."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(asdict(state), f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def remove(self) -> None:
        for p in (self.path, self.path.with_suffix(".tmp")):
            p.unlink(missing_ok=True)

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Serialize lab operations on this lab name across processes."""
        while True:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            # `down` removes the lock file; if that happened while we waited, lock the new one.
            try:
                same = os.stat(self.lock_path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        try:
            yield
        finally:
            os.close(fd)

    def remove_run_dir(self) -> None:
        """Remove the lab's run directory once nothing is mounted below it (called under the lock)."""
        for leftover in self.run_dir.glob("*.log"):
            leftover.unlink(missing_ok=True)
        # What deploys wrote for the lab's hosts (inventory: edgeft_state_dir, edgeft_src_dir),
        # and the VMs' sockets, PID files and consoles (kept elsewhere by edgeft-vm down first).
        for owned in ("state", "src", VM_DIR):
            shutil.rmtree(self.run_dir / owned, ignore_errors=True)
        self.remove()
        self.lock_path.unlink(missing_ok=True)
        try:
            self.run_dir.rmdir()
        except OSError:
            pass  # something unexpected is inside: leave it for a human
