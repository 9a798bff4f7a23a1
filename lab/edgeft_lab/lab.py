"""The Lab: one named fabric of namespaces, its lifecycle, faults and views."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute

from . import bpffs, cgroups, fabric, netns, procs
from .errors import LabError
from .faults import Fault, FaultInjector, FaultRecord, validate
from .neighbours import NeighbourLimits, lab_entries
from .inventory import build_inventory, render_inventory, write_inventory
from .ping import PingMatrix, ping_matrix
from .plan import FabricPlan, plan_fabric
from .state import PHASE_TEARING_DOWN, PHASE_UP, RUN_ROOT, LabState, StateStore
from .status import format_status, gather
from .topology import DEFAULT_LAB_NAME, Topology, from_dict, load_topology


class Lab:
    """A fabric of network namespaces built from a topology.

    `name` overrides the topology's lab name (the namespace prefix), so tests can run a
    private copy of a shipped topology next to a developer's lab.
    """

    def __init__(
        self,
        topology: Topology | str | Path = "default",
        name: str | None = None,
        run_root: Path = RUN_ROOT,
        log: Callable[[str], None] | None = None,
    ) -> None:
        if not isinstance(topology, Topology):
            topology = load_topology(topology)
        if name is not None and name != topology.name:
            topology = topology.renamed(name)
        self.topology = topology
        self.plan: FabricPlan = plan_fabric(topology)
        self.run_dir = run_root / topology.name
        self.bpffs = self.run_dir / "bpf"
        self._store = StateStore(self.run_dir)
        self._log = log or (lambda message: None)
        self._injector = FaultInjector(self.plan, self.run_dir)

    @classmethod
    def running(
        cls, name: str = DEFAULT_LAB_NAME, run_root: Path = RUN_ROOT, log: Callable[[str], None] | None = None
    ) -> Lab | None:
        """The lab called `name` with the topology it was built from (from its state file)."""
        state = StateStore(run_root / name).load()
        if state is None:
            return None
        return cls(from_dict(state.topology, state.source), run_root=run_root, log=log)

    @property
    def name(self) -> str:
        return self.topology.name

    def netns(self, node: str) -> str:
        return self.plan.netns(node)

    def pin_root(self, host: str) -> Path:
        return self.bpffs / self.plan.host(host).name

    # ----------------------------------------------------------------- lifecycle

    def up(self, inventory: Path | None = None) -> bool:
        """Build the fabric; False if it was already up (a no-op). All or nothing."""
        with self._store.lock():
            state = self._store.load()
            if state is not None and state.phase == PHASE_UP:
                if state.fingerprint != self.topology.fingerprint():
                    raise LabError(
                        f"lab {self.name} is already up with a different fabric (from {state.source}); "
                        f"run 'edgeft-lab --name {self.name} down' first"
                    )
                missing = self._missing()
                if not missing:
                    if inventory is not None:
                        self.write_inventory(inventory)
                    return False
                self._log(f"lab {self.name} is incomplete (missing: {', '.join(missing[:4])}): rebuilding")
                self._teardown(state)
            elif state is not None:
                self._log(f"lab {self.name}: cleaning up after an interrupted run ({state.phase})")
                self._teardown(state)
            elif self._leftovers():
                self._log(f"lab {self.name}: removing leftovers of an earlier run: {', '.join(self._leftovers())}")
                self._teardown(None)

            state = LabState(
                name=self.name,
                topology=self.topology.to_dict(),
                source=self.topology.source,
                fingerprint=self.topology.fingerprint(),
            )
            self._store.save(state)
            try:
                raised = self._neighbour_limits().hold(self.name, self._neighbour_entries())
                if raised:
                    self._log("lab %s: raised the machine's neighbour table limits for its %d hosts: %s" % (
                        self.name, len(self.plan.hosts), ", ".join("%s=%d" % kv for kv in sorted(raised.items()))))
                self._build(state)
            except BaseException:
                self._log(f"lab {self.name}: up failed, removing what was created")
                try:
                    self._teardown(state)
                    self._store.remove_run_dir()
                except Exception as exc:  # report, but the original error matters more
                    self._log(f"lab {self.name}: cleanup after the failed up also failed (run down): {exc}")
                raise
            state.phase = PHASE_UP
            self._store.save(state)
        if inventory is not None:
            self.write_inventory(inventory)
        return True

    def down(self) -> bool:
        """Remove everything the lab made, also after a failed or interrupted up. Idempotent.
        Returns False if there was nothing to remove."""
        with self._store.lock():
            state = self._store.load()
            existed = state is not None or bool(self._leftovers())
            self._teardown(state)
            self._store.remove_run_dir()
        return existed

    def is_up(self) -> bool:
        state = self._store.load()
        return (
            state is not None
            and state.phase == PHASE_UP
            and state.fingerprint == self.topology.fingerprint()
            and not self._missing()
        )

    def _build(self, state: LabState) -> None:
        def intend_namespace(ns: str) -> None:
            state.namespaces.append(ns)
            self._store.save(state)

        fabric.build(self.plan, intend_namespace)
        state.mounts.append(str(self.bpffs))
        self._store.save(state)
        bpffs.mount(self.bpffs)
        for host in self.plan.hosts:
            (self.bpffs / host.name).mkdir(exist_ok=True)
        state.mounts.append(str(cgroups.mount_point(self.run_dir)))
        self._store.save(state)
        cgroups.create(self.run_dir, self.name, [h.name for h in self.plan.hosts if h.machine != "vm"])

    def _teardown(self, state: LabState | None) -> None:
        vm_hosts = [h.name for h in self.plan.hosts if h.machine == "vm"]
        if vm_hosts:  # their qemu holds taps on the switches: no VM outlives the lab
            from .vm import machine

            for host in vm_hosts:
                machine.stop(self.run_dir, host)
        namespaces = list(self.plan.namespaces)
        mounts = [str(self.bpffs), str(cgroups.mount_point(self.run_dir))]
        if state is not None:
            state.phase = PHASE_TEARING_DOWN
            self._store.save(state)
            for doc in state.faults:  # flappers hold namespace references: stop them first
                record = FaultRecord.from_dict(doc)
                if record.pid is not None and record.pid_start is not None:
                    procs.stop(record.pid, record.pid_start)
            # The state's own list first: it may come from another topology of the same name.
            namespaces = state.namespaces + [ns for ns in namespaces if ns not in state.namespaces]
            mounts = state.mounts + [m for m in mounts if m not in state.mounts]
        fabric.teardown(namespaces, self.plan.links)
        cgroups.remove(self.run_dir, self.name)  # before its mount goes
        for mount in mounts:
            bpffs.unmount(Path(mount))
        self._neighbour_limits().release(self.name)

    def _neighbour_limits(self) -> NeighbourLimits:
        return NeighbourLimits(self.run_dir.parent)

    def reserve_neighbour_entries(self, extra: dict[int, int]) -> dict[str, int]:
        """Room in the machine's neighbour tables for `extra` {family: entries} beyond the lab's
        own hosts (a benchmark's synthetic peers), held with the lab's and given back at its
        `down`; returns the thresholds raised."""
        own = self._neighbour_entries()
        return self._neighbour_limits().hold(self.name, {f: own.get(f, 0) + extra.get(f, 0) for f in set(own) | set(extra)})

    def _neighbour_entries(self) -> dict[int, int]:
        """The managed neighbour entries this lab's hosts keep in the machine's tables once deployed."""
        local = sum(1 for h in self.plan.hosts if h.machine != "vm")
        planes = len(self.topology.planes)
        return lab_entries(local, len(self.plan.hosts), {4: planes, 6: planes})

    def _missing(self) -> list[str]:
        missing = [ns for ns in self.plan.namespaces if not netns.exists(ns)]
        if not bpffs.is_mounted(self.bpffs):
            missing.append(str(self.bpffs))
        return missing

    def _leftovers(self) -> list[str]:
        found = [ns for ns in self.plan.namespaces if netns.exists(ns)]
        for mount in (self.bpffs, cgroups.mount_point(self.run_dir)):
            if bpffs.is_mounted(mount):
                found.append(str(mount))
        return found

    @contextmanager
    def _locked_when_up(self) -> Iterator[LabState]:
        """Lock for a change to a running lab (checked first, so a down lab gets no lock file)."""
        self._require_up()
        with self._store.lock():
            yield self._require_up()

    def _require_up(self) -> LabState:
        state = self._store.load()
        if state is None or state.phase != PHASE_UP:
            raise LabError(f"lab {self.name} is not up (run: edgeft-lab --name {self.name} up)")
        if state.fingerprint != self.topology.fingerprint():
            raise LabError(f"lab {self.name} is running a different fabric (from {state.source}); pass that --topology")
        return state

    # ----------------------------------------------------------------- faults

    def faults(self) -> list[FaultRecord]:
        state = self._store.load()
        return [FaultRecord.from_dict(d) for d in state.faults] if state else []

    def fault(self, fault: Fault) -> Fault:
        """Inject a fault; returns it normalized (defaults filled in)."""
        with self._locked_when_up() as state:
            records = [FaultRecord.from_dict(d) for d in state.faults]
            fault = self._injector.check(fault, records)
            # Anything left with the same id is a finished flap: history, replaced.
            records = [r for r in records if r.fault.id != fault.id]
            record = FaultRecord(fault)
            records.append(record)
            self._save_faults(state, records)  # recorded before it is applied
            try:
                self._injector.apply(record)
            except BaseException:
                others = [r for r in records if r is not record]
                try:
                    self._injector.repair(record, others)
                except Exception:
                    pass  # partially applied; the original error is what matters
                self._save_faults(state, others)
                raise
            self._save_faults(state, records)
            return fault

    def repair(self, request: Fault) -> list[Fault]:
        """Repair the active faults matching `request` (fields left None match anything)."""
        with self._locked_when_up() as state:
            request = validate(request, self.plan, for_repair=True)
            records = [FaultRecord.from_dict(d) for d in state.faults]
            matched = [r for r in records if r.fault.matches(request)]
            if not matched:
                raise LabError(f"no active fault matches: {request.kind} {request.target}".replace("=None", "=*"))
            return self._repair(state, records, matched)

    def repair_all(self) -> list[Fault]:
        with self._locked_when_up() as state:
            records = [FaultRecord.from_dict(d) for d in state.faults]
            return self._repair(state, records, list(reversed(records)))

    def _repair(self, state: LabState, records: list[FaultRecord], matched: list[FaultRecord]) -> list[Fault]:
        repaired = []
        for record in matched:
            records = [r for r in records if r is not record]
            self._injector.repair(record, records)
            self._save_faults(state, records)
            repaired.append(record.fault)
        return repaired

    def _save_faults(self, state: LabState, records: list[FaultRecord]) -> None:
        state.faults = [r.to_dict() for r in records]
        self._store.save(state)

    def link_down(self, host: str, plane: str, side: str = "host") -> Fault:
        return self.fault(Fault("link-down", host=host, plane=plane, side=side))

    def power_off(self, switch: str) -> Fault:
        return self.fault(Fault("power-off", switch=switch))

    def silence(self, switch: str) -> Fault:
        return self.fault(Fault("silent", switch=switch))

    def loss(self, percent: int, switch: str | None = None, host: str | None = None, plane: str | None = None) -> Fault:
        return self.fault(Fault("loss", switch=switch, host=host, plane=plane, percent=percent))

    def flap(self, host: str, plane: str, hz: float = 5.0, duration: float = 10.0, side: str = "switch") -> Fault:
        return self.fault(Fault("flap", host=host, plane=plane, side=side, hz=hz, duration=duration))

    # ----------------------------------------------------------------- views

    def status(self) -> dict[str, Any]:
        state = self._store.load()
        return gather(self.plan, state.phase if state else None, self.faults())

    def format_status(self) -> str:
        return format_status(self.status())

    def ping_matrix(self, count: int = 1, timeout: float = 1.0) -> PingMatrix:
        return ping_matrix(self.plan, count=count, timeout=timeout)

    def inventory(self) -> dict[str, Any]:
        return build_inventory(self.plan, self.bpffs)

    def render_inventory(self) -> str:
        return render_inventory(self.plan, self.bpffs)

    def write_inventory(self, path: Path) -> None:
        write_inventory(self.plan, self.bpffs, path)

    # ----------------------------------------------------------------- access for tests/benchmarks

    @contextmanager
    def ipr(self, node: str) -> Iterator[IPRoute]:
        """An IPRoute socket in a node's namespace."""
        with netns.ipr(self.netns(node)) as sock:
            yield sock

    def socket(self, node: str, family: int = socket.AF_INET, kind: int = socket.SOCK_DGRAM) -> socket.socket:
        """A socket living in a node's namespace (the caller closes it)."""
        return netns.open_socket(self.netns(node), family, kind)

    def exec_argv(self, node: str, argv: list[str]) -> list[str]:
        """Argument list that runs argv in a node's namespace (and a host's cgroup: cgroups.py)."""
        return cgroups.wrap(self.cgroup(node), netns.exec_argv(self.netns(node), argv))

    def cgroup(self, node: str) -> Path | None:
        """The cgroup of a lab host's processes (None for switches, VMs, or without cgroup v2)."""
        host = next((h for h in self.plan.hosts if h.name == node), None)
        if host is None or host.machine == "vm":
            return None
        path = cgroups.host_dir(self.run_dir, self.name, node)
        return path if path.is_dir() else None
