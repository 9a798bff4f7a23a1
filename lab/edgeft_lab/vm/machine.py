"""One qemu VM of the lab: its disk (a qcow2 overlay on the cached image), its NICs (a
management NIC on qemu's user network, ssh forwarded from 127.0.0.1 only; one tap per plane on
the lab's switches), its serial console log and its monitor socket.

qemu daemonizes and records its PID; it is stopped by that PID, and only after checking that
the process's command line names this VM's directory (a recycled PID is never signalled).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .. import procs
from ..errors import LabError, RefusedError
from . import paths
from .image import MGMT_NIC, Image, pci_slot

QEMU = "qemu-system-x86_64"
QEMU_IMG = "qemu-img"
QEMU_PACKAGES = {QEMU: "qemu-system-x86", QEMU_IMG: "qemu-utils"}
KVM_PROBE_TIMEOUT = 10.0  # a working KVM boots to the panic in 1-3 s
STOP_TIMEOUT = 5.0


@dataclass(frozen=True)
class Nic:
    name: str  # the guest's interface name, also qemu's netdev id
    switch_netns: str
    bridge: str
    tap: str  # the switch's port towards this VM (named after the VM, like a veth port)


@dataclass(frozen=True)
class VmSpec:
    host: str
    number: int  # 1.. within the lab: MAC addresses and the ssh port derive from it
    nics: tuple[Nic, ...]
    ssh_port: int
    disk: Path  # qcow2 overlay on the image
    memory_mib: int = 1024
    cpus: int = 1
    mtu: int | None = None

    def mac(self, nic_index: int) -> str:
        return f"52:54:00:ed:{self.number:02x}:{nic_index:02x}"

    @property
    def machine_id(self) -> str:
        return f"{self.number:08x}" + "ed9e0f7a" * 3  # 32 hex digits, one per VM


def require_qemu() -> None:
    missing = [f"{tool} (Debian package {pkg})" for tool, pkg in QEMU_PACKAGES.items() if shutil.which(tool) is None]
    if missing:
        raise RefusedError(f"VM hosts need {', '.join(missing)}: install it (scripts/bootstrap.sh does)")


def check_port_free(port: int, host: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            raise LabError(
                f"127.0.0.1:{port} (ssh of VM {host}) is already taken: stop what listens there, "
                f"or choose other ports with --ssh-port-base (EDGEFT_VM_SSH_PORT_BASE)"
            ) from None


def kvm_works(image: Image, work_dir: Path) -> bool:
    """Whether KVM runs a guest here: boot the image's kernel to its root-less panic under KVM.
    /dev/kvm may exist and still hang guests (nested virtualization), hence a real boot."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    log = work_dir / "kvm-probe.log"
    argv = [
        QEMU, "-accel", "kvm", "-cpu", "qemu64", "-m", "256", "-nodefaults", "-no-user-config", "-display", "none",
        "-no-reboot", "-serial", f"file:{log}", "-kernel", str(image.kernel), "-append", "console=ttyS0 panic=-1",
    ]
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=KVM_PROBE_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return False
    finally:
        text = log.read_text(errors="replace") if log.exists() else ""
        log.unlink(missing_ok=True)
    return proc.returncode == 0 and "Kernel panic" in text


def accel_args(accel: str) -> list[str]:
    if accel == "kvm":
        # `-cpu host` and `max` can fail under nested KVM (MSRs the host will not set).
        return ["-accel", "kvm", "-cpu", "qemu64"]
    # qemu64 rather than max: with AVX2 on offer the guest's glibc picks vector string
    # routines that TCG emulates far slower than the SSE2 ones.
    return ["-accel", "tcg,thread=multi", "-cpu", "qemu64"]


