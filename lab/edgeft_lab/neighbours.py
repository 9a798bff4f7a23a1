"""Room in the machine's neighbour tables for the labs that are up.

Every lab host keeps a managed neighbour entry per peer, plane and family once edgeft is
deployed, and the namespaces of one machine share one neighbour table per family, whose size
net.ipv{4,6}.neigh.default.gc_thresh3 (and the collection above gc_thresh2) only the initial
namespace can set: 32 hosts on two planes need 1,984 IPv4 entries, over the default 1,024.
So `up` reserves its hosts' entries here and raises the two thresholds machine-wide when the
labs that are up need more than the machine had; `down` gives them back, and the last lab
down restores the values found. The thresholds are sized as peer_table sizes them on a host
(plugins/module_utils/peers/neighbour_limits.py): gc_thresh2 at least the entries plus room
for the machine's own neighbours, gc_thresh3 at least twice that; a lab of 4 hosts changes
nothing.

The record (run_root/neighbour-limits.json, under a lock) names the labs holding a
reservation and the values found first, so a crashed run is undone by the next `down` of
its lab, and a holder whose lab no longer exists is dropped.
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from . import collection

# The sizing rule and the sysctls are peer_table's: one definition for hosts and labs.
SIZING = "plugins.module_utils.peers.neighbour_limits"
RECORD = "neighbour-limits.json"
LOCK = "neighbour-limits.lock"


def lab_entries(local_hosts: int, hosts: int, planes_by_family: dict[int, int]) -> dict[int, int]:
    """{family: entries} a deployed lab keeps in this machine's tables: every host that is a
    namespace here (a VM's entries are in its own kernel), for every other host, on every plane
    of the family."""
    return {family: local_hosts * (hosts - 1) * planes for family, planes in planes_by_family.items()}


class NeighbourLimits:
    """The machine's neighbour table thresholds, raised while labs that need it are up."""

    def __init__(self, run_root: Path, proc_sys: str | None = None) -> None:
        self.run_root = Path(run_root)
        self.path = self.run_root / RECORD
        self.sizing = collection.module(SIZING, "sizing the neighbour tables for a lab")
        self.proc_sys = proc_sys or self.sizing.PROC_SYS

    @contextmanager
    def _locked(self) -> Iterator[dict]:
        self.run_root.mkdir(parents=True, exist_ok=True)
        with open(self.run_root / LOCK, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                record = json.loads(self.path.read_text())
            except (FileNotFoundError, ValueError):
                record = {}
            record.setdefault("original", {})
            record.setdefault("labs", {})
            yield record
            if record["labs"]:
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
                os.replace(tmp, self.path)
            else:
                self.path.unlink(missing_ok=True)

    def hold(self, lab: str, entries: dict[int, int]) -> dict[str, int]:
        """Reserve `lab`'s entries; returns the thresholds raised for it ({} when the machine's fit)."""
        with self._locked() as record:
            record["labs"][lab] = {str(family): count for family, count in entries.items()}
            return self._apply(record)

    def release(self, lab: str) -> dict[str, int]:
        """Give back `lab`'s entries; returns the thresholds lowered (back towards the values found)."""
        with self._locked() as record:
            if record["labs"].pop(lab, None) is None and not record["labs"]:
                return {}
            return self._apply(record)

    def _apply(self, record: dict) -> dict[str, int]:
        """Set gc_thresh2 and 3 to what the labs up need, never below the values found first."""
        sizing = self.sizing
        record["labs"] = {name: held for name, held in record["labs"].items() if (self.run_root / name).is_dir()}
        written = {}
        for family, now in sorted(sizing.read_limits(self.proc_sys).items()):
            names = (sizing.sysctl_name(family, 2), sizing.sysctl_name(family, 3))
            current = dict(zip(names, now[1:]))
            found = {name: record["original"].get(name, current[name]) for name in names}
            total = sum(held.get(str(family), 0) for held in record["labs"].values())
            sized = sizing.wanted((now[0], found[names[0]], found[names[1]]), total)[1:] if total else found.values()
            target = dict(zip(names, sized))
            if target != found:
                for name in names:  # raised: keep what was there for the last lab's down
                    record["original"].setdefault(name, found[name])
            elif not any(name in record["original"] for name in names):
                continue  # the machine's own values fit, and nothing of ours is left to undo
            else:
                for name in names:
                    record["original"].pop(name, None)
            # thresh3 first when raising, thresh2 first when lowering: thresh2 <= thresh3 throughout.
            order = reversed(names) if target[names[1]] >= current[names[1]] else names
            for name in order:
                if target[name] != current[name]:
                    sizing.procsys.write_value(os.path.join(self.proc_sys, *name.split(".")), target[name])
                    written[name] = target[name]
        return written
