"""Where a VM lab keeps each VM's small files: <lab run dir>/vm/<host>/ (the disks live on disk,
under the VM lab's disk directory, not in the lab's run directory on tmpfs)."""

from __future__ import annotations

from pathlib import Path

VM_DIR = "vm"


def vm_root(run_dir: Path) -> Path:
    return run_dir / VM_DIR


def vm_dir(run_dir: Path, host: str) -> Path:
    return vm_root(run_dir) / host


def qmp_socket(run_dir: Path, host: str) -> Path:
    return vm_dir(run_dir, host) / "qmp.sock"


def pid_file(run_dir: Path, host: str) -> Path:
    return vm_dir(run_dir, host) / "qemu.pid"


def console_log(run_dir: Path, host: str) -> Path:
    return vm_dir(run_dir, host) / "console.log"
