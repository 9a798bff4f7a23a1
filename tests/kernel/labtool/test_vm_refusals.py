"""Bad input for bin/edgeft-vm and VmLab: each is refused with a clear message naming the fix,
before anything is made (no namespaces, no run directory, no qemu, no VM disk).

Every lab here has its own name (never a developer's `vm` lab) and ssh ports picked free
away from 2230-2233; no VM is booted (the molecule scenario does that).
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from edgeft_lab import LabError, load_topology
from edgeft_lab import netns as lab_netns
from edgeft_lab.state import RUN_ROOT
from edgeft_lab.vm import vmlab as vmlab_module
from edgeft_lab.vm.vmlab import VmLab
from lab_helpers import assert_nothing_left, needs_root, unique_name
from repo import REPO

pytestmark = needs_root

EDGEFT_VM = REPO / "bin" / "edgeft-vm"
RESERVED_PORTS = range(2200, 2300)  # a developer's VM lab (2230-2233) and its neighbourhood
NOBODY = 65534
HOSTS = ("r1h1", "r1h2", "r2h1", "r2h2")  # lab/topologies/vm.yml, in ssh port order
CLI_TIMEOUT = 60  # a refusal takes a second; more means it did not refuse


# ------------------------------------------------------------------ helpers


def free_port_base(count: int = len(HOSTS)) -> int:
    """A base port with `count` free ports on 127.0.0.1 from it, away from the reserved ones."""
    for _attempt in range(200):
        base = random.randint(20000, 60000)
        if any(port in RESERVED_PORTS for port in range(base, base + count)):
            continue
        probes = []
        try:
            for port in range(base, base + count):
                probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                probes.append(probe)
                probe.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
    raise RuntimeError("no free port range found")


def qemu_processes(name: str) -> list[int]:
    """PIDs of processes naming the lab's run directory (every VM's qemu does)."""
    marker = f"{RUN_ROOT}/{name}/".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "cmdline").read_bytes().replace(b"\0", b" "):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def assert_vm_lab_left_nothing(name: str) -> None:
    assert_nothing_left(name)  # namespaces, bpffs mount, run directory
    assert qemu_processes(name) == [], f"qemu of lab {name} left running"


def _has_leftovers(name: str) -> bool:
    return (RUN_ROOT / name).exists() or any(ns.startswith(f"{name}-") for ns in lab_netns.list_all()) or bool(qemu_processes(name))


def cleanup(name: str, scratch: Path) -> None:
    """Safety net after the assertions: if a refusal did not happen, remove what it made."""
    if _has_leftovers(name):
        VmLab("vm", name, disk_root=scratch / "cleanup-disks", log_root=scratch / "cleanup-logs").down()


def edgeft_vm(*args: str, env: dict[str, str] | None = None, user: int | None = None, timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess:
    """Run bin/edgeft-vm (the wrapper, as a user would) with `env` over a clean environment."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("EDGEFT_VM_")}
    full_env.update(env or {})
    extra = {"user": user, "group": user, "extra_groups": []} if user is not None else {}
    return subprocess.run(
        [str(EDGEFT_VM), *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
        cwd=REPO,
        **extra,
    )


def scratch_env(scratch: Path) -> dict[str, str]:
    """Disks and console logs of the lab under test in the test's own directory."""
    return {"EDGEFT_VM_DISKS": str(scratch / "disks"), "EDGEFT_VM_LOGS": str(scratch / "logs")}


def error_line(result: subprocess.CompletedProcess) -> str:
    """The CLI's error: its last stderr line, without a traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines, result
    assert lines[-1].startswith("edgeft-vm: error: "), result.stderr
    return lines[-1]


def require(ok: bool, message: str) -> None:
    assert ok, message


@pytest.fixture
def lab_name(tmp_path: Path) -> Iterator[str]:
    name = unique_name()
    yield name
    cleanup(name, tmp_path)


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)], capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


# ------------------------------------------------------------------ bad options and topologies

BAD_VM_TOPOLOGY = {  # machines: vm on leaf-spine: invalid
    "name": "vm",
    "machines": "vm",
    "fabric": {"kind": "leaf-spine", "mode": "l2"},
    "racks": 1,
    "hosts_per_rack": 1,
    "planes": [{"name": "a", "nic": "fab0", "ipv4": "198.18.0.0/16", "ipv6": "fd0e:d6ef:7a00::/56"}],
}

# (id, arguments, what the error line must contain); all are usage errors: documented exit code 2
BAD_OPTIONS = [
    ("memory-too-small", ["--memory", "100"], ["--memory must be 512 to 16384 MiB, not 100"]),
    ("memory-too-large", ["--memory", "65536"], ["--memory must be 512 to 16384 MiB, not 65536"]),
    ("memory-not-a-number", ["--memory", "lots"], ["argument --memory", "'lots'"]),
    ("port-base-privileged", ["--ssh-port-base", "80"], ["--ssh-port-base", "not 80"]),
    ("port-base-past-65535", ["--ssh-port-base", "65534"], ["--ssh-port-base", "1024 to 65532 (4 VMs)", "not 65534"]),
    ("port-base-not-a-number", ["--ssh-port-base", "ssh"], ["argument --ssh-port-base", "'ssh'"]),
    ("accel-bogus", ["--accel", "bogus"], ["argument --accel", "invalid choice: 'bogus'", "kvm", "tcg"]),
    ("topology-unknown", ["--topology", "no-such-topology"], ["lab/topologies/no-such-topology.yml", "no such topology file", "shipped topologies:", "vm"]),
    ("topology-missing-file", ["--topology", "/nonexistent/vm.yml"], ["/nonexistent/vm.yml", "no such topology file"]),
    ("topology-without-vms", ["--topology", "default"], ["--topology", "lab/topologies/default.yml", "has no VM hosts", "machines: vm"]),
    ("topology-flat-netns", ["--topology", "flat"], ["--topology", "lab/topologies/flat.yml", "has no VM hosts", "machines: vm"]),
    ("topology-vm-on-leaf-spine", ["--topology", "{bad_vm_topology}"], ["{bad_vm_topology}: machines: VM hosts are supported on flat L2 fabrics"]),
    ("name-invalid", ["--name", "Bad_Name"], ["name: lab name must be", "'Bad_Name'"]),
]
# Documented (cli.py: "2 usage or missing prerequisite") but not what the CLI does: see the report.


@pytest.fixture(scope="module")
def bad_option_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[str, list[str], object]]]:
    """Every bad option run once (in parallel): {id: (lab name, expected texts, result)}."""
    scratch = tmp_path_factory.mktemp("bad-options")
    bad_topology = scratch / "vm-on-leaf-spine.yml"
    bad_topology.write_text(yaml.safe_dump(BAD_VM_TOPOLOGY))
    base = free_port_base()
    cases = {}
    for case_id, args, texts in BAD_OPTIONS:
        name = unique_name()
        args = [a.replace("{bad_vm_topology}", str(bad_topology)) for a in args]
        texts = [t.replace("{bad_vm_topology}", str(bad_topology)) for t in texts]
        # The lab's own name and ports first: the option under test comes later and wins.
        cases[case_id] = (name, ["--name", name, "--ssh-port-base", str(base), *args, "up"], texts)
    env = scratch_env(scratch)
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = dict(zip(cases, pool.map(lambda case: edgeft_vm(*case[1], env=env), cases.values())))
    yield {case_id: (name, texts, results[case_id]) for case_id, (name, _argv, texts) in cases.items()}
    for name, _argv, _texts in cases.values():
        cleanup(name, scratch)
    assert not (scratch / "disks").exists()


@pytest.mark.parametrize("case_id", [c[0] for c in BAD_OPTIONS])
def test_bad_option_is_refused_naming_it(bad_option_runs, case_id):
    name, texts, result = bad_option_runs[case_id]
    assert result.returncode in (1, 2), result
    line = error_line(result)
    for text in texts:
        assert text in line, (text, result.stderr)
    assert result.stdout == ""
    assert_vm_lab_left_nothing(name)


@pytest.mark.parametrize("case_id", [c[0] for c in BAD_OPTIONS])
def test_bad_option_exits_2(bad_option_runs, case_id):
    result = bad_option_runs[case_id][2]
    require(result.returncode == 2, f"exit {result.returncode}: {result.stderr}")


def test_privileged_port_base_message_gives_the_lower_bound(bad_option_runs):
    result = bad_option_runs["port-base-privileged"][2]
    line = error_line(result)
    require("1024" in line, line)


def test_vmlab_rejects_bad_arguments(tmp_path):
    name = unique_name()
    kwargs = {"disk_root": tmp_path / "disks", "log_root": tmp_path / "logs"}
    cases = [
        ({"memory_mib": 511}, "--memory must be 512 to 16384 MiB, not 511"),
        ({"memory_mib": 16385}, "--memory must be 512 to 16384 MiB, not 16385"),
        ({"ssh_port_base": 1023}, "--ssh-port-base"),
        ({"ssh_port_base": 65533}, "--ssh-port-base"),
        ({"accel": "hvf"}, "--accel must be one of auto, kvm, tcg, not 'hvf'"),
    ]
    for bad, message in cases:
        with pytest.raises(LabError) as caught:
            VmLab("vm", name, **kwargs, **bad)
        assert message in str(caught.value), (bad, caught.value)
    for topology in ("default", "routed", "flat", load_topology("flat")):
        with pytest.raises(LabError, match="has no VM hosts"):
            VmLab(topology, name, **kwargs)
    # The bounds themselves are fine.
    for good in ({"memory_mib": 512}, {"memory_mib": 16384}, {"ssh_port_base": 1024}, {"ssh_port_base": 65531}):
        VmLab("vm", name, **kwargs, **good)
    assert_vm_lab_left_nothing(name)
    assert not (tmp_path / "disks").exists()


def test_vmlab_accepts_the_highest_port_base(tmp_path):
    VmLab("vm", unique_name(), ssh_port_base=65532, disk_root=tmp_path / "disks")  # ports 65532-65535


# ------------------------------------------------------------------ missing prerequisites


def _no_qemu_path(tmp: Path, with_qemu_system: bool) -> str:
    """A PATH with python3 (for the wrapper's shebang) and at most qemu-system-x86_64."""
    bin_dir = tmp / ("bin-qemu-system-only" if with_qemu_system else "bin-no-qemu")
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    if with_qemu_system:
        qemu = shutil.which("qemu-system-x86_64")
        if qemu is None:
            pytest.skip("qemu-system-x86_64 is not installed")
        (bin_dir / "qemu-system-x86_64").symlink_to(qemu)
    return str(bin_dir)


@pytest.fixture(scope="module")
def prerequisite_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[str, Path, object]]]:
    """up without qemu, without qemu-img, and as nobody: {id: (lab name, scratch, result)}."""
    runs = {}
    for case_id in ("no-qemu", "no-qemu-img", "not-root"):
        scratch = tmp_path_factory.mktemp(case_id)
        name = unique_name()
        env = scratch_env(scratch)
        args = ["--name", name, "--ssh-port-base", str(free_port_base()), "up"]
        if case_id == "not-root":
            env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
            result = edgeft_vm(*args, env=env, user=NOBODY)
        else:
            env["PATH"] = _no_qemu_path(scratch, with_qemu_system=case_id == "no-qemu-img")
            result = edgeft_vm(*args, env=env)
        runs[case_id] = (name, scratch, result)
    yield runs
    for name, scratch, _result in runs.values():
        cleanup(name, scratch)


