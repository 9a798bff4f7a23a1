"""Command line: edgeft-lab [--topology NAME_OR_PATH] [--name NAME] <command> ...

Exit codes: 0 ok; 1 operational error or failed pings; 2 invalid topology, usage or missing
prerequisite; 130 interrupted. Expected problems print one line, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .errors import LabError, RefusedError, TopologyError
from .faults import KINDS, SIDES, Fault
from .lab import Lab
from .traffic_cli import add_parser as add_traffic_parser
from .traffic_cli import run as run_traffic
from .topology import DEFAULT_LAB_NAME, load_topology

PROG = "edgeft-lab"
NEEDS_ROOT = {"up", "down", "status", "fault", "repair", "ping-matrix", "traffic"}
# Commands that act on a running lab use the topology it was built from unless told otherwise.
USES_RUNNING_TOPOLOGY = {"down", "status", "fault", "repair", "ping-matrix", "traffic"}
TOOLS = {
    "ip": "install iproute2 (apt-get install iproute2)",
    "nft": "install nftables (apt-get install nftables)",
    "ping": "install iputils-ping (apt-get install iputils-ping)",
}
TOOLS_FOR = {"up": ("ip", "nft"), "down": ("ip",), "status": ("ip",), "fault": ("ip", "nft"),
             "repair": ("ip", "nft"), "ping-matrix": ("ip", "ping")}


class UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="edgeft namespace fabric lab")
    parser.add_argument("--topology", "-t", help="topology NAME (lab/topologies/NAME.yml) or file path; default: default")
    parser.add_argument("--name", "-n", help="lab name (namespace prefix); default: the topology's name")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("validate", help="check the topology file and print a summary")
    up = sub.add_parser("up", help="build the fabric (a no-op if it is already up)")
    up.add_argument("--inventory", type=Path, metavar="PATH", help="also write the Ansible inventory to PATH")
    sub.add_parser("down", help="remove everything the lab created (idempotent)")
    status = sub.add_parser("status", help="show nodes, links, addresses, link states and active faults")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    inventory = sub.add_parser("inventory", help="write the Ansible inventory (stdout by default)")
    inventory.add_argument("-o", "--output", type=Path, metavar="PATH")
    ping = sub.add_parser("ping-matrix", help="ping every host from every host on every plane, IPv4 and IPv6")
    ping.add_argument("--count", type=int, default=1, help="pings per pair (default 1)")
    ping.add_argument("--timeout", type=float, default=1.0, help="seconds to wait for a reply (default 1)")

    fault = sub.add_parser("fault", help="inject a fault")
    fault_kinds = fault.add_subparsers(dest="kind", required=True, metavar="KIND")
    _fault_parser(fault_kinds, "link-down", "set one end of a host's link down", host=True, side=True)
    _fault_parser(fault_kinds, "power-off", "set every port of a switch down", switch=True)
    _fault_parser(fault_kinds, "silent", "switch keeps links up but forwards nothing", switch=True)
    _fault_parser(fault_kinds, "loss", "random loss on a switch or on a host's link", host=True, switch=True, percent=True)
    _fault_parser(fault_kinds, "flap", "toggle a host's link in the background", host=True, side=True, flap=True)

    repair = sub.add_parser("repair", help="repair faults: KIND with target options, or --all")
    repair.add_argument("--all", action="store_true", help="repair every active fault")
    repair_kinds = repair.add_subparsers(dest="kind", metavar="KIND")
    for kind in KINDS:
        _fault_parser(repair_kinds, kind, f"repair {kind} faults (unspecified targets match all)",
                      host=True, switch=True, side=True, optional=True)
    add_traffic_parser(sub)
    return parser


def _fault_parser(
    sub: argparse._SubParsersAction, kind: str, help_text: str, *, host: bool = False, switch: bool = False,
    side: bool = False, percent: bool = False, flap: bool = False, optional: bool = False,
) -> None:
    p = sub.add_parser(kind, help=help_text)
    if host:
        p.add_argument("--host", help="host name, e.g. r1h1")
        p.add_argument("--plane", help="plane name, e.g. a")
    if switch:
        p.add_argument("--switch", help="switch name, e.g. tor-r1-a")
    if side:
        p.add_argument("--side", choices=SIDES, help="which end of the link" + ("" if optional else
                       " (flap default: switch)" if flap else ""))
    if percent:
        p.add_argument("--percent", type=int, required=True, help="drop probability in %% (1-100)")
    if flap:
        p.add_argument("--hz", type=float, default=5.0, help="down/up cycles per second (default 5)")
        p.add_argument("--duration", type=float, default=10.0, help="seconds (default 10)")


def _fault_from_args(args: argparse.Namespace) -> Fault:
    return Fault(
        kind=args.kind,
        host=getattr(args, "host", None),
        plane=getattr(args, "plane", None),
        side=getattr(args, "side", None),
        switch=getattr(args, "switch", None),
        percent=getattr(args, "percent", None),
        hz=getattr(args, "hz", None),
        duration=getattr(args, "duration", None),
    )


def check_prerequisites(command: str) -> None:
    if command not in NEEDS_ROOT:
        return
    if os.geteuid() != 0:
        raise UsageError(f"'{command}' must run as root (network namespaces need it): rerun with sudo")
    for tool in TOOLS_FOR.get(command, ()):
        if shutil.which(tool) is None:
            raise UsageError(f"'{tool}' not found: {TOOLS[tool]}")


def make_lab(args: argparse.Namespace, log: Callable[[str], None]) -> Lab:
    if args.topology is None and args.command in USES_RUNNING_TOPOLOGY:
        running = Lab.running(args.name or DEFAULT_LAB_NAME, log=log)
        if running is not None:
            return running
    return Lab(args.topology or "default", name=args.name, log=log)


def run(args: argparse.Namespace) -> int:
    def log(message: str) -> None:
        print(message, file=sys.stderr)

    if args.command == "validate":
        topology = load_topology(args.topology or "default")
        if args.name:
            topology = topology.renamed(args.name)
        lab = Lab(topology)
        print(f"{topology.source}: ok: lab {topology.name}, {topology.kind} {topology.mode}, "
              f"{len(lab.plan.hosts)} hosts, {len(lab.plan.switches)} switches, {len(lab.plan.links)} links, "
              f"planes {', '.join(p.name for p in topology.planes)}")
        return 0

    lab = make_lab(args, log)
    cmd = args.command
    if cmd == "up":
        start = time.monotonic()
        if lab.up(inventory=args.inventory):
            print(f"lab {lab.name} up: {len(lab.plan.namespaces)} namespaces, {len(lab.plan.links)} links, "
                  f"bpffs {lab.bpffs} ({time.monotonic() - start:.2f} s)")
        else:
            print(f"lab {lab.name} is already up with this topology: nothing to do")
        if args.inventory:
            print(f"inventory written to {args.inventory}")
    elif cmd == "down":
        start = time.monotonic()
        if lab.down():
            print(f"lab {lab.name} down ({time.monotonic() - start:.2f} s)")
        else:
            print(f"lab {lab.name} is not running: nothing to do")
    elif cmd == "status":
        doc = lab.status()
        print(json.dumps(doc, indent=2) if args.json else lab.format_status())
    elif cmd == "inventory":
        if args.output:
            lab.write_inventory(args.output)
            print(f"inventory for lab {lab.name} written to {args.output}", file=sys.stderr)
        else:
            sys.stdout.write(lab.render_inventory())
    elif cmd == "ping-matrix":
        if args.count < 1 or args.timeout <= 0:
            raise UsageError("--count must be at least 1 and --timeout above 0")
        if not lab.is_up():
            raise LabError(f"lab {lab.name} is not up (run: edgeft-lab --name {lab.name} up)")
        matrix = lab.ping_matrix(count=args.count, timeout=args.timeout)
        print(matrix.format())
        return 0 if matrix.ok else 1
    elif cmd == "fault":
        fault = lab.fault(_fault_from_args(args))
        print(f"fault injected: {fault.describe()}")
    elif cmd == "repair":
        if args.all == (args.kind is not None):
            raise UsageError("repair needs a fault KIND or --all (not both)")
        repaired = lab.repair_all() if args.all else lab.repair(_fault_from_args(args))
        for fault in repaired:
            print(f"repaired: {fault.describe()}")
        if not repaired:
            print("no active faults")
    elif cmd == "traffic":
        return run_traffic(lab, args)
    return 0


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt()


def run_command(prog: str, command: Callable[[], int]) -> int:
    """Run a CLI command: expected problems as one line and an exit code, never a traceback."""
    # SIGTERM unwinds like Ctrl-C, so a killed `up` still removes what it created.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        return command()
    except (TopologyError, RefusedError, UsageError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except LabError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into e.g. head, which stopped reading
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def command() -> int:
        check_prerequisites(args.command)
        return run(args)

    return run_command(PROG, command)
