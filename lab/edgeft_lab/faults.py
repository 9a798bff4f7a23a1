"""Fault injection and repair.

Faults live in switch namespaces (the hosts are the servers Ansible manages), except a
host-side link-down, which models a NIC or cable failure seen from the server.

  link-down  one end of a host's veth admin-down; the other end loses carrier too
  power-off  every port of a switch down (its ends): neighbours see NO-CARRIER
  silent     links stay up, the switch forwards nothing: nft netdev ingress, policy drop, every port
  loss       random drop with nft `numgen random mod 100 < N`: on a switch, ingress of every port
             (each packet crossing it is dropped with probability N%); on a link, ingress AND
             egress of the host's port (each direction N%)
  flap       a background process toggles one end of a link at `hz` for `duration` seconds
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from . import fabric, netns, nft, procs
from .errors import LabError
from .plan import Endpoint, FabricPlan, Link, is_vm_cable

KINDS = ("link-down", "power-off", "silent", "loss", "flap")
SIDES = ("host", "switch")
LINK_STATE_KINDS = ("link-down", "power-off", "flap")
NFT_KINDS = ("silent", "loss")
MAX_HZ = 50.0
MAX_DURATION = 3600.0
# A loaded machine can take seconds to start a Python process.
FLAPPER_START_TIMEOUT = 15.0


@dataclass(frozen=True)
class Fault:
    """A fault request; the target is a switch, or a host's link on one plane."""

    kind: str
    host: str | None = None
    plane: str | None = None
    side: str | None = None
    switch: str | None = None
    percent: int | None = None
    hz: float | None = None
    duration: float | None = None

    @property
    def target(self) -> str:
        if self.switch is not None:
            return f"switch={self.switch}"
        parts = [f"host={self.host}", f"plane={self.plane}"]
        if self.kind in ("link-down", "flap") and self.side:
            parts.append(f"side={self.side}")
        return " ".join(parts)

    @property
    def id(self) -> str:
        return f"{self.kind} {self.target}"

    def describe(self) -> str:
        extra = []
        if self.percent is not None:
            extra.append(f"percent={self.percent}")
        if self.hz is not None:
            extra.append(f"hz={self.hz:g}")
        if self.duration is not None:
            extra.append(f"duration={self.duration:g}s")
        return " ".join([self.id, *extra])

    def matches(self, request: Fault) -> bool:
        """A repair request matches when every target field it names is equal."""
        if request.kind != self.kind:
            return False
        return all(
            getattr(request, name) is None or getattr(request, name) == getattr(self, name)
            for name in ("host", "plane", "side", "switch")
        )

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Fault:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in names})


@dataclass
class FaultRecord:
    """An active fault as kept in the state file."""

    fault: Fault
    started_at: float = field(default_factory=time.time)
    pid: int | None = None  # flap: the flapper process
    pid_start: int | None = None

    def running(self) -> bool:
        return self.pid is not None and self.pid_start is not None and procs.is_running(self.pid, self.pid_start)

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"fault": self.fault.to_dict(), "started_at": self.started_at}
        if self.pid is not None:
            doc.update(pid=self.pid, pid_start=self.pid_start)
        return doc

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> FaultRecord:
        return cls(Fault.from_dict(doc["fault"]), doc.get("started_at", 0.0), doc.get("pid"), doc.get("pid_start"))


