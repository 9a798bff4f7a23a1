# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What edgeft recorded on a host that the kernel cannot hold: the peer table's record.

Read by the peer_table, plane_state and plane_check modules and by the agent
(peer names), so it lives in the host model, below all of them.
"""

from __future__ import annotations

import contextlib
import os

from ansible_collections.edgeft.failover.plugins.module_utils import jsonrecord
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError

PEER_TABLE_FILE = "peer_table.json"
PEER_TABLE_LOCK = "peer_table.lock"


class PeerTableRecord(jsonrecord.Record):
    """What the kernel cannot hold for us, per host (keyed by pin root).

    The maps know peer ids, not names: the name -> id assignment, the plane
    declaration and the neighbour entries we own live in a JSON file, so ids
    stay stable across runs and we only ever delete what we created. Several
    hosts may share the file (the namespace lab): each has its own entry.
    """

    FILE, LOCK, WHAT, SECTION = PEER_TABLE_FILE, PEER_TABLE_LOCK, "peer table record", "tables"

    def __init__(self, state_dir, pin_root):
        super().__init__(state_dir, OptionError, os.path.normpath(pin_root))
        self.table = self.read_entry()

    @property
    def peer_ids(self) -> dict:
        return dict(self.table.get("peers", {}))

    def peer_namer(self):
        """peer id -> name, as every module reports a peer: its recorded name, else #<id>."""
        names = {v: k for k, v in self.peer_ids.items()}
        return lambda peer_id: names.get(peer_id, "#%d" % peer_id)

    @property
    def planes(self) -> list:
        return list(self.table.get("planes", []))

    @property
    def neighbors(self) -> set:
        return {tuple(n) for n in self.table.get("neighbors", [])}

    def save(self, peers: dict, planes: list, neighbors) -> None:
        """Atomically replace this host's entry (re-reading the others)."""
        table = {
            "peers": dict(sorted(peers.items())),
            "planes": [{"name": p["name"], "interface": p["interface"]} for p in planes],
            "neighbors": sorted([a, d] for a, d in neighbors),
        }
        self.write_entry(table)
        self.table = table

    @contextlib.contextmanager
    def locked(self, create=True):
        """Serialise runs sharing the record (and hosts sharing state_dir).

        create=False (check mode) never creates state_dir: without it there
        is no record to protect.
        """
        with super().locked(create) as held:
            if held:
                self.table = self.read_entry()
            yield self
