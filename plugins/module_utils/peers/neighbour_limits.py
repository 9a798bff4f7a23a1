# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Room in the kernel's neighbour tables for the peer table's managed entries.

The peer table keeps a managed neighbour entry per peer, plane and family (docs/datapath.md).
The kernel holds at most net.ipv{4,6}.neigh.default.gc_thresh3 entries per family (1,024 by
default) and, above gc_thresh2 (512), collects entries it has not confirmed in the last 5 s:
2 planes of 512 peers fill the IPv4 table, and the next entry fails with "No buffer space
available". So before adding entries, peer_table sizes the thresholds for what the host will
hold: gc_thresh2 at least its entries plus room for its other neighbours (so the forced
collection never runs because of ours), gc_thresh3 at least twice that (a burst of other
neighbours still fits). gc_thresh1 stays. It only ever raises them, records the values it
found first (state_dir/neighbour_limits.json) so a removal can put them back, and reports the
change. A host with up to 128 peers on two planes fits the defaults and changes nothing.

The thresholds are machine-wide, visible only in the initial network namespace: inside
another namespace (the namespace lab) there is nothing to read or raise, and the lab raises
them for its hosts itself (docs/lab.md).
"""

from __future__ import annotations

import os

from ansible_collections.edgeft.failover.plugins.module_utils import jsonrecord, procsys
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError

PROC_SYS = "/proc/sys"
OTHER_NEIGHBOURS = 256  # gateways, management and storage networks: the host's own neighbours
MODES = ("grow", "keep")
RECORD_FILE = "neighbour_limits.json"


def sysctl_name(family: int, level: int) -> str:
    return "net.ipv%d.neigh.default.gc_thresh%d" % (family, level)


def _path(root, name) -> str:
    return os.path.join(root, *name.split("."))


def read_limits(root=PROC_SYS) -> dict:
    """{family: (gc_thresh1, gc_thresh2, gc_thresh3)} where this namespace can see them."""
    found = {}
    for family in (4, 6):
        try:
            values = []
            for level in (1, 2, 3):
                with open(_path(root, sysctl_name(family, level))) as f:
                    values.append(int(f.read().strip()))
        except (OSError, ValueError):
            continue  # not the initial namespace (or no IPv6): the machine's limits are not ours to see
        found[family] = tuple(values)
    return found


def entries_after(current_neigh: dict, plan) -> dict:
    """{family: entries this namespace holds after the plan}: what is there now, plus the new
    managed entries, minus the ones the plan deletes."""
    keys = set(current_neigh) | set(plan.neigh_add)
    keys -= set(plan.neigh_delete)
    counts = {4: 0, 6: 0}
    for address, _device in keys:
        counts[6 if ":" in address else 4] += 1
    return counts


def wanted(limits: tuple, entries: int) -> tuple:
    """The thresholds for `entries`: never lower than they are."""
    need = entries + OTHER_NEIGHBOURS
    return limits[0], max(limits[1], need), max(limits[2], 2 * need)


def plan_limits(limits: dict, counts: dict, mode: str) -> dict:
    """{sysctl: {before, after}} of the raises the entries need; with mode 'keep' a table too
    small for them is refused before any change, naming the setting."""
    if mode not in MODES:
        raise OptionError("neighbor_limits: %r is not one of %s" % (mode, ", ".join(MODES)))
    changes = {}
    for family, current in sorted(limits.items()):
        if not counts.get(family):
            continue
        target = wanted(current, counts[family])
        if target == current:
            continue
        if mode == "keep":
            if counts[family] + OTHER_NEIGHBOURS > current[2]:
                raise OptionError(
                    "neighbor_limits: this host needs %d IPv%d neighbour entries (%d of them managed peer entries, "
                    "room for %d others), but %s is %d; set neighbor_limits=grow, or raise it yourself"
                    % (counts[family] + OTHER_NEIGHBOURS, family, counts[family], OTHER_NEIGHBOURS,
                       sysctl_name(family, 3), current[2]))
            continue
        for level, (before, after) in enumerate(zip(current, target), start=1):
            if before != after:
                changes[sysctl_name(family, level)] = {"before": before, "after": after}
    return changes


class LimitsRecord(jsonrecord.Record):
    """The thresholds as edgeft found them, before its first raise (a removal puts them back).
    Machine-wide values, so the record is not keyed by pin root."""

    FILE, WHAT = RECORD_FILE, "neighbour limits record"

    def __init__(self, state_dir):
        super().__init__(state_dir, OptionError)

    @property
    def original(self) -> dict:
        return dict(self.read().get("original", {}))

    def remember(self, changes: dict) -> None:
        """Keep the first value seen of every sysctl about to change."""
        data = self.read() or {"version": self.VERSION}
        original = data.setdefault("original", {})
        added = {name: change["before"] for name, change in changes.items() if name not in original}
        if added:
            original.update(added)
            self.write(data)


def apply_limits(changes: dict, state_dir, root=PROC_SYS) -> None:
    """Record the values found, then raise: thresh3 first, so the three stay ordered at every moment."""
    LimitsRecord(state_dir).remember(changes)
    for name in sorted(changes, key=lambda n: n[-1], reverse=True):
        procsys.write_value(_path(root, name), changes[name]["after"])
