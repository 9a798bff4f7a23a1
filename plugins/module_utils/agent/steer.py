# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent's writes to the data path maps, and what it reads back at start.

Each write is a read-modify-write of one value under the pin directory lock
(handle.pin_dir_lock), like the modules' writes. The agent owns two things
(docs/datapath.md): the UP flag of each plane, and the down bits of peers that
are not learned (its judgement). Learned bits and DRAINED are never set here.
"""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.handle import pin_dir_lock
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import now_ns, peer_view


class Steering:
    def __init__(self, maps, pin_root: str):
        self.maps = maps
        self.pin_root = pin_root
        self._read = {}  # peer id -> (its state value's bytes, its view) as of the last peers()

    # --- reads (start-up, resync, metrics) --------------------------------
    def peers(self) -> dict:
        """peer id -> {v4: [..], v6: [..], active_plane, down_planes, learned_planes, ...}
        (maps.peer_view), in id order. The state map is read whole (one batch read); a peer
        whose state did not change since the last call keeps its view, the same object, so
        the resync finds what changed by identity and does not rebuild 4,096 views a second.
        The views are shared: read them, never change them."""
        read = {}
        for peer_id, raw in sorted(self.maps.state.values_by_key().items()):
            last = self._read.get(peer_id)
            read[peer_id] = last if last is not None and last[0] == raw else (raw, peer_view(layout.PeerState.from_buffer_copy(raw)))
        self._read = read
        return {peer_id: view for peer_id, (_raw, view) in read.items()}

    def plane(self, index: int):
        return self.maps.planes.get(index)

    # --- writes -------------------------------------------------------------
    def path_down(self, peer_id: int, plane: int, targets) -> object:
        """Mark plane down for the peer (our judgement) and make its active plane
        the first of `targets` (healthy planes, in preference order) that is not
        down. Returns the active plane afterwards, None if the peer is gone."""
        bit = 1 << plane
        with pin_dir_lock(self.pin_root):
            st = self.maps.state.get(peer_id)
            if st is None:
                return None
            st.down_mask |= bit
            st.learned_mask &= ~bit  # a packet must not undo what probes judged
            if st.active_plane >= layout.PLANE_SLOTS or st.down_mask & (1 << st.active_plane):
                for t in targets:
                    if not st.down_mask & (1 << t):
                        st.active_plane = t
                        break
            st.changed_ns = now_ns()  # learning hold: in-flight packets must not undo it
            self.maps.state.put(peer_id, st)
            return st.active_plane

    def path_up(self, peer_id: int, plane: int) -> bool:
        """Fail back: the peer's traffic may use plane again. False if the peer is gone."""
        with pin_dir_lock(self.pin_root):
            if self.maps.state.get(peer_id) is None:
                return False
            self.maps.clear_down(peer_id, plane)
            return True

    def forget_learned(self, peer_id: int, plane: int) -> bool:
        """Clear a down bit the data path learned (never one we judged); True if it did."""
        with pin_dir_lock(self.pin_root):
            return self.maps.forget_learned(peer_id, plane)

    def set_plane_up(self, plane: int, up: bool) -> bool:
        """Set or clear a configured plane's UP flag, keeping DRAINED; True if it changed."""
        with pin_dir_lock(self.pin_root):
            p = self.maps.planes.get(plane)
            if not p.ifindex:
                return False
            flags = (p.flags | layout.PLANE_UP) if up else (p.flags & ~layout.PLANE_UP)
            if flags == p.flags:
                return False
            if up:
                # Traffic comes back onto the plane: peers' packets still in flight
                # on the other plane must not be learned (docs/datapath.md, the hold).
                self.maps.hold()
            self.maps.set_plane_flags(plane, flags)
            return True
