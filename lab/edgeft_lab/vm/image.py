"""The VM image: a Debian root filesystem from Debian packages (mmdebstrap), made into an ext4
disk image, with the kernel and initrd beside it for qemu's direct kernel boot.

Cached by its inputs (suite, mirrors, packages, NIC names, size, and the format of the
customization below): a second build with the same inputs returns at once. The cache holds the
ssh key that logs in as root on the VMs; it lives in a root-only directory.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import LabError, RefusedError

# Bump when customize() or the boot layout changes: old images are then rebuilt.
FORMAT = 1
CACHE_ROOT = Path(os.environ.get("EDGEFT_VM_CACHE", "/var/cache/edgeft/vm-images"))
GIB = 1 << 30
# The unpacked tree (~1.3 GB) and the image holding it exist at once during a build.
BUILD_FREE_BYTES = 4 * GIB
MKE2FS_TIMEOUT = 600
MMDEBSTRAP_TIMEOUT = 1800

SUITE = "bookworm"
MIRRORS = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
# What the collection needs on a target, installed up front: the VMs reach no network but the lab's.
# The object loader's target: libbpf and pyroute2, and no compiler, LLVM, bcc or kernel headers
# (the VM scenario checks that none is there).
PACKAGES = (
    "linux-image-amd64", "initramfs-tools",
    "systemd-sysv", "udev", "dbus", "kmod", "procps", "iproute2", "iputils-ping", "nftables",
    "openssh-server", "python3", "python3-apt", "python3-pyroute2", "libbpf1",
)
# Guest NICs by PCI slot (qemu's -device addr=): the management NIC, then one per plane.
MGMT_NIC = "mgmt0"
FIRST_PCI_SLOT = 3
MGMT_ADDRESS = "10.0.2.15/24"  # qemu user networking's guest address; no gateway, no DNS


def pci_slot(nic_index: int) -> int:
    """Slot of NIC `nic_index` (0 = management)."""
    return FIRST_PCI_SLOT + nic_index


@dataclass(frozen=True)
class ImageSpec:
    nics: tuple[str, ...]  # the plane NICs, in plane order
    suite: str = SUITE
    mirrors: tuple[str, ...] = MIRRORS
    packages: tuple[str, ...] = PACKAGES
    size_mib: int = 4096

    def key(self) -> str:
        doc = {**asdict(self), "format": FORMAT}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Image:
    dir: Path
    info: dict = field(default_factory=dict)

    @property
    def rootfs(self) -> Path:
        return self.dir / "rootfs.img"

    @property
    def kernel(self) -> Path:
        return self.dir / "vmlinuz"

    @property
    def initrd(self) -> Path:
        return self.dir / "initrd.img"

    @property
    def ssh_key(self) -> Path:
        return self.dir / "id_ed25519"

    @property
    def kernel_release(self) -> str:
        return self.info["kernel_release"]


INFO = "image.json"
TOOLS = {"mmdebstrap": "mmdebstrap", "mke2fs": "e2fsprogs", "ssh-keygen": "openssh-client"}


def cached(spec: ImageSpec, cache_root: Path = CACHE_ROOT) -> Image | None:
    target = cache_root / spec.key()
    try:
        info = json.loads((target / INFO).read_text())
    except (OSError, ValueError):
        return None
    return Image(target, info)


def ensure_image(
    spec: ImageSpec, cache_root: Path = CACHE_ROOT, log: Callable[[str], None] = lambda m: None, rebuild: bool = False
) -> Image:
    """The image for `spec`, built if the cache has none. Concurrent callers build it once."""
    if not rebuild and (image := cached(spec, cache_root)) is not None:
        return image
    cache_root.mkdir(parents=True, exist_ok=True)
    os.chmod(cache_root, 0o700)  # the ssh key logs in as root on the VMs
    with _locked(cache_root / ".lock"):
        if not rebuild and (image := cached(spec, cache_root)) is not None:
            return image  # built by another caller while we waited
        check_build_prerequisites(cache_root)
        target = cache_root / spec.key()
        work = cache_root / f"{spec.key()}.build-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        try:
            started = time.monotonic()
            info = _build(spec, work, log)
            info["build_seconds"] = round(time.monotonic() - started, 1)
            (work / INFO).write_text(json.dumps(info, indent=2) + "\n")
            shutil.rmtree(target, ignore_errors=True)
            work.rename(target)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        log(f"image {spec.key()} built in {info['build_seconds']:.0f} s ({cache_root})")
        return Image(target, info)


def check_build_prerequisites(cache_root: Path) -> None:
    missing = [f"{tool} (Debian package {package})" for tool, package in TOOLS.items() if shutil.which(tool) is None]
    if missing:
        raise RefusedError(f"building the VM image needs {', '.join(missing)}: install it (scripts/bootstrap.sh does)")
    free = shutil.disk_usage(cache_root).free
    if free < BUILD_FREE_BYTES:
        raise LabError(
            f"not enough disk for the VM image: {free / GIB:.1f} GiB free under {cache_root}, "
            f"the build needs {BUILD_FREE_BYTES / GIB:.0f} GiB; free some, or point EDGEFT_VM_CACHE elsewhere"
        )


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(argv: list[str], what: str, timeout: float) -> None:
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise LabError(f"{what} failed (exit {proc.returncode}):\n{tail}")


def _build(spec: ImageSpec, work: Path, log: Callable[[str], None]) -> dict:
    root = work / "root"
    log(f"building VM image {spec.key()}: Debian {spec.suite} from {spec.mirrors[0].split()[1]} (about 2 minutes)")
    # Mirrors given explicitly: with none, mmdebstrap would read sources from a non-tty stdin.
    _run(
        ["mmdebstrap", "--variant=apt", "--components=main", "--aptopt=Acquire::Retries \"3\"",
         "--include=" + ",".join(spec.packages), spec.suite, str(root), *spec.mirrors],
        "mmdebstrap", MMDEBSTRAP_TIMEOUT,
    )
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "edgeft-vm-lab", "-f", str(work / "id_ed25519")],
         "ssh-keygen", 60)
    customize(root, spec, (work / "id_ed25519.pub").read_text())
    kernels = sorted((root / "boot").glob("vmlinuz-*"))
    if not kernels:
        raise LabError("the image has no kernel in /boot (linux-image-amd64 missing from the packages?)")
    release = kernels[-1].name.removeprefix("vmlinuz-")
    shutil.copy2(kernels[-1], work / "vmlinuz")
    shutil.copy2(root / "boot" / f"initrd.img-{release}", work / "initrd.img")
    log("making the ext4 disk image")
    _run(["mke2fs", "-q", "-F", "-t", "ext4", "-L", "edgeft-root", "-d", str(root), str(work / "rootfs.img"),
          f"{spec.size_mib}M"], "mke2fs", MKE2FS_TIMEOUT)
    shutil.rmtree(root)
    return {"key": spec.key(), "spec": asdict(spec), "format": FORMAT, "kernel_release": release}


def customize(root: Path, spec: ImageSpec, public_key: str) -> None:
    """What makes the tree a bootable, reachable VM: fstab, root's ssh key, fixed NIC names,
    the management address, networkd and sshd enabled. Hostname and machine id come per VM
    from the kernel command line."""

    def write(rel: str, text: str, mode: int = 0o644) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.chmod(path, mode)

    write("etc/fstab", "/dev/vda / ext4 rw,errors=remount-ro 0 1\n")
    write("etc/hosts", "127.0.0.1 localhost\n::1 localhost\n")
    write("etc/machine-id", "")  # every VM gets its own (systemd.machine_id=), so bond MACs differ
    (root / "root/.ssh").mkdir(mode=0o700, exist_ok=True)
    write("root/.ssh/authorized_keys", public_key, 0o600)
    write("etc/ssh/sshd_config.d/edgeft-lab.conf", "PermitRootLogin prohibit-password\nUseDNS no\n")
    for index, nic in enumerate((MGMT_NIC, *spec.nics)):
        write(
            f"etc/systemd/network/10-edgeft-{nic}.link",
            f"[Match]\nPath=pci-0000:00:{pci_slot(index):02x}.0\n\n[Link]\nName={nic}\n",
        )
    write(
        f"etc/systemd/network/10-edgeft-{MGMT_NIC}.network",
        f"[Match]\nName={MGMT_NIC}\n\n[Network]\nAddress={MGMT_ADDRESS}\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n",
    )
    _run(["chroot", str(root), "systemctl", "enable", "systemd-networkd.service", "ssh.service"], "systemctl enable", 60)