@pytest.mark.parametrize(
    "case_id,texts",
    [
        ("no-qemu", ["VM hosts need qemu-system-x86_64 (Debian package qemu-system-x86)", "qemu-img (Debian package qemu-utils)", "scripts/bootstrap.sh"]),
        ("no-qemu-img", ["VM hosts need qemu-img (Debian package qemu-utils)", "scripts/bootstrap.sh"]),
        ("not-root", ["VM labs need root", "rerun with sudo"]),
    ],
)
def test_missing_prerequisite_is_refused_naming_the_fix(prerequisite_runs, case_id, texts):
    name, scratch, result = prerequisite_runs[case_id]
    assert result.returncode in (1, 2), result
    line = error_line(result)
    for text in texts:
        assert text in line, (text, result.stderr)
    if case_id == "no-qemu-img":
        assert "qemu-system-x86_64" not in line  # it is there
    assert result.stderr.count("\n") == 1  # one line, nothing started before the refusal
    assert_vm_lab_left_nothing(name)
    assert not (scratch / "disks").exists() and not (scratch / "logs").exists()


@pytest.mark.parametrize("case_id", ["no-qemu", "no-qemu-img", "not-root"])
def test_missing_prerequisite_exits_2(prerequisite_runs, case_id):
    result = prerequisite_runs[case_id][2]
    require(result.returncode == 2, f"exit {result.returncode}: {result.stderr}")


