"""`edgeft-demo`: a training job rides through a ToR failure on the namespace lab.

Brings up the default lab (2 racks x 2 hosts, planes a and b), runs the job across every host
through the fault schedule (the rack-1 plane-a ToR dies silently, is powered off, is powered on)
without edgeft, then deploys edgeft (site.yml and one agent per host) and runs it again; prints
the report, writes it with the timeline plot, and takes the lab down, also on errors or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from edgeft_lab import Lab, LabError
from edgeft_lab.agents import Agents
from edgeft_lab.names import tor_name

from . import analysis, plot, report
from .job import VENV_PYTHON, WORKLOADS, JobSpec
from .record import MODES, Run
from .runner import REPO, DemoError, RunSettings, deploy_edgeft, run_job
from .schedule import tor_failure

PROG = "edgeft-demo"
LAB_NAME = "demo"
# Healthy step times on the 2-core reference machine: ring ~51 ms, ddp ~95 ms (docs/demo.md).
DEFAULT_STEPS = {"ring": 500, "ddp": 300}
WARMUP_STEPS = 40  # healthy steps before the first fault: the baseline


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--workload", choices=WORKLOADS, default="ring",
                        help="ring: built-in ring all-reduce over TCP (default); ddp: PyTorch DDP, gloo, CPU")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--without-edgeft", dest="modes", action="store_const", const=["without-edgeft"],
                       help="only the run without edgeft: what users get today")
    group.add_argument("--edgeft-only", dest="modes", action="store_const", const=["edgeft"],
                       help="only the run with edgeft")
    parser.add_argument("--steps", type=int, help="training steps (default: ring 500, ddp 300)")
    parser.add_argument("--switch", help="the ToR that fails (default: rack 1's ToR of the job's plane, tor-r1-a)")
    parser.add_argument("--silent-s", type=float, default=6.0, help="seconds the ToR is silent (default 6)")
    parser.add_argument("--off-s", type=float, default=6.0, help="seconds it is powered off (default 6)")
    parser.add_argument("--tail-s", type=float, default=60.0,
                        help="after the power-on, how long the job may take to end before it is stopped (default 60)")
    parser.add_argument("--timeout-s", type=float, default=120.0,
                        help="the job's own timeout: a step waiting longer fails it (default 120)")
    parser.add_argument("--out", type=Path, help="report directory (default .build/demo/<UTC time>)")
    parser.add_argument("--name", default=LAB_NAME, help=f"lab name, the namespace prefix (default {LAB_NAME})")
    parser.set_defaults(modes=list(MODES))
    return parser


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.steps is not None and args.steps <= WARMUP_STEPS:
        parser.error(f"--steps must be more than {WARMUP_STEPS} (the healthy steps before the first fault), not {args.steps}")
    for option in ("silent_s", "off_s", "tail_s", "timeout_s"):
        if getattr(args, option) <= 0:
            parser.error(f"--{option.replace('_', '-')} must be positive, not {getattr(args, option)}")
    if os.geteuid() != 0:
        parser.error("must run as root (namespaces, tc and BPF need it): rerun with sudo")
    if args.workload == "ddp" and subprocess.run([str(VENV_PYTHON), "-c", "import torch"], capture_output=True,
                                                 check=False).returncode != 0:
        parser.error("--workload ddp needs PyTorch in .venv: run it through scripts/demo.sh, which installs "
                     "torch==2.13.0, or '.venv/bin/pip install torch==2.13.0'")


class Progress:
    """Timestamped progress lines, flushed at once (the demo takes minutes)."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def __call__(self, message: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f} s] {message}", flush=True)

    def stage(self, title: str) -> None:
        print(f"\n==== {title} ====", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(parser, args)
    log = Progress()
    try:
        lab = Lab("default", name=args.name, log=log)
    except LabError as e:
        parser.error(f"--name: {e}")
    switch = args.switch or tor_name(1, "a")
    try:
        lab.plan.switch(switch)
    except LabError as e:
        parser.error(f"--switch: {e}")
    if lab.is_up():
        parser.error(f"lab {args.name} is already up (another demo running?); if not: "
                     f"bin/edgeft-lab --name {args.name} down, or choose another --name")
    out = args.out or REPO / ".build" / "demo" / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        parser.error(f"--out: cannot create {out}: {e}")
    spec = JobSpec(workload=args.workload, steps=args.steps or DEFAULT_STEPS[args.workload], timeout_s=args.timeout_s)
    settings = RunSettings(job=spec, tail_s=args.tail_s, warmup_steps=WARMUP_STEPS)
    schedule = tor_failure(switch, args.silent_s, args.off_s)
    hosts = [h.name for h in lab.plan.hosts]
    runs: list[Run] = []
    agents: Agents | None = None
    try:
        log.stage(f"lab up: {args.name} ({', '.join(hosts)}; planes {', '.join(p.name for p in lab.topology.planes)})")
        inventory = out / "inventory.yml"
        lab.up(inventory=inventory)
        for mode in args.modes:
            if mode == "edgeft":
                log.stage("deploy edgeft: playbooks/site.yml, agents")
                agents = deploy_edgeft(lab, inventory, out, log)
            log.stage(f"{mode}: {spec.workload} job on {len(hosts)} hosts, {spec.steps} steps, "
                      f"{switch} fails at step {settings.warmup_steps}")
            run = run_job(lab, mode, hosts, schedule, settings, out / "logs" / mode, log)
            run.save(out / f"run-{mode}.json")
            runs.append(run)
    except (DemoError, LabError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    finally:
        if agents is not None:
            agents.stop_all()
        log.stage("lab down")
        lab.down()
    analyses = [analysis.analyze_run(run) for run in runs]
    text = report.format_report(analyses)
    (out / "report.txt").write_text(text + "\n")
    (out / "report.json").write_text(json.dumps(report.report_dict(analyses), indent=1) + "\n")
    plot.plot_timeline(runs, analyses, out / "timeline.png")
    log.stage("report")
    print(text)
    print(f"\nreport: {out / 'report.txt'} (and report.json, run-*.json)\ntimeline: {out / 'timeline.png'}")
    return 0
