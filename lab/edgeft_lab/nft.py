"""nftables rules for faults, applied inside a switch namespace with `nft -f -`.

Every fault chain is a netdev base chain hooked on one switch port (ingress: frames the
neighbour sends in; egress: frames the switch sends out), all in one table per namespace.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from . import netns
from .errors import LabError

TABLE = "edgeft_lab_fault"
PRIORITY = -500  # ahead of anything else hooked on the port


@dataclass(frozen=True)
class Chain:
    name: str
    hook: str  # ingress | egress
    device: str
    policy: str = "accept"
    rules: tuple[str, ...] = ()


def chain_name(prefix: str, device: str) -> str:
    return f"{prefix}_{device.replace('-', '_')}"


def drop_all(prefix: str, device: str) -> Chain:
    """Silent switch: the port stays up but nothing it receives is forwarded."""
    return Chain(chain_name(prefix, device), "ingress", device, policy="drop")


def random_loss(prefix: str, hook: str, device: str, percent: int) -> Chain:
    # nft compares numgen's 0..99 with a constant of that range: 100 % is every packet.
    rule = "drop" if percent >= 100 else f"numgen random mod 100 < {percent} drop"
    return Chain(chain_name(prefix, device), hook, device, rules=(rule,))


def add_chains(ns: str, chains: list[Chain]) -> None:
    lines = [f"add table netdev {TABLE}"]
    for c in chains:
        lines.append(
            f'add chain netdev {TABLE} {c.name} {{ type filter hook {c.hook} device "{c.device}" '
            f"priority {PRIORITY}; policy {c.policy}; }}"
        )
        lines += [f"add rule netdev {TABLE} {c.name} {rule}" for rule in c.rules]
    run(ns, lines)


def delete_chains(ns: str, chains: list[Chain]) -> None:
    run(ns, [f"delete chain netdev {TABLE} {c.name}" for c in chains])


def delete_table(ns: str) -> None:
    # "add" first makes the delete succeed even if the table is already gone (idempotent).
    run(ns, [f"add table netdev {TABLE}", f"delete table netdev {TABLE}"])


def run(ns: str, lines: list[str]) -> None:
    """Apply lines as one nft transaction: all of them or none."""
    script = "\n".join(lines) + "\n"
    result = subprocess.run(
        netns.exec_argv(ns, ["nft", "-f", "-"]), input=script, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        detail = (result.stderr.strip().splitlines() or ["no error output"])[0]
        raise LabError(f"nft in namespace {ns} failed: {detail}")


def list_table(ns: str) -> str:
    """The fault table as nft prints it ('' if absent)."""
    result = subprocess.run(
        netns.exec_argv(ns, ["nft", "list", "table", "netdev", TABLE]), capture_output=True, text=True, check=False
    )
    return result.stdout if result.returncode == 0 else ""
