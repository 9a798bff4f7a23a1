# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent's side of the data path's wake records (edgeft_wake_v1, bpf/edgeft_maps.h): traffic
with a peer resumed, either way, after EDGEFT_WAKE_IDLE_NS without any.

The agent probes peers without traffic rarely (cadence.py). A record makes it probe the peer's
paths at the full rate at once, so traffic that resumes towards a plane that died meanwhile is
failed over within one detection time of its first packet, not after the agent's next look at
the traffic stamps. The ring's fd polls readable when records wait: the loop sleeps until then.
Without the ring (a data path loaded by an earlier edgeft, until its programs are replaced) the
agent scans the stamps every ACTIVITY_SCAN_MS, as it did before the ring existed.
"""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import ACTIVITY_SCAN_MS
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout, ringbuf


class WakeRecords:
    """The ring as the agent reads it: open, or not with the reason."""

    def __init__(self, maps, log) -> None:
        self.ring = None
        self.error = None
        self.read_total = 0
        if maps.wake is None:
            self.error = ("the data path has no edgeft_wake_v1 (loaded by an earlier edgeft): traffic stamps are "
                          "scanned every %d ms until its programs are replaced" % ACTIVITY_SCAN_MS)
        else:
            try:
                self.ring = ringbuf.RingBuffer(maps.wake.fd)
            except OSError as e:
                self.error = "cannot map edgeft_wake_v1: %s; traffic stamps are scanned every %d ms" % (e, ACTIVITY_SCAN_MS)
        if self.error:
            log.warning("%s", self.error)

    @property
    def open(self) -> bool:
        return self.ring is not None

    def read(self) -> set:
        """Peer ids of the records that arrived."""
        records = self.ring.consume()
        self.read_total += len(records)
        return {layout.Wake.from_buffer_copy(r).peer_id for r in records}

    def fileno(self) -> int:
        return self.ring.fileno()

    def status(self) -> dict:
        return {"open": self.open, "error": self.error, "records_read": self.read_total}

    def close(self) -> None:
        if self.ring is not None:
            self.ring.close()
            self.ring = None