@pytest.mark.parametrize("command", ["build-image", "down"])
def test_other_commands_as_non_root_ask_for_root(tmp_path, lab_name, command):
    env = {**scratch_env(tmp_path), "EDGEFT_VM_CACHE": str(tmp_path / "cache"), "PATH": "/usr/local/bin:/usr/bin:/bin"}
    result = edgeft_vm("--name", lab_name, "--ssh-port-base", str(free_port_base()), command, env=env, user=NOBODY)
    assert_vm_lab_left_nothing(lab_name)
    assert result.returncode in (1, 2)
    require("Traceback" not in result.stderr, result.stderr)
    assert "root" in error_line(result)


def test_vmlab_check_and_up_refuse_without_qemu(tmp_path, monkeypatch, lab_name):
    lab = VmLab("vm", lab_name, ssh_port_base=free_port_base(), disk_root=tmp_path / "disks", log_root=tmp_path / "logs", cache_root=tmp_path / "cache")
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    for step in (lab.check, lab.up):
        with pytest.raises(LabError, match=r"qemu-system-x86_64 \(Debian package qemu-system-x86\).*install it"):
            step()
    assert not lab.is_up() and lab.running() == dict.fromkeys(HOSTS)
    assert_vm_lab_left_nothing(lab_name)
    assert [p.name for p in tmp_path.iterdir()] == ["bin"]  # no disks, logs or image cache


