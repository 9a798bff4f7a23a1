# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names for the peer ids the maps hold, for logs, metrics and status.

The maps know ids and addresses only. Names come from the peer_table
module's record in state_dir (name -> id), else from the config's peers
(matched by address), else '#<id>'.
"""

from __future__ import annotations

import os

from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError
from ansible_collections.edgeft.failover.plugins.module_utils.host.records import PEER_TABLE_FILE, PeerTableRecord


class PeerNames:
    def __init__(self, state_dir, pin_root, by_address: dict, log):
        self.state_dir = state_dir
        self.pin_root = pin_root
        self.by_address = by_address
        self.log = log
        self._stamp = None
        self._record = {}
        self._warned = False

    def _load_record(self) -> dict:
        if not self.state_dir:
            return {}
        path = os.path.join(self.state_dir, PEER_TABLE_FILE)
        try:
            stamp = os.stat(path).st_mtime_ns
        except OSError:
            return {}
        if stamp != self._stamp:
            try:
                ids = PeerTableRecord(self.state_dir, self.pin_root).peer_ids
                self._record = {v: k for k, v in ids.items()}
                self._warned = False
            except (OptionError, OSError, ValueError) as e:
                if not self._warned:
                    self.log.warning("peer names: %s", e)
                    self._warned = True
                self._record = {}
            self._stamp = stamp
        return self._record

    def names(self, peers: dict) -> dict:
        """{peer id: name} for peers {id: get_peer()}."""
        record = self._load_record()
        out = {}
        for peer_id, peer in peers.items():
            name = record.get(peer_id)
            if name is None:
                for a in list(peer["v4"]) + list(peer["v6"]):
                    if a and a in self.by_address:
                        name = self.by_address[a]
                        break
            out[peer_id] = name or "#%d" % peer_id
        return out