def validate(fault: Fault, plan: FabricPlan, for_repair: bool = False) -> Fault:
    """Check a request against the plan; fill defaults. Repair requests may leave fields out."""
    if fault.kind not in KINDS:
        raise LabError(f"unknown fault kind {fault.kind!r} (kinds: {', '.join(KINDS)})")
    if fault.host is not None:
        plan.host(fault.host)
    if fault.plane is not None:
        plan.plane(fault.plane)
    if fault.switch is not None:
        plan.switch(fault.switch)
    if fault.side is not None and fault.side not in SIDES:
        raise LabError(f"side must be host or switch, not {fault.side!r}")
    if for_repair:
        return fault

    def need(*names: str) -> None:
        missing = [n for n in names if getattr(fault, n) is None]
        if missing:
            raise LabError(f"fault {fault.kind} needs {' '.join('--' + n for n in missing)}")

    def forbid(*names: str) -> None:
        given = [n for n in names if getattr(fault, n) is not None]
        if given:
            raise LabError(f"fault {fault.kind} does not take {' '.join('--' + n for n in given)}")

    if fault.kind == "flap" and fault.host is not None and plan.host(fault.host).machine == "vm":
        raise LabError(f"fault flap is not supported on VM host {fault.host}: its NIC follows the cable through qemu's monitor, too slowly to flap")
    if fault.kind == "link-down":
        need("host", "plane", "side")
        forbid("switch", "percent", "hz", "duration")
    elif fault.kind in ("power-off", "silent"):
        need("switch")
        forbid("host", "plane", "side", "percent", "hz", "duration")
    elif fault.kind == "loss":
        need("percent")
        forbid("side", "hz", "duration")
        if fault.switch is not None and (fault.host or fault.plane):
            raise LabError("fault loss takes --switch or --host/--plane, not both")
        if fault.switch is None and (fault.host is None or fault.plane is None):
            raise LabError("fault loss needs either --switch, or --host and --plane")
        if isinstance(fault.percent, bool) or not isinstance(fault.percent, int) or not 1 <= fault.percent <= 100:
            raise LabError(f"--percent must be an integer from 1 to 100, not {fault.percent}")
    elif fault.kind == "flap":
        need("host", "plane", "hz", "duration")
        forbid("switch", "percent")
        assert fault.hz is not None and fault.duration is not None
        if not 0 < fault.hz <= MAX_HZ:
            raise LabError(f"--hz must be above 0 and at most {MAX_HZ:g}, not {fault.hz:g}")
        if not 0 < fault.duration <= MAX_DURATION:
            raise LabError(f"--duration must be above 0 and at most {MAX_DURATION:g} s, not {fault.duration:g}")
        if fault.side is None:
            fault = replace(fault, side="switch")
    return fault


def links_of(fault: Fault, plan: FabricPlan) -> list[Link]:
    if fault.switch is not None:
        return plan.switch_links(fault.switch)
    assert fault.host is not None and fault.plane is not None
    return [plan.host_link(fault.host, fault.plane)]


def downed_ends(fault: Fault, plan: FabricPlan) -> list[Endpoint]:
    """The interfaces a link-state fault sets down (or toggles)."""
    if fault.kind == "power-off":
        assert fault.switch is not None
        return [link.a if link.a.node == fault.switch else link.b for link in plan.switch_links(fault.switch)]
    if fault.kind in ("link-down", "flap"):
        link = links_of(fault, plan)[0]
        # A VM's cable has one end here, the tap on the switch; the guest's NIC follows it.
        return [link.a if fault.side == "host" and not is_vm_cable(link) else link.b]
    return []


def nft_chains(fault: Fault, plan: FabricPlan) -> dict[str, list[nft.Chain]]:
    """nft chains per switch namespace for silent/loss faults."""
    if fault.kind == "silent":
        switch = plan.switch(fault.switch or "")
        return {switch.netns: [nft.drop_all("silent", port) for port in switch.ports]}
    if fault.kind == "loss":
        assert fault.percent is not None
        if fault.switch is not None:
            switch = plan.switch(fault.switch)
            return {switch.netns: [nft.random_loss("swloss", "ingress", p, fault.percent) for p in switch.ports]}
        port = links_of(fault, plan)[0].b  # the host's port on its switch
        return {
            port.netns: [
                nft.random_loss("linkloss_in", "ingress", port.ifname, fault.percent),
                nft.random_loss("linkloss_out", "egress", port.ifname, fault.percent),
            ]
        }
    return {}


