"""A lab whose hosts are qemu VMs: the lab builds the switches, this module the VMs on them.

up: checks first (root, qemu, free ports, disk), then the image (cached), the switches, the
VMs, a wait for ssh on all of them, and the inventory; any failure stops what was started,
keeps the consoles and removes the rest. down: VMs stopped by PID, consoles kept, disks and
switches removed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import LabError, RefusedError
from ..lab import RUN_ROOT, Lab
from ..plan import L2_BRIDGE
from ..topology import Topology
from . import machine, paths, ssh
from .image import CACHE_ROOT, GIB, Image, ImageSpec, ensure_image
from .inventory import write_vm_inventory

ACCELS = ("auto", "kvm", "tcg")
DEFAULT_SSH_PORT_BASE = int(os.environ.get("EDGEFT_VM_SSH_PORT_BASE", "2230"))
DISK_ROOT = Path(os.environ.get("EDGEFT_VM_DISKS", "/var/lib/edgeft/vm-disks"))
LOG_ROOT = Path(os.environ.get("EDGEFT_VM_LOGS", "/var/log/edgeft-vm"))
KEEP_LOG_RUNS = 10
DISK_FREE_PER_VM = 1 * GIB  # the overlay grows with what the guest writes (compiles, journals)
BOOT_TIMEOUT = {"kvm": 180.0, "tcg": 900.0}
STATE_FILE = "vms.json"


def require_root() -> None:
    if os.geteuid() != 0:
        raise RefusedError("VM labs need root (switch namespaces, taps, the image cache): rerun with sudo")


def _existing(path: Path) -> Path:
    """The path, or its nearest existing parent (where it would be created)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


