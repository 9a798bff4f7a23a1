"""VM hosts, pure: the `machines` and `fabric.isl` topology keys, the VM lab's plan, the image
key, the VM inventory and qemu's command line (no root, no namespaces, no qemu started)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from edgeft_lab import LabError, TopologyError, load_topology
from edgeft_lab.inventory import build_inventory
from edgeft_lab.plan import L2_BRIDGE, Endpoint, Link, is_vm_cable, plan_fabric
from edgeft_lab.topology import from_dict, parse_topology
from edgeft_lab.vm import image as vm_image
from edgeft_lab.vm import machine, paths
from edgeft_lab.vm.image import MGMT_NIC, Image, ImageSpec, ensure_image
from edgeft_lab.vm.inventory import NAMESPACE_ONLY, build_vm_inventory, write_vm_inventory
from edgeft_lab.vm.ssh import ANSIBLE_SSH_ARGS
from lab_helpers import unique_name
from repo import REPO

PLANES = [
    {"name": "a", "nic": "fab0", "ipv4": "198.18.0.0/16", "ipv6": "fd0e:d6ef:7a00::/56"},
    {"name": "b", "nic": "fab1", "ipv4": "198.19.0.0/16", "ipv6": "fd0e:d6ef:7b00::/56"},
]
PLANES3 = [
    {"name": "a", "nic": "fab0", "ipv4": "198.18.0.0/17", "ipv6": "fd0e:d6ef:7a00::/56"},
    {"name": "b", "nic": "fab1", "ipv4": "198.18.128.0/17", "ipv6": "fd0e:d6ef:7b00::/56"},
    {"name": "c", "nic": "fab2", "ipv4": "198.19.0.0/17", "ipv6": "fd0e:d6ef:7c00::/56"},
]

ISL_KINDS = "must be true, false or a list of [plane, plane] pairs"

VM_DOC = {
    "name": "t-vmplan",
    "machines": "vm",
    "fabric": {"kind": "flat", "mode": "l2", "isl": True},
    "racks": 2,
    "hosts_per_rack": 2,
    "planes": copy.deepcopy(PLANES),
}


def _doc(**changes) -> dict:
    """VM_DOC with top-level keys replaced (None deletes) and fabric keys merged in via fabric=."""
    doc = copy.deepcopy(VM_DOC)
    for key, value in changes.items():
        if key == "fabric":
            doc["fabric"].update(value)
            doc["fabric"] = {k: v for k, v in doc["fabric"].items() if v is not _DELETE}
        elif value is _DELETE:
            del doc[key]
        else:
            doc[key] = value
    return doc


_DELETE = object()

# ------------------------------------------------------------------ topology: machines, fabric.isl

BAD_CASES = [
    # (id, document, key path, part of the reason)
    ("machines-unknown", _doc(machines="qemu"), "machines", "must be one of netns, vm, not 'qemu'"),
    ("machines-bool", _doc(machines=True), "machines", "must be one of"),
    ("machines-null", _doc(machines=None), "machines", "must be one of"),
    ("machines-list", _doc(machines=["vm"]), "machines", "must be one of"),
    ("machines-uppercase", _doc(machines="VM"), "machines", "must be one of"),
    ("vm-on-leaf-spine", _doc(fabric={"kind": "leaf-spine", "isl": _DELETE}), "machines", "flat L2"),
    ("vm-on-leaf-spine-routed", _doc(fabric={"kind": "leaf-spine", "mode": "routed", "isl": _DELETE}), "machines", "flat L2"),
    ("vm-on-flat-routed", _doc(fabric={"mode": "routed", "isl": _DELETE}), "machines", "flat L2"),
    ("isl-on-leaf-spine", _doc(machines=_DELETE, fabric={"kind": "leaf-spine"}), "fabric.isl", "flat L2 fabric of 2+ planes"),
    ("isl-on-leaf-spine-routed", _doc(machines=_DELETE, fabric={"kind": "leaf-spine", "mode": "routed"}), "fabric.isl", "flat L2"),
    ("isl-on-flat-routed", _doc(machines=_DELETE, fabric={"mode": "routed"}), "fabric.isl", "flat L2"),
    ("isl-with-one-plane", _doc(planes=copy.deepcopy(PLANES[:1])), "fabric.isl", "2+ planes"),
    ("isl-vm-one-plane-netns", _doc(machines="netns", planes=copy.deepcopy(PLANES[:1])), "fabric.isl", "2+ planes"),
    ("isl-string", _doc(fabric={"isl": "true"}), "fabric.isl", "%s, not 'true'" % ISL_KINDS),
    ("isl-int", _doc(fabric={"isl": 1}), "fabric.isl", "%s, not 1" % ISL_KINDS),
    ("isl-zero", _doc(fabric={"isl": 0}), "fabric.isl", ISL_KINDS),
    ("isl-null", _doc(fabric={"isl": None}), "fabric.isl", ISL_KINDS),
    ("isl-list", _doc(fabric={"isl": [True]}), "fabric.isl[0]", "must be a pair of plane names"),
]


@pytest.mark.parametrize("doc,key_path,reason", [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES])
def test_bad_machines_or_isl_is_rejected_with_its_key_path(doc, key_path, reason):
    with pytest.raises(TopologyError) as caught:
        from_dict(doc, "bad.yml")
    error = caught.value
    assert (error.source, error.key_path) == ("bad.yml", key_path), error
    assert reason in error.reason
    assert str(error).startswith(f"bad.yml: {key_path}: ")


def test_bad_isl_in_yaml_names_the_file_and_key_path():
    text = yaml.safe_dump(_doc(fabric={"isl": "sometimes"}))
    with pytest.raises(TopologyError, match=r"^vmbad\.yml: fabric\.isl: %s, not 'sometimes'$" % re.escape(ISL_KINDS)):
        parse_topology(text, "vmbad.yml")


@pytest.mark.parametrize(
    "doc",
    [
        _doc(),
        _doc(machines="netns"),  # netns hosts on a flat fabric with inter-switch links
        _doc(machines=_DELETE),
        _doc(fabric={"isl": False}),  # VMs without inter-switch links
        _doc(fabric={"isl": _DELETE}),
        _doc(fabric={"isl": False, "kind": "leaf-spine"}, machines=_DELETE),  # false is fine anywhere
        _doc(planes=copy.deepcopy(PLANES3)),  # three planes
    ],
    ids=["vm-isl", "netns-isl", "default-machines-isl", "vm-no-isl", "vm-isl-omitted", "isl-false-leaf-spine", "three-planes"],
)
def test_good_machines_and_isl_are_accepted_and_round_trip(doc):
    topology = from_dict(doc, "good.yml")
    assert topology.machines == doc.get("machines", "netns")
    assert topology.isl is doc["fabric"].get("isl", False)
    again = from_dict(topology.to_dict(), topology.source)
    assert again == topology
    assert again.fingerprint() == topology.fingerprint()


def _fingerprint_of(doc: dict) -> str:
    """The fingerprint algorithm, applied independently to an expected document."""
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


@pytest.mark.parametrize(
    "name,kind,mode",
    [("default", "leaf-spine", "l2"), ("routed", "leaf-spine", "routed"), ("flat", "flat", "l2")],
)
def test_shipped_netns_topologies_emit_no_machines_or_isl(name, kind, mode):
    """Existing labs keep their fingerprint: defaults are not written into to_dict."""
    topology = load_topology(name)
    assert (topology.machines, topology.isl) == ("netns", False)
    expected = {
        "name": "edgeft",
        "fabric": {"kind": kind, "mode": mode},
        "racks": 2,
        "hosts_per_rack": [2, 2],
        "planes": PLANES,
    }
    doc = topology.to_dict()
    doc.pop("description", None)
    assert doc == expected
    assert topology.fingerprint() == _fingerprint_of(expected)
    # Spelling the defaults out changes nothing either.
    explicit = topology.to_dict()
    explicit["machines"] = "netns"
    explicit["fabric"]["isl"] = False
    assert from_dict(explicit).fingerprint() == topology.fingerprint()


def test_vm_topology_round_trips_and_differs_from_its_neighbours():
    topology = load_topology("vm")
    assert topology.source == "lab/topologies/vm.yml"
    assert (topology.name, topology.kind, topology.mode, topology.machines, topology.isl) == ("vm", "flat", "l2", "vm", True)
    doc = topology.to_dict()
    assert doc["machines"] == "vm"
    assert doc["fabric"] == {"kind": "flat", "mode": "l2", "isl": True}
    again = from_dict(doc, topology.source)
    assert again == topology
    assert again.fingerprint() == topology.fingerprint()
    assert from_dict(json.loads(json.dumps(doc)), topology.source) == topology  # as a state file stores it
    renamed = topology.renamed(unique_name())
    assert from_dict(renamed.to_dict(), topology.source) == renamed
    # machines and isl are part of the fabric that gets built.
    fingerprints = {
        topology.fingerprint(),
        load_topology("flat").renamed("vm").fingerprint(),
        from_dict({**doc, "machines": "netns"}).fingerprint(),
        from_dict({**doc, "fabric": {"kind": "flat", "mode": "l2"}}).fingerprint(),
    }
    assert len(fingerprints) == 4


# ------------------------------------------------------------------ the VM lab's plan


def test_vm_plan_hosts_are_vms_without_namespaces():
    plan = plan_fabric(load_topology("vm"))
    assert [h.name for h in plan.hosts] == ["r1h1", "r1h2", "r2h1", "r2h2"]
    for host in plan.hosts:
        assert (host.machine, host.netns) == ("vm", ""), host
        assert [(p.plane, p.ifname, p.switch) for p in host.ports] == [("a", "fab0", "sw-a"), ("b", "fab1", "sw-b")]
        assert plan.netns(host.name) == ""
    assert plan.namespaces == ["vm-sw-a", "vm-sw-b"]
    assert plan.namespaces == [s.netns for s in plan.switches]


def test_every_vm_host_port_is_a_vm_cable():
    plan = plan_fabric(load_topology("vm"))
    host_links = [plan.host_link(h.name, p.plane) for h in plan.hosts for p in h.ports]
    assert len(host_links) == 8
    for link in host_links:
        assert is_vm_cable(link), link
        assert link.a.netns == "" and link.a.ifname == plan.host(link.a.node).port(link.plane).ifname
        assert link.b.netns == f"vm-{link.b.node}" and link.b.ifname == link.a.node  # the tap, named after the VM
    assert plan.vm_links == host_links
    assert not any(is_vm_cable(link) for link in plan.links if link.plane == "isl")


def test_vm_plan_joins_the_switches_with_an_inter_switch_link():
    plan = plan_fabric(load_topology("vm"))
    isl = [link for link in plan.links if link.plane == "isl"]
    assert isl == [Link("isl", Endpoint("sw-a", "vm-sw-a", "sw-b"), Endpoint("sw-b", "vm-sw-b", "sw-a"))]
    assert len(plan.links) == 9
    sw_a, sw_b = plan.switch("sw-a"), plan.switch("sw-b")
    assert sw_a.ports == ("r1h1", "r1h2", "r2h1", "r2h2", "sw-b")
    assert sw_b.ports == ("r1h1", "r1h2", "r2h1", "r2h2", "sw-a")
    assert (sw_a.neighbors, sw_b.neighbors) == (("sw-b",), ("sw-a",))
    assert sw_a.hosts == ("r1h1", "r1h2", "r2h1", "r2h2")  # the peer switch is not a host
    assert [(b.name, b.ports) for b in sw_a.bridges] == [(L2_BRIDGE, sw_a.ports)]  # one L2 domain
    assert isl[0] in plan.switch_links("sw-a") and isl[0] in plan.switch_links("sw-b")


def test_isl_chains_three_planes_without_a_loop():
    plan = plan_fabric(from_dict(_doc(machines=_DELETE, planes=copy.deepcopy(PLANES3))))
    isl = [(link.a.node, link.b.node) for link in plan.links if link.plane == "isl"]
    assert isl == [("sw-a", "sw-b"), ("sw-b", "sw-c")]  # a chain: a ring would be an L2 loop
    assert plan.switch("sw-b").neighbors == ("sw-a", "sw-c")
    assert plan.switch("sw-b").ports[-2:] == ("sw-a", "sw-c")
    assert plan.switch("sw-a").neighbors == ("sw-b",) and plan.switch("sw-c").neighbors == ("sw-b",)
    # netns hosts on an ISL fabric keep their namespaces.
    assert all(h.machine == "netns" and h.netns == f"t-vmplan-{h.name}" for h in plan.hosts)
    assert plan.vm_links == []


def test_flat_without_isl_has_no_inter_switch_links():
    plan = plan_fabric(from_dict(_doc(fabric={"isl": False})))
    assert [link for link in plan.links if link.plane == "isl"] == []
    assert plan.switch("sw-a").ports == ("r1h1", "r1h2", "r2h1", "r2h2")
    assert len(plan.vm_links) == 8


# ------------------------------------------------------------------ the image


def test_image_key_is_stable_and_follows_the_nics():
    key = ImageSpec(nics=("fab0", "fab1")).key()
    assert len(key) == 16 and int(key, 16) >= 0
    assert ImageSpec(nics=("fab0", "fab1")).key() == key
    assert ImageSpec(nics=("fab0", "fab1"), size_mib=4096).key() == key  # the defaults, spelled out
    others = {
        ImageSpec(nics=("fab0",)).key(),
        ImageSpec(nics=("fab0", "fab1", "fab2")).key(),
        ImageSpec(nics=("fab1", "fab0")).key(),  # the order is the PCI slot order
        ImageSpec(nics=("eth0", "eth1")).key(),
        ImageSpec(nics=("fab0", "fab1"), size_mib=8192).key(),
        ImageSpec(nics=("fab0", "fab1"), packages=("python3",)).key(),
    }
    assert key not in others and len(others) == 6


def test_cached_image_is_returned_without_a_build(tmp_path, monkeypatch):
    spec = ImageSpec(nics=("fab0", "fab1"))
    target = tmp_path / spec.key()
    target.mkdir()
    (target / "image.json").write_text(json.dumps({"key": spec.key(), "kernel_release": "6.1.0-test-amd64"}))

    def no_build(*args, **kwargs):
        raise AssertionError("a cached image must not be built again")

    monkeypatch.setattr(vm_image, "check_build_prerequisites", no_build)
    monkeypatch.setattr(vm_image, "_build", no_build)
    image = ensure_image(spec, tmp_path)
    assert image.dir == target and image.kernel_release == "6.1.0-test-amd64"
    assert (image.rootfs, image.kernel, image.initrd, image.ssh_key) == (
        target / "rootfs.img",
        target / "vmlinuz",
        target / "initrd.img",
        target / "id_ed25519",
    )
    assert vm_image.cached(ImageSpec(nics=("fab0",)), tmp_path) is None  # other NICs: another image


def test_image_build_prerequisites_name_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(LabError, match=r"mmdebstrap \(Debian package mmdebstrap\).*mke2fs \(Debian package e2fsprogs\)"):
        vm_image.check_build_prerequisites(tmp_path)
    monkeypatch.setattr(vm_image.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(vm_image, "BUILD_FREE_BYTES", 1 << 60)
    with pytest.raises(LabError, match=f"free under {re.escape(str(tmp_path))}, .*point EDGEFT_VM_CACHE elsewhere"):
        vm_image.check_build_prerequisites(tmp_path)


# ------------------------------------------------------------------ the VM inventory


def test_vm_inventory_reaches_each_vm_over_ssh_and_keeps_the_lab_vars(tmp_path):
    plan = plan_fabric(load_topology("vm"))
    bpffs, key = tmp_path / "bpf", tmp_path / "cache" / "id_ed25519"
    ports = {host.name: 41000 + i for i, host in enumerate(plan.hosts)}
    base = build_inventory(plan, bpffs)
    doc = build_vm_inventory(plan, bpffs, ports, key)

    hosts = doc["all"]["children"]["fabric"]["hosts"]
    assert sorted(hosts) == sorted(ports)
    dropped = set(NAMESPACE_ONLY) - {"ansible_host", "ansible_connection"}
    assert "edgeft_pin_root" in dropped and "edgeft_persist" in dropped and "edgeft_agent_tcp_cgroup" in dropped
    for name, port in ports.items():
        vars_ = hosts[name]
        assert vars_["ansible_host"] == "127.0.0.1"
        assert vars_["ansible_port"] == port
        assert vars_["ansible_user"] == "root"
        assert vars_["ansible_connection"] == "ssh"
        assert vars_["ansible_ssh_private_key_file"] == str(key)
        assert vars_["ansible_ssh_common_args"] == ANSIBLE_SSH_ARGS
        assert "StrictHostKeyChecking=no" in vars_["ansible_ssh_common_args"]
        assert dropped.isdisjoint(vars_), sorted(dropped & set(vars_))
        # What the lab knows of the host is kept: its planes, rack and interpreter.
        lab_vars = {k: v for k, v in base["all"]["children"]["fabric"]["hosts"][name].items() if k not in NAMESPACE_ONLY}
        assert {k: vars_[k] for k in lab_vars} == lab_vars
        assert [p["name"] for p in vars_["edgeft_planes"]] == ["a", "b"]
        assert [p["interface"] for p in vars_["edgeft_planes"]] == ["fab0", "fab1"]
        assert vars_["edgeft_rack"] == plan.host(name).rack_name
    # Groups (racks, planes, switches) are the lab's.
    children = {k: v for k, v in doc["all"]["children"].items() if k != "fabric"}
    assert children == {k: v for k, v in base["all"]["children"].items() if k != "fabric"}
    assert doc["all"]["vars"]["edgeft_lab"]["machines"] == "vm"
    assert doc["all"]["vars"]["edgeft_lab"]["planes"] == base["all"]["vars"]["edgeft_lab"]["planes"]

    path = tmp_path / "out" / "hosts.yml"
    write_vm_inventory(plan, bpffs, ports, key, path)
    text = path.read_text()
    assert text.startswith("# generated by")
    assert "(VM hosts)" in text.splitlines()[1]
    assert yaml.safe_load(text) == doc
    assert not path.with_name("hosts.yml.tmp").exists()


# ------------------------------------------------------------------ qemu


def _values(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == flag]


def _spec(tmp_path: Path, nics: tuple[str, ...], host: str = "r1h2", number: int = 2, port: int = 41001) -> machine.VmSpec:
    return machine.VmSpec(
        host=host,
        number=number,
        nics=tuple(machine.Nic(nic, f"t-x-sw-{chr(97 + i)}", L2_BRIDGE, host) for i, nic in enumerate(nics)),
        ssh_port=port,
        disk=tmp_path / "disks" / f"{host}.qcow2",
        memory_mib=768,
    )


@pytest.mark.parametrize("nics", [("fab0",), ("fab0", "fab1"), ("fab0", "fab1", "fab2")])
@pytest.mark.parametrize("accel", ["kvm", "tcg"])
def test_qemu_argv(tmp_path, nics, accel):
    image = Image(tmp_path / "image", {"kernel_release": "6.1.0-test-amd64"})
    run_dir = tmp_path / "run"
    spec = _spec(tmp_path, nics)
    fds = [10 + i for i in range(len(nics))]
    argv = machine.qemu_argv(spec, image, run_dir, accel, fds)

    assert argv[0] == machine.QEMU
    # Daemonized, found again by its pidfile and monitor socket in the VM's directory.
    assert "-daemonize" in argv
    assert _values(argv, "-pidfile") == [str(paths.pid_file(run_dir, "r1h2"))]
    assert _values(argv, "-qmp") == [f"unix:{paths.qmp_socket(run_dir, 'r1h2')},server=on,wait=off"]
    assert _values(argv, "-serial") == [f"file:{paths.console_log(run_dir, 'r1h2')}"]
    assert str(paths.vm_dir(run_dir, "r1h2")) + "/" in " ".join(argv)  # what running_pid() looks for
    # No NIC but ours: no defaults, no -net/-nic shortcuts.
    assert "-nodefaults" in argv and "-net" not in argv and "-nic" not in argv
    netdevs = _values(argv, "-netdev")
    (user,) = [n for n in netdevs if n.startswith("user,")]
    options = user.split(",")
    assert f"id={MGMT_NIC}" in options and "restrict=on" in options
    assert [o for o in options if o.startswith("hostfwd=")] == ["hostfwd=tcp:127.0.0.1:41001-:22"]
    assert [o for o in options if o.startswith("guestfwd=")] == []
    assert [n for n in netdevs if n.startswith("tap,")] == [f"tap,id={nic},fd={fd}" for nic, fd in zip(nics, fds)]
    assert len(netdevs) == 1 + len(nics)
    # One virtio NIC per fabric NIC, plus management, in PCI slot order, each with its own MAC.
    devices = [d for d in _values(argv, "-device") if d.startswith("virtio-net-pci,")]
    assert len(devices) == 1 + len(nics) == len(_values(argv, "-device"))
    fields = [dict(item.split("=", 1) for item in d.split(",")[1:]) for d in devices]
    assert [f["netdev"] for f in fields] == [MGMT_NIC, *nics]
    assert [int(f["addr"], 16) for f in fields] == [vm_image.pci_slot(i) for i in range(1 + len(nics))]
    macs = [f["mac"] for f in fields]
    assert len(set(macs)) == len(macs) and all(m.startswith("52:54:00:ed:02:") for m in macs)
    # Boot and resources.
    assert _values(argv, "-kernel") == [str(image.kernel)]
    assert _values(argv, "-initrd") == [str(image.initrd)]
    assert _values(argv, "-m") == ["768"]
    (drive,) = _values(argv, "-drive")
    assert f"file={spec.disk}" in drive.split(",") and "format=qcow2" in drive.split(",")
    (append,) = _values(argv, "-append")
    assert "systemd.hostname=r1h2" in append.split() and f"systemd.machine_id={spec.machine_id}" in append.split()
    # The accelerator asked for, and only that one.
    (accel_value,) = _values(argv, "-accel")
    if accel == "kvm":
        assert accel_value == "kvm"
    else:
        assert accel_value.split(",")[0] == "tcg"
    assert "-enable-kvm" not in argv


def test_vms_of_a_lab_get_distinct_macs_and_machine_ids(tmp_path):
    specs = [_spec(tmp_path, ("fab0", "fab1"), host=f"r1h{n}", number=n, port=41000 + n) for n in range(1, 5)]
    macs = [s.mac(i) for s in specs for i in range(3)]
    assert len(set(macs)) == len(macs)
    ids = [s.machine_id for s in specs]
    assert len(set(ids)) == 4 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


# ------------------------------------------------------------------ qemu's PID, ports, prerequisites


def _sleeper(marker: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(marker)])


def test_running_pid_only_claims_this_vms_process(tmp_path):
    run_dir = tmp_path / "run"
    assert machine.running_pid(run_dir, "r1h1") is None  # no pidfile
    pid_file = paths.pid_file(run_dir, "r1h1")
    pid_file.parent.mkdir(parents=True)
    pid_file.write_text("not a pid\n")
    assert machine.running_pid(run_dir, "r1h1") is None
    pid_file.write_text(f"{os.getpid()}\n")  # a live process that is not this VM's (a recycled PID)
    assert machine.running_pid(run_dir, "r1h1") is None

    other = _sleeper(paths.vm_dir(run_dir, "r1h10") / "qemu.pid")  # r1h1 is a prefix of r1h10
    ours = _sleeper(paths.vm_dir(run_dir, "r1h1") / "qemu.pid")
    try:
        pid_file.write_text(f"{other.pid}\n")
        assert machine.running_pid(run_dir, "r1h1") is None
        pid_file.write_text(f"{ours.pid}\n")
        assert machine.running_pid(run_dir, "r1h1") == ours.pid
        ours.kill()  # not reaped yet: a zombie is not running
        deadline = time.monotonic() + 5
        while machine.running_pid(run_dir, "r1h1") is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert machine.running_pid(run_dir, "r1h1") is None
    finally:
        for proc in (other, ours):
            proc.kill()
            proc.wait()
    assert machine.running_pid(run_dir, "r1h1") is None


def test_check_port_free_names_the_port_and_the_option():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(LabError) as caught:
            machine.check_port_free(port, "r2h1")
        message = str(caught.value)
        assert f"127.0.0.1:{port} (ssh of VM r2h1) is already taken" in message
        assert "--ssh-port-base" in message and "EDGEFT_VM_SSH_PORT_BASE" in message
    machine.check_port_free(port, "r2h1")  # released: free again


def test_require_qemu_names_the_packages(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(LabError) as caught:
        machine.require_qemu()
    assert "qemu-system-x86_64 (Debian package qemu-system-x86)" in str(caught.value)
    assert "qemu-img (Debian package qemu-utils)" in str(caught.value)
    for tool in machine.QEMU_PACKAGES:
        (bin_dir / tool).write_text("#!/bin/sh\n")
        (bin_dir / tool).chmod(0o755)
    machine.require_qemu()


def test_the_molecule_vm_pair_plan_and_host_vars_agree():
    """lab/topologies/vm-pair.yml (molecule/vm): two VMs, four NICs each on four switches, only
    the bond's two joined by an inter-switch link; each VM's host_vars declare planes a and b with the lab's own addresses and bond
    the NICs of planes c and d, primary on sw-c, each bond watching the other VM's."""
    plan = plan_fabric(load_topology("vm-pair"))
    assert [h.name for h in plan.hosts] == ["r1h1", "r2h1"]
    for host in plan.hosts:
        assert [(p.plane, p.ifname, p.switch) for p in host.ports] == [
            ("a", "fab0", "sw-a"), ("b", "fab1", "sw-b"), ("c", "fab2", "sw-c"), ("d", "fab3", "sw-d")]
    assert [(link.a.node, link.b.node) for link in plan.links if link.plane == "isl"] == [("sw-c", "sw-d")]
    assert [(s.name, s.neighbors) for s in plan.switches] == [("sw-a", ()), ("sw-b", ()), ("sw-c", ("sw-d",)), ("sw-d", ("sw-c",))]

    lab_hosts = build_inventory(plan, Path("/run/edgeft-lab/vm-pair/bpf"))["all"]["children"]["fabric"]["hosts"]
    host_vars = {h: yaml.safe_load((REPO / "molecule" / "vm" / "host_vars" / f"{h}.yml").read_text()) for h in lab_hosts}
    assert sorted(p.name for p in (REPO / "molecule" / "vm" / "host_vars").iterdir()) == ["r1h1.yml", "r2h1.yml"]
    for name, declared in host_vars.items():
        lab_planes = {p["name"]: p for p in lab_hosts[name]["edgeft_planes"]}
        assert declared["edgeft_planes"] == [lab_planes["a"], lab_planes["b"]], name
        [bond] = declared["edgeft_bonds"]
        assert (bond["ports"], bond["primary"]) == (["fab2", "fab3"], "fab2")
        assert bond["addresses"] == [lab_planes["c"]["ipv4"], lab_planes["c"]["ipv6"]], name
        [other] = [h for h in host_vars if h != name]
        assert bond["arp_ip_target"] == [host_vars[other]["edgeft_bonds"][0]["addresses"][0].split("/")[0]]