def qemu_argv(spec: VmSpec, image: Image, run_dir: Path, accel: str, tap_fds: list[int]) -> list[str]:
    vm_dir = paths.vm_dir(run_dir, spec.host)
    cmdline = " ".join([
        "root=/dev/vda", "rw", "console=ttyS0,115200", "panic=-1",
        f"systemd.hostname={spec.host}", f"systemd.machine_id={spec.machine_id}",
    ])
    argv = [
        QEMU, "-name", f"edgeft-{spec.host},process=edgeft-vm-{spec.host}", *accel_args(accel),
        "-machine", "pc", "-m", str(spec.memory_mib), "-smp", str(spec.cpus),
        "-nodefaults", "-no-user-config", "-display", "none",
        "-serial", f"file:{paths.console_log(run_dir, spec.host)}",
        "-kernel", str(image.kernel), "-initrd", str(image.initrd), "-append", cmdline,
        "-drive", f"file={spec.disk},if=virtio,format=qcow2,cache=unsafe",
        # restrict=on: the guest reaches nothing through it but the forwarded ssh port.
        "-netdev", f"user,id={MGMT_NIC},restrict=on,hostfwd=tcp:127.0.0.1:{spec.ssh_port}-:22",
        "-device", f"virtio-net-pci,netdev={MGMT_NIC},mac={spec.mac(0)},addr={pci_slot(0):#x}",
    ]
    for index, (nic, fd) in enumerate(zip(spec.nics, tap_fds), 1):
        argv += [
            "-netdev", f"tap,id={nic.name},fd={fd}",
            "-device", f"virtio-net-pci,netdev={nic.name},mac={spec.mac(index)},addr={pci_slot(index):#x}",
        ]
    argv += [
        "-qmp", f"unix:{paths.qmp_socket(run_dir, spec.host)},server=on,wait=off",
        "-pidfile", str(paths.pid_file(run_dir, spec.host)), "-daemonize",
    ]
    assert str(vm_dir) in " ".join(argv)  # stop() identifies the process by it
    return argv


def start(spec: VmSpec, image: Image, run_dir: Path, accel: str) -> int:
    """Create the VM's disk and cables and start qemu; returns its PID once it runs."""
    from .taps import open_tap

    paths.vm_dir(run_dir, spec.host).mkdir(parents=True, exist_ok=True)
    spec.disk.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [QEMU_IMG, "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(image.rootfs), str(spec.disk)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        raise LabError(f"qemu-img could not create the disk of VM {spec.host}: {proc.stderr.strip()}")
    fds: list[int] = []
    try:
        for nic in spec.nics:
            fds.append(open_tap(nic.switch_netns, nic.tap, nic.bridge, spec.mtu))
        for fd in fds:
            os.set_inheritable(fd, True)
        argv = qemu_argv(spec, image, run_dir, accel, fds)
        # -daemonize: qemu returns once the VM runs, with an error if it could not start it.
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, pass_fds=fds,
                              timeout=60, check=False)
    finally:
        for fd in fds:
            os.close(fd)
    if proc.returncode != 0:
        raise LabError(f"qemu could not start VM {spec.host}: {proc.stderr.strip() or proc.stdout.strip()}")
    pid = running_pid(run_dir, spec.host)
    if pid is None:
        raise LabError(f"qemu started VM {spec.host} but it is not running; see {paths.console_log(run_dir, spec.host)}")
    return pid


def _running(run_dir: Path, host: str) -> tuple[int, int] | None:
    """(PID, start time) of this VM's qemu, if it runs (its command line must name the VM's directory)."""
    try:
        pid = int(paths.pid_file(run_dir, host).read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, ValueError):
        return None
    started = procs.start_time(pid)
    if started is None or str(paths.vm_dir(run_dir, host)) + "/" not in cmdline or not procs.is_running(pid, started):
        return None
    return pid, started


def running_pid(run_dir: Path, host: str) -> int | None:
    """The PID of this VM's qemu, if it runs."""
    running = _running(run_dir, host)
    return running[0] if running else None


def stop(run_dir: Path, host: str) -> bool:
    """Stop the VM's qemu (a power cut: SIGTERM, then SIGKILL). False if it was not running."""
    running = _running(run_dir, host)
    if running is None:
        return False
    procs.stop(*running, timeout=STOP_TIMEOUT)
    return True


def console_tail(run_dir: Path, host: str, lines: int = 15) -> str:
    path = paths.console_log(run_dir, host)
    if not path.exists():
        return "(no console output)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