class VmLab:
    def __init__(
        self,
        topology: Topology | str | Path = "vm",
        name: str | None = None,
        *,
        accel: str = "auto",
        ssh_port_base: int = DEFAULT_SSH_PORT_BASE,
        memory_mib: int = 1024,
        cache_root: Path = CACHE_ROOT,
        disk_root: Path = DISK_ROOT,
        log_root: Path = LOG_ROOT,
        run_root: Path = RUN_ROOT,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.lab = Lab(topology, name, run_root=run_root, log=log)
        if self.lab.topology.machines != "vm":
            raise RefusedError(f"--topology: {self.lab.topology.source} has no VM hosts (machines: vm); the VM lab's is 'vm'")
        if accel not in ACCELS:
            raise RefusedError(f"--accel must be one of {', '.join(ACCELS)}, not {accel!r}")
        highest = 65536 - len(self.lab.plan.hosts)  # VM n uses base + n - 1
        if not 1024 <= ssh_port_base <= highest:
            raise RefusedError(f"--ssh-port-base must be 1024 to {highest} ({len(self.lab.plan.hosts)} VMs), not {ssh_port_base}")
        if not 512 <= memory_mib <= 16384:
            raise RefusedError(f"--memory must be 512 to 16384 MiB, not {memory_mib}")
        self.accel = accel
        self.ssh_port_base = ssh_port_base
        self.memory_mib = memory_mib
        self.cache_root = cache_root
        self.disk_dir = disk_root / self.lab.name
        self.log_root = log_root
        self._log = log or (lambda message: None)

    @property
    def name(self) -> str:
        return self.lab.name

    @property
    def run_dir(self) -> Path:
        return self.lab.run_dir

    @property
    def hosts(self) -> list[str]:
        return [h.name for h in self.lab.plan.hosts]

    def image_spec(self) -> ImageSpec:
        return ImageSpec(nics=tuple(p.nic for p in self.lab.topology.planes))

    def specs(self) -> list[machine.VmSpec]:
        specs = []
        for number, host in enumerate(self.lab.plan.hosts, 1):
            nics = []
            for port in host.ports:
                switch = self.lab.plan.switch(port.switch)
                nics.append(machine.Nic(port.ifname, switch.netns, L2_BRIDGE, host.name))
            specs.append(
                machine.VmSpec(
                    host=host.name, number=number, nics=tuple(nics), ssh_port=self.ssh_port_base + number - 1,
                    disk=self.disk_dir / f"{host.name}.qcow2", memory_mib=self.memory_mib, mtu=self.lab.topology.mtu,
                )
            )
        return specs

    # ----------------------------------------------------------------- state

    def state(self) -> dict[str, Any] | None:
        try:
            return json.loads((paths.vm_root(self.run_dir) / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None

    def running(self) -> dict[str, int | None]:
        return {host: machine.running_pid(self.run_dir, host) for host in self.hosts}

    def is_up(self) -> bool:
        return self.state() is not None and self.lab.is_up() and all(self.running().values())

    def image(self) -> Image:
        state = self.state()
        if state is None:
            raise LabError(f"VM lab {self.name} is not up: run 'edgeft-vm --name {self.name} up'")
        return Image(Path(state["image_dir"]), state["image"])

    # ----------------------------------------------------------------- lifecycle

    def check(self) -> None:
        """Everything that can be refused before anything is made."""
        require_root()
        machine.require_qemu()
        for spec in self.specs():
            machine.check_port_free(spec.ssh_port, spec.host)
        free, need = shutil.disk_usage(_existing(self.disk_dir)).free, DISK_FREE_PER_VM * len(self.hosts)
        if free < need:
            raise LabError(
                f"not enough disk for {len(self.hosts)} VM disks: {free / GIB:.1f} GiB free under {self.disk_dir}, "
                f"need {need / GIB:.0f} GiB; free some, or point EDGEFT_VM_DISKS elsewhere"
            )

    def up(self, inventory: Path | None = None, rebuild_image: bool = False) -> bool:
        """Bring the VMs up; False if they already run (the inventory is rewritten)."""
        if self.is_up() and not rebuild_image:
            if inventory is not None:
                self.write_inventory(inventory)
            return False
        if self.state() is not None or self.lab.is_up() or any(self.running().values()):
            self._log(f"VM lab {self.name}: removing what an earlier run left")
            self.down()
        self.check()
        image = ensure_image(self.image_spec(), self.cache_root, self._log, rebuild=rebuild_image)
        accel = self._choose_accel(image)
        specs = self.specs()
        started = time.monotonic()
        try:
            self.disk_dir.mkdir(parents=True, exist_ok=True)
            self.lab.up()
            for spec in specs:
                machine.start(spec, image, self.run_dir, accel)
            timeout = BOOT_TIMEOUT[accel]
            for spec in specs:
                ssh.wait_reachable(
                    image.ssh_key, spec.ssh_port, timeout,
                    alive=lambda host=spec.host: machine.running_pid(self.run_dir, host) is not None,
                    what=f"VM {spec.host}",
                )
        except BaseException as exc:
            consoles = self._fail_report()
            self.down()
            if isinstance(exc, LabError):
                raise LabError(f"{exc}\n{consoles}") from None
            raise
        state = {
            "accel": accel, "image_dir": str(image.dir), "image": image.info,
            "ports": {s.host: s.ssh_port for s in specs}, "boot_seconds": round(time.monotonic() - started, 1),
        }
        (paths.vm_root(self.run_dir) / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")
        self._log(f"VM lab {self.name}: {len(self.hosts)} VMs up under {accel.upper()} in {state['boot_seconds']:.0f} s")
        if inventory is not None:
            self.write_inventory(inventory)
        return True

    def down(self) -> bool:
        """Stop every VM, keep their consoles under the log directory, remove disks and switches."""
        existed = self.state() is not None or self.lab.is_up() or any(self.running().values())
        for host in self.hosts:
            machine.stop(self.run_dir, host)
        kept = self.keep_consoles()
        if kept is not None:
            self._log(f"VM consoles kept in {kept}")
        shutil.rmtree(self.disk_dir, ignore_errors=True)
        existed = self.lab.down() or existed
        return existed

    def _choose_accel(self, image: Image) -> str:
        if self.accel == "tcg":
            return "tcg"
        works = machine.kvm_works(image, self.cache_root)
        if self.accel == "kvm" and not works:
            raise LabError("--accel kvm: KVM does not run a guest here (no /dev/kvm access, or the guest hangs); use --accel tcg")
        if not works:
            self._log("KVM does not run guests here: using TCG (software emulation, several times slower)")
        return "kvm" if works else "tcg"

    def _fail_report(self) -> str:
        return "\n".join(f"--- console of {h} (last lines) ---\n{machine.console_tail(self.run_dir, h)}" for h in self.hosts)

    def keep_consoles(self) -> Path | None:
        """Copy the consoles to <log root>/<lab>-<UTC time>/ and keep the last runs only."""
        logs = [(h, paths.console_log(self.run_dir, h)) for h in self.hosts]
        logs = [(h, p) for h, p in logs if p.exists()]
        if not logs:
            return None
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        target = self.log_root / f"{self.name}-{stamp}"
        target.mkdir(parents=True, exist_ok=True)
        for host, path in logs:
            shutil.copy2(path, target / f"{host}.console.log")
        runs = sorted(self.log_root.glob(f"{self.name}-*"))
        for old in runs[:-KEEP_LOG_RUNS]:
            shutil.rmtree(old, ignore_errors=True)
        return target

    # ----------------------------------------------------------------- use

    def write_inventory(self, path: Path) -> None:
        state = self.state() or {}
        write_vm_inventory(self.lab.plan, self.lab.bpffs, state.get("ports", {}), self.image().ssh_key, path)

    def port(self, host: str) -> int:
        self.lab.plan.host(host)
        self.image()  # refuses a lab that is not up
        return int((self.state() or {})["ports"][host])

    def ssh(self, host: str, command: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess:
        return ssh.run(self.image().ssh_key, self.port(host), command, timeout)

    def reboot(self, host: str) -> float:
        """Reboot the guest (systemd's reboot, qemu keeps its cables) and wait for ssh; seconds taken."""
        key, port = self.image().ssh_key, self.port(host)
        before = ssh.wait_reachable(key, port, 30, lambda: True, f"VM {host}")
        started = time.monotonic()
        ssh.run(key, port, ["systemctl", "reboot"], timeout=30)
        accel = (self.state() or {}).get("accel", "tcg")
        ssh.wait_reachable(
            key, port, BOOT_TIMEOUT[accel], lambda: machine.running_pid(self.run_dir, host) is not None,
            f"VM {host} after reboot", not_boot_id=before,
        )
        return time.monotonic() - started
