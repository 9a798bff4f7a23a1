"""One run of the job through the fault schedule, in one mode, on a lab that is up:

    without-edgeft  nothing deployed: what a multihomed host does today
    edgeft          playbooks/site.yml deployed and one agent per host

It starts the counters and a UDP heartbeat along every edge of the ring, the job, waits for
the job to warm up, plays the schedule, waits for the job to end (or a deadline), and returns
what it saw as a record.Run. Faults are always repaired and processes stopped on the way out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path

from edgeft_lab import Lab
from edgeft_lab.agents import Agents, run_playbook
from edgeft_lab.traffic import UdpStream

from .counters import CounterSampler
from .job import Job, JobSpec
from .record import Fault, Heartbeat, Run
from .schedule import Phase

REPO = Path(__file__).resolve().parents[2]


class DemoError(Exception):
    """The demo could not run (deployment, agents, job start): not a figure of the run."""


@dataclass(frozen=True)
class RunSettings:
    job: JobSpec
    plane: str = "a"  # the plane whose addresses the job uses (its ranks' NIC)
    warmup_steps: int = 40  # steps before the first fault: the healthy baseline
    tail_s: float = 60.0  # after the last phase began, how long the job may take to end
    heartbeat_pps: int = 1000
    heartbeat_gap_ms: float = 5.0
    sample_ms: float = 100.0


Log = Callable[[str], None]


def deploy_edgeft(lab: Lab, inventory: Path, log_dir: Path, log: Log) -> Agents:
    """site.yml on every host, then one agent per host, judged up on every path."""
    started = time.monotonic()
    rc, out = run_playbook(inventory, REPO / "playbooks" / "site.yml")
    (log_dir / "site.yml.log").write_text(out)
    if rc != 0:
        raise DemoError(f"playbooks/site.yml failed (exit {rc}); its output: {log_dir / 'site.yml.log'}\n"
                        + "\n".join(out.splitlines()[-15:]))
    log(f"site.yml deployed in {time.monotonic() - started:.0f} s")
    (log_dir / "agents").mkdir(parents=True, exist_ok=True)
    agents = Agents(lab, inventory, log_dir / "agents")
    try:
        agents.start_all()
        agents.wait_judged_up(timeout=30)
    except BaseException:
        agents.stop_all()
        raise
    log(f"agents running on {', '.join(agents.hosts)}: every plane judged up")
    return agents


def run_job(lab: Lab, mode: str, hosts: list[str], schedule: list[Phase], settings: RunSettings,
            log_dir: Path, log: Log) -> Run:
    log_dir.mkdir(parents=True, exist_ok=True)
    planes = [p.name for p in lab.topology.planes]
    job = Job(lab, hosts, settings.plane, settings.job, log_dir)
    sampler = CounterSampler(lab, hosts, planes, settings.sample_ms)
    heartbeats = [UdpStream(lab, src, dst, plane=settings.plane, pps=settings.heartbeat_pps,
                            gap_list_ms=settings.heartbeat_gap_ms)
                  for src, dst in zip(hosts, hosts[1:] + hosts[:1])]
    with ExitStack() as cleanup:
        cleanup.callback(_repair_all, lab)
        sampler.start()
        cleanup.callback(sampler.stop)
        for stream in heartbeats:
            stream.start()
            cleanup.callback(_stop_quietly, stream)
        job.start()
        cleanup.callback(job.stop)
        t0 = job.started_ns
        _wait_for_steps(job, settings.warmup_steps, settings.job.timeout_s, log)
        phase_starts = _play(lab, job, schedule, t0, log)
        ended = _follow(job, time.monotonic() + settings.tail_s, t0, phase_starts[-1][0].name, log)
        end_ns = time.monotonic_ns()
        if not ended:
            log(f"the job has not ended {settings.tail_s:.0f} s after '{phase_starts[-1][0].name}' began: stopping it")
        job.stop()
        ends = [start for _phase, start in phase_starts[1:]] + [end_ns]
        faults = [Fault(phase.name, phase.kind, phase.what, start, end) for (phase, start), end in zip(phase_starts, ends)]
        results = [stream.stop() for stream in heartbeats]
        counters = sampler.stop()
    return Run(
        mode=mode, workload=settings.job.workload, steps_total=settings.job.steps, t0_ns=t0, end_ns=end_ns,
        hosts=hosts, planes=planes, ranks=job.ranks(), faults=faults,
        heartbeats=[Heartbeat(r.src, r.dst, r.target_pps, r.start_ns, r.sent, r.lost, r.gap_list_ms, r.gaps, r.loss_runs)
                    for r in results],
        counters=counters, sample_ms=settings.sample_ms, tcp_retrans=sampler.retrans,
        settings={**asdict(settings), "job": asdict(settings.job)},
    )


def _wait_for_steps(job: Job, steps: int, timeout_s: float, log: Log) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        done, last_ms = job.progress()
        if done >= steps:
            log(f"job warmed up: {done} steps, last {last_ms:.0f} ms")
            return
        if not job.running() or job.failed():
            raise DemoError(f"the job ended before the faults ({'; '.join(job.failed()) or 'all ranks exited'}):\n"
                            + job.output_tail(0))
        if time.monotonic() > deadline:
            raise DemoError(f"the job did not reach {steps} steps in {timeout_s:.0f} s (at {done})")
        time.sleep(0.1)


def _play(lab: Lab, job: Job, schedule: list[Phase], t0: int, log: Log) -> list[tuple[Phase, int]]:
    """Apply each phase, following the job until the next; the start of each in ns. A job
    that ended early ends the schedule: the phases after it would observe nothing."""
    starts: list[tuple[Phase, int]] = []
    for phase in schedule:
        if starts and not job.running():
            log(f"the job ended during '{starts[-1][0].name}': '{phase.name}' and after not played (more --steps)")
            break
        start = time.monotonic_ns()
        phase.apply(lab)
        starts.append((phase, start))
        log(f"{(start - t0) / 1e9:6.1f} s  {phase.name}: {phase.what}")
        if phase.seconds is not None:
            _follow(job, time.monotonic() + phase.seconds, t0, phase.name, log)
    return starts


def _follow(job: Job, until: float, t0: int, phase: str, log: Log, every: float = 2.0) -> bool:
    """Show the job's progress until `until` (monotonic); True if it ended by then."""
    next_line = time.monotonic() + every
    while time.monotonic() < until:
        if not job.running():
            return True
        if time.monotonic() >= next_line:
            done, last_ms = job.progress()
            last = f"{last_ms:.0f} ms" if last_ms is not None else "-"
            log(f"{(time.monotonic_ns() - t0) / 1e9:6.1f} s  step {done}/{job.spec.steps}  last step {last}  [{phase}]")
            next_line += every
        time.sleep(0.1)
    return not job.running()


def _repair_all(lab: Lab) -> None:
    if lab.faults:
        lab.repair_all()


def _stop_quietly(stream: UdpStream) -> None:
    try:
        stream.stop()
    except Exception:
        pass  # the run's own error is what matters
