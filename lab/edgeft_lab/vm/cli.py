"""Command line: edgeft-vm [--topology NAME_OR_PATH] [--name NAME] <command> ...

Faults on a VM lab's switches are the lab's: `edgeft-lab --name NAME fault power-off --switch
sw-a` (a VM's NIC loses carrier with its switch port). Exit codes: 0 ok; 1 operational error;
2 usage or missing prerequisite; 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..cli import UsageError, run_command
from .image import CACHE_ROOT, ensure_image
from .vmlab import ACCELS, DEFAULT_SSH_PORT_BASE, VmLab, require_root

PROG = "edgeft-vm"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="edgeft VM lab (qemu VMs on the lab's switches)")
    parser.add_argument("--topology", "-t", default="vm", help="topology NAME or file with machines: vm; default: vm")
    parser.add_argument("--name", "-n", help="lab name; default: the topology's name")
    parser.add_argument("--accel", choices=ACCELS, default="auto", help="kvm, tcg, or auto: KVM when it runs a guest (default)")
    parser.add_argument("--ssh-port-base", type=int, default=DEFAULT_SSH_PORT_BASE,
                        help=f"VM n's ssh is forwarded from 127.0.0.1:BASE+n-1 (default {DEFAULT_SSH_PORT_BASE})")
    parser.add_argument("--memory", type=int, default=1024, metavar="MIB", help="memory per VM (default 1024)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    build = sub.add_parser("build-image", help=f"build the VM image into the cache ({CACHE_ROOT}) unless it is there")
    build.add_argument("--rebuild", action="store_true", help="build it again even if cached")
    up = sub.add_parser("up", help="build the image if needed, the switches and the VMs; wait for ssh")
    up.add_argument("--inventory", type=Path, metavar="PATH", help="also write the Ansible inventory to PATH")
    sub.add_parser("down", help="stop the VMs, keep their consoles, remove disks and switches (idempotent)")
    status = sub.add_parser("status", help="VMs, their PIDs, ssh ports, accelerator and image")
    status.add_argument("--json", action="store_true")
    ssh = sub.add_parser("ssh", help="run a command on a VM")
    ssh.add_argument("host")
    ssh.add_argument("cmd", nargs=argparse.REMAINDER, help="the command (after --)")
    reboot = sub.add_parser("reboot", help="reboot a VM and wait until it answers ssh again")
    reboot.add_argument("host")
    return parser


def run(args: argparse.Namespace) -> int:
    if args.command != "status":
        require_root()
    vmlab = VmLab(args.topology, args.name, accel=args.accel, ssh_port_base=args.ssh_port_base,
                  memory_mib=args.memory, log=lambda m: print(m, file=sys.stderr))
    if args.command == "build-image":
        image = ensure_image(vmlab.image_spec(), log=lambda m: print(m, file=sys.stderr), rebuild=args.rebuild)
        print(f"image {image.dir} (kernel {image.kernel_release})")
    elif args.command == "up":
        if vmlab.up(inventory=args.inventory):
            print(f"VM lab {vmlab.name} is up")
        else:
            print(f"VM lab {vmlab.name} is already up")
    elif args.command == "down":
        print(f"VM lab {vmlab.name} is down" if vmlab.down() else f"VM lab {vmlab.name} was not running")
    elif args.command == "status":
        state = vmlab.state()
        doc = {"name": vmlab.name, "up": vmlab.is_up(), "vms": vmlab.running(), **(state or {})}
        if args.json:
            print(json.dumps(doc, indent=2))
        else:
            print(f"VM lab {vmlab.name}: {'up' if doc['up'] else 'not up'}"
                  + (f", {state['accel']}, kernel {state['image']['kernel_release']}" if state else ""))
            for host, pid in doc["vms"].items():
                port = (state or {}).get("ports", {}).get(host)
                print(f"  {host}: {'pid ' + str(pid) if pid else 'stopped'}" + (f", ssh 127.0.0.1:{port}" if port else ""))
    elif args.command == "ssh":
        command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not command:
            raise UsageError("ssh needs a command: edgeft-vm ssh HOST -- COMMAND ...")
        proc = vmlab.ssh(args.host, command, timeout=600)
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        return proc.returncode
    elif args.command == "reboot":
        print(f"{args.host} rebooted in {vmlab.reboot(args.host):.1f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_command(PROG, lambda: run(args))
