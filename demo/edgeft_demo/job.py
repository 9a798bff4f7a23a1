"""The training job across the lab: one rank per host, started in the host's namespace, its
step logs followed while it runs, and only its own processes ever signalled (by PID)."""

from __future__ import annotations

import math
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from edgeft_lab import Lab
from edgeft_lab.traffic import host_address

from .record import Rank, Step
from .workloads import steplog

WORKLOAD_DIR = Path(__file__).resolve().parent / "workloads"
REPO = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"  # the ring needs nothing but the host's own Python
VENV_PYTHON = REPO / ".venv" / "bin" / "python"  # PyTorch is installed into the virtualenv
WORKLOADS = ("ring", "ddp")


@dataclass(frozen=True)
class JobSpec:
    workload: str = "ring"
    steps: int = 500
    timeout_s: float = 120.0  # a step waiting longer fails the job (a collective's watchdog)
    port: int = 29400
    size_kb: int = 1024  # ring: gradient buffer per step
    compute_ms: float = 40.0  # ring: compute time per step

    def __post_init__(self) -> None:
        if self.workload not in WORKLOADS:
            raise ValueError(f"workload must be one of {', '.join(WORKLOADS)}, not {self.workload!r}")
        if self.steps < 1 or self.timeout_s <= 0:
            raise ValueError("steps must be at least 1 and timeout_s positive")


class Job:
    def __init__(self, lab: Lab, hosts: list[str], plane: str, spec: JobSpec, log_dir: Path, family: int = 4) -> None:
        self.lab, self.hosts, self.plane, self.spec = lab, hosts, plane, spec
        self.addresses = [host_address(lab, h, plane, family) for h in hosts]
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen] = []
        self.started_ns = 0

    def step_log(self, rank: int) -> Path:
        return self.log_dir / f"rank-{rank}.jsonl"

    def argv(self, rank: int) -> list[str]:
        spec, log = self.spec, str(self.step_log(rank))
        if spec.workload == "ring":
            return [SYSTEM_PYTHON, str(WORKLOAD_DIR / "ring_allreduce.py"), "--rank", str(rank),
                    "--world", str(len(self.hosts)), "--addresses", ",".join(self.addresses),
                    "--port", str(spec.port), "--steps", str(spec.steps), "--size-kb", str(spec.size_kb),
                    "--compute-ms", str(spec.compute_ms), "--timeout-s", str(spec.timeout_s), "--log", log]
        ifname = self.lab.plan.host(self.hosts[rank]).port(self.plane).ifname
        return [str(VENV_PYTHON), str(WORKLOAD_DIR / "ddp_train.py"), "--rank", str(rank),
                "--world", str(len(self.hosts)), "--master-addr", self.addresses[0],
                "--master-port", str(spec.port), "--ifname", ifname, "--steps", str(spec.steps),
                "--timeout-s", str(math.ceil(spec.timeout_s)), "--log", log]  # whole seconds there

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.started_ns = time.monotonic_ns()
        for rank, host in enumerate(self.hosts):
            self.step_log(rank).unlink(missing_ok=True)
            with open(self.log_dir / f"rank-{rank}.out", "wb") as out:
                self.procs.append(subprocess.Popen(self.lab.exec_argv(host, self.argv(rank)), stdin=subprocess.DEVNULL,
                                                   stdout=out, stderr=subprocess.STDOUT))

    def progress(self) -> tuple[int, float | None]:
        """(steps every rank has finished, rank 0's last step time in ms)."""
        done, last_ms = [], None
        for rank in range(len(self.hosts)):
            steps = [r for r in steplog.read(str(self.step_log(rank))) if r["event"] == "step"]
            done.append(steps[-1]["step"] if steps else 0)
            if rank == 0 and steps:
                last_ms = steps[-1]["step_ms"]
        return min(done), last_ms

    def running(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def failed(self) -> list[str]:
        """Ranks that exited with an error, as 'host: exit N'."""
        return [f"{self.hosts[i]}: exit {p.returncode}" for i, p in enumerate(self.procs)
                if p.poll() is not None and p.returncode != 0]

    def wait(self, deadline: float, poll: float = 0.2) -> bool:
        """Until every rank exited (True) or the monotonic deadline passed (False)."""
        while self.running():
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll)
        return True

    def stop(self) -> None:
        """SIGTERM, then SIGKILL, to the ranks still running (our own Popen objects only)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def ranks(self) -> list[Rank]:
        ranks = []
        for rank, host in enumerate(self.hosts):
            records = steplog.read(str(self.step_log(rank)))
            steps = [Step(r["step"], r["t_ns"], r["step_ms"], r.get("retrans")) for r in records if r["event"] == "step"]
            end = next((r for r in reversed(records) if r["event"] in ("done", "error")), None)
            code = self.procs[rank].returncode if rank < len(self.procs) else None
            ranks.append(Rank(rank, host, self.addresses[rank], steps, end, code))
        return ranks

    def output_tail(self, rank: int, lines: int = 5) -> str:
        path = self.log_dir / f"rank-{rank}.out"
        return "".join(path.read_text(errors="replace").splitlines(True)[-lines:]) if path.exists() else ""