class FaultInjector:
    def __init__(self, plan: FabricPlan, run_dir: Path) -> None:
        self.plan = plan
        self.run_dir = run_dir

    def check(self, fault: Fault, active: list[FaultRecord]) -> Fault:
        """Validate a new fault against the plan and the active faults; returns it normalized."""
        fault = validate(fault, self.plan)
        for record in active:
            if record.fault.id == fault.id and (record.fault.kind != "flap" or record.running()):
                raise LabError(f"fault already active: {record.fault.describe()}")
        self._check_link_conflicts(fault, active)
        return fault

    def apply(self, record: FaultRecord) -> None:
        """Make a checked fault real (a flap records its flapper's PID in `record`)."""
        fault = record.fault
        if fault.kind == "flap":
            record.pid, record.pid_start = self._start_flapper(fault)
            return
        for end in downed_ends(fault, self.plan):
            set_link(end, up=False)
            self._vm_carrier(end, up=False)
        for ns, chains in nft_chains(fault, self.plan).items():
            nft.add_chains(ns, chains)

    def repair(self, record: FaultRecord, remaining: list[FaultRecord]) -> None:
        fault = record.fault
        if record.pid is not None and record.pid_start is not None:
            procs.stop(record.pid, record.pid_start)
        held = {end for other in remaining for end in self._held_ends(other)}
        for end in downed_ends(fault, self.plan):
            if end not in held:  # another active fault still wants it down
                set_link(end, up=True, plan=self.plan)
                self._vm_carrier(end, up=True)
        for ns, chains in nft_chains(fault, self.plan).items():
            if any(ns in nft_chains(other.fault, self.plan) for other in remaining):
                nft.delete_chains(ns, chains)
            else:
                nft.delete_table(ns)

    def _vm_carrier(self, end: Endpoint, up: bool) -> None:
        """A tap going down is silent to the guest: tell its NIC through qemu (a cable pulled)."""
        for link in self.plan.vm_links:
            if link.b == end:
                from .vm import qmp  # only VM labs need it

                qmp.set_guest_link(self.run_dir, link.a.node, link.a.ifname, up)

    def _held_ends(self, record: FaultRecord) -> list[Endpoint]:
        if record.fault.kind == "flap" and not record.running():
            return []
        return downed_ends(record.fault, self.plan)

    def _check_link_conflicts(self, fault: Fault, active: list[FaultRecord]) -> None:
        """A flapper and a link-down on the same link would fight over its state."""
        if fault.kind not in LINK_STATE_KINDS:
            return
        mine = set(links_of(fault, self.plan))
        for record in active:
            other = record.fault
            if other.kind not in LINK_STATE_KINDS or "flap" not in (fault.kind, other.kind):
                continue
            if other.kind == "flap" and not record.running():
                continue
            if mine & set(links_of(other, self.plan)):
                raise LabError(f"{fault.id} conflicts with active fault {other.id}: repair that first")

    def _start_flapper(self, fault: Fault) -> tuple[int, int]:
        assert fault.hz is not None and fault.duration is not None
        (end,) = downed_ends(fault, self.plan)
        package_parent = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
        argv = [
            sys.executable, "-m", "edgeft_lab.flapper",
            "--netns", end.netns, "--ifname", end.ifname, "--hz", str(fault.hz), "--duration", str(fault.duration),
        ]
        for route in fabric.node_routes(self.plan, end.node, end.ifname):
            argv += ["--route", f"{route.dst},{route.via}"]
        log = self.run_dir / f"flap-{end.node}-{end.ifname}.log"
        ready = self.run_dir / f"flap-{end.node}-{end.ifname}.ready"
        ready.unlink(missing_ok=True)
        argv += ["--ready-file", str(ready)]
        pid, start = procs.spawn(argv, log, env)
        # Return once the link has really started flapping: a caller that measures
        # right after `flap` must not see a quiet link while the process starts up.
        deadline = time.monotonic() + FLAPPER_START_TIMEOUT
        while not ready.exists():
            if not procs.is_running(pid, start):
                tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
                raise LabError(f"flapper for {end.node}:{end.ifname} exited before flapping: {' '.join(tail) or 'no output'}")
            if time.monotonic() > deadline:
                procs.stop(pid, start)
                raise LabError(f"flapper for {end.node}:{end.ifname} did not start within {FLAPPER_START_TIMEOUT:.0f} s")
            time.sleep(0.01)
        ready.unlink(missing_ok=True)
        return pid, start


def set_link(end: Endpoint, up: bool, plan: FabricPlan | None = None) -> None:
    """Set one end down or up; bringing it up also restores the routes the kernel flushed."""
    with netns.ipr(end.netns) as sock:
        found = sock.link_lookup(ifname=end.ifname)
        if not found:
            raise LabError(f"interface {end.ifname} missing in namespace {end.netns}")
        sock.link("set", index=found[0], state="up" if up else "down")
        if up and plan is not None:
            fabric.install_routes(sock, fabric.node_routes(plan, end.node, end.ifname))