def test_vmlab_check_and_up_refuse_non_root(tmp_path, monkeypatch, lab_name):
    lab = VmLab("vm", lab_name, ssh_port_base=free_port_base(), disk_root=tmp_path / "disks", log_root=tmp_path / "logs", cache_root=tmp_path / "cache")
    monkeypatch.setattr(vmlab_module.os, "geteuid", lambda: 1000)
    for step in (lab.check, lab.up):
        with pytest.raises(LabError, match="VM labs need root .*: rerun with sudo"):
            step()
    monkeypatch.undo()
    assert_vm_lab_left_nothing(lab_name)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ a taken ssh port


@pytest.mark.parametrize("offset", [0, 2])
def test_taken_ssh_port_is_refused_naming_it(tmp_path, lab_name, offset):
    base = free_port_base()
    taken = base + offset
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", taken))
        holder.listen()
        result = edgeft_vm("--name", lab_name, "--ssh-port-base", str(base), "up", env=scratch_env(tmp_path))
        assert holder.getsockname() == ("127.0.0.1", taken)  # ours, untouched
    assert result.returncode == 1, result  # operational
    line = error_line(result)
    assert f"127.0.0.1:{taken} (ssh of VM {HOSTS[offset]}) is already taken" in line
    assert "--ssh-port-base" in line and "EDGEFT_VM_SSH_PORT_BASE" in line
    assert_vm_lab_left_nothing(lab_name)
    assert not (tmp_path / "disks").exists()
    for port in range(base, base + len(HOSTS)):  # the probes released every port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", port))


