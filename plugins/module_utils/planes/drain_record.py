# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-peer drains plane_state made, per host, in state_dir."""

from __future__ import annotations

import contextlib
import os

from ansible_collections.edgeft.failover.plugins.module_utils import jsonrecord
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError

DRAIN_FILE = "peer_drains.json"
DRAIN_LOCK_FILE = "peer_drains.lock"
# What a peer's down bit for a plane was before plane_state drained the peer there.
BEFORE_CLEAR, BEFORE_JUDGED, BEFORE_LEARNED = "clear", "judged", "learned"


class DrainRecord(jsonrecord.Record):
    """The per-peer drains plane_state made, per host (keyed by pin root, like the peer table's record).

    drains: {peer name: {plane index as text: {"before": clear | judged | learned}}}.
    "before" is the peer's down bit for the plane when we drained it: clear, set
    by the control plane's judgement (the agent), or learned from traffic. An
    undrain clears only a bit that was clear, gives a learned one back to
    learning and leaves a judged one to its owner: it never clears a bit it
    did not set. The maps cannot hold this (a down bit has no owner field).
    """

    FILE, LOCK, WHAT, SECTION = DRAIN_FILE, DRAIN_LOCK_FILE, "peer drain record", "hosts"

    def __init__(self, state_dir, pin_root):
        # state_dir is checked by the peer table's record, read first.
        super().__init__(state_dir, OptionError, os.path.normpath(pin_root), check=False)
        self.drains = self._entry()

    def _entry(self) -> dict:
        entry = self.read_entry()
        kinds = (BEFORE_CLEAR, BEFORE_JUDGED, BEFORE_LEARNED)
        ok = isinstance(entry, dict) and all(
            isinstance(planes, dict) and all(
                str(i).isdigit() and int(i) < layout.PLANE_SLOTS and isinstance(d, dict) and d.get("before") in kinds
                for i, d in planes.items())
            for planes in entry.values())
        if not ok:
            raise OptionError("state_dir: %s: the entry of %s is malformed; remove it (the peers' down bits it "
                              "recorded stay as they are)" % (self.path, self.key))
        return {name: {i: dict(d) for i, d in planes.items()} for name, planes in entry.items() if planes}

    def save(self, drains: dict) -> None:
        """Atomically replace this host's entry (re-reading the other hosts')."""
        drains = {name: dict(sorted(planes.items())) for name, planes in sorted(drains.items()) if planes}
        self.write_entry(drains)
        self.drains = drains

    @contextlib.contextmanager
    def locked(self, create=True):
        """Serialise writers of the record (hosts may share state_dir, each with its own pin root).

        create=False (check mode) never creates state_dir.
        """
        with super().locked(create) as held:
            if held:
                self.drains = self._entry()
            yield self


def drains_by_plane(drains: dict, names, shown=()) -> dict:
    """{plane name: [peer names]} from a DrainRecord's drains; every plane in shown is listed."""
    out = {names[i]: [] for i in shown}
    for name, planes in drains.items():
        for i in planes:
            out.setdefault(names[int(i)], []).append(name)
    return {plane: sorted(peers) for plane, peers in out.items()}