@pytest.mark.parametrize("isl,where,reason", [
    ("yes", "fabric.isl", "must be true, false or a list"),
    ([], "fabric.isl", "must be true, false or a list"),
    ([["a"]], "fabric.isl[0]", "must be a pair of plane names"),
    ([["a", "z"]], "fabric.isl[0]", "unknown plane 'z'"),
    ([["a", "a"]], "fabric.isl[0]", "joins plane 'a' to itself"),
    ([["a", "b"], ["b", "a"]], "fabric.isl[1]", "already joined"),
])
def test_bad_inter_switch_link_pairs_are_refused_naming_the_entry(isl, where, reason):
    doc = copy.deepcopy(VM_DOC)
    doc["fabric"]["isl"] = isl
    with pytest.raises(TopologyError) as refused:
        from_dict(doc)
    assert where in str(refused.value) and reason in str(refused.value)


def test_inter_switch_link_pairs_join_just_those_switches_and_round_trip():
    doc = copy.deepcopy(VM_DOC)
    doc["planes"] = copy.deepcopy(PLANES3)
    doc["fabric"]["isl"] = [["b", "c"]]
    topology = from_dict(doc)
    assert topology.isl_pairs == (("b", "c"),)
    assert from_dict(topology.to_dict()) == topology
    plan = plan_fabric(topology)
    assert [(link.a.node, link.b.node) for link in plan.links if link.plane == "isl"] == [("sw-b", "sw-c")]
    assert from_dict(dict(doc, fabric=dict(doc["fabric"], isl=True))).isl_pairs == (("a", "b"), ("b", "c"))