def test_port_of_vmlab_check_is_its_own(tmp_path, lab_name):
    """VmLab.check probes exactly base .. base+3 (not the default 2230...)."""
    base = free_port_base()
    lab = VmLab("vm", lab_name, ssh_port_base=base, disk_root=tmp_path / "disks", log_root=tmp_path / "logs")
    assert [s.ssh_port for s in lab.specs()] == list(range(base, base + 4))
    assert [s.host for s in lab.specs()] == list(HOSTS)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", base + 3))
        with pytest.raises(LabError, match=f"127.0.0.1:{base + 3} \\(ssh of VM r2h2\\)"):
            lab.check()
    assert_vm_lab_left_nothing(lab_name)
    assert not (tmp_path / "disks").exists()


# ------------------------------------------------------------------ not enough disk


def _run_up(name: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return edgeft_vm("--name", name, "--ssh-port-base", str(free_port_base()), "up", env=env)


def test_not_enough_disk_for_the_vm_disks(tmp_path, lab_name):
    # The image cache is on the small tmpfs too: if the VM disk check were skipped (say a
    # cached image made the image step pass), the image check would refuse instead, naming
    # EDGEFT_VM_CACHE, and this test would fail; no image is ever built.
    with tmpfs(tmp_path / "small", "64M") as small:
        env = {"EDGEFT_VM_DISKS": str(small / "disks"), "EDGEFT_VM_CACHE": str(small / "cache"), "EDGEFT_VM_LOGS": str(small / "logs")}
        result = _run_up(lab_name, env)
        assert result.returncode == 1, result  # operational
        line = error_line(result)
        assert "not enough disk for 4 VM disks" in line
        assert f"GiB free under {small / 'disks' / lab_name}, need 4 GiB" in line
        assert "point EDGEFT_VM_DISKS elsewhere" in line
        assert_vm_lab_left_nothing(lab_name)
        assert not (small / "cache").exists() and not (small / "logs").exists()
        assert list((small / "disks").rglob("*.qcow2")) == []


def test_refused_up_leaves_no_vm_disk_directory(tmp_path, lab_name):
    with tmpfs(tmp_path / "small", "64M") as small:
        env = {"EDGEFT_VM_DISKS": str(small / "disks"), "EDGEFT_VM_CACHE": str(small / "cache")}
        result = _run_up(lab_name, env)
        assert "not enough disk for 4 VM disks" in error_line(result)
        assert_vm_lab_left_nothing(lab_name)
        require(not (small / "disks" / lab_name).exists(), f"{small / 'disks' / lab_name} left behind")


def test_not_enough_disk_for_the_image(tmp_path, lab_name):
    missing = [t for t in ("mmdebstrap", "mke2fs", "ssh-keygen", "qemu-system-x86_64", "qemu-img") if not shutil.which(t)]
    if missing:
        pytest.skip(f"the image disk check comes after the tool checks; missing: {', '.join(missing)}")
    # The VM disks fit (an 8G tmpfs: nothing is written), the image cache does not.
    with tmpfs(tmp_path / "small", "64M") as small, tmpfs(tmp_path / "big", "8G") as big:
        env = {"EDGEFT_VM_DISKS": str(big / "disks"), "EDGEFT_VM_CACHE": str(small / "cache"), "EDGEFT_VM_LOGS": str(small / "logs")}
        result = _run_up(lab_name, env)
        assert result.returncode == 1, result
        line = error_line(result)
        assert "not enough disk for the VM image" in line
        assert f"GiB free under {small / 'cache'}, the build needs 4 GiB" in line
        assert "point EDGEFT_VM_CACHE elsewhere" in line
        assert_vm_lab_left_nothing(lab_name)
        assert sorted(p.name for p in (small / "cache").iterdir()) == [".lock"]  # no build directory
        assert list(big.rglob("*.qcow2")) == [] and not (small / "logs").exists()
