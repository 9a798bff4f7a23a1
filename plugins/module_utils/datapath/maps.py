# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Typed access to the edgeft maps, by fd: from a bcc object or from pins.

One code path (raw bpf(2) on an fd) serves both the process that compiled the
programs and any other one that opens the pins, so they cannot disagree.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import time

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import addresses, bpfsys, layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import BpfSyscallError, DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.handle import MapHandle, check_map


def now_ns() -> int:
    """The programs' clock (bpf_ktime_get_ns is CLOCK_MONOTONIC)."""
    return time.monotonic_ns()


class DatapathMaps:
    """The edgeft maps of one host, with peer/plane-level helpers."""

    def __init__(self, handles: dict) -> None:
        self.handles = handles
        self.peers = handles["edgeft_peers_v1"]
        self.state = handles["edgeft_state_v1"]
        self.seen = handles["edgeft_seen_v1"]
        self.sent = handles["edgeft_sent_v1"]
        self.planes = handles["edgeft_plane_v1"]
        self.counters = handles["edgeft_ctrs_v1"]
        self.failover = handles["edgeft_fo_v1"]
        self.xlat = handles["edgeft_xlat_v1"]
        self.xlat_counters = handles["edgeft_xctr_v1"]
        # A ring buffer (read with ringbuf.RingBuffer(self.wake.fd)); None on a data path loaded by
        # an edgeft without it.
        self.wake = handles.get("edgeft_wake_v1")

    @classmethod
    def from_fds(cls, fds: dict, owned: bool = False) -> "DatapathMaps":
        """fds: map name -> fd; every layout map must be present (layout.ADDED_MAPS may be
        missing) and match."""
        handles = {}
        for spec in layout.MAPS:
            if spec.name not in fds:
                if spec.name in layout.ADDED_MAPS:
                    continue
                raise DatapathError("map %s missing" % spec.name)
            check_map(fds[spec.name], spec)
            handles[spec.name] = MapHandle(spec, fds[spec.name], owned)
        return cls(handles)

    @classmethod
    def open_pinned(cls, pin_dir: str) -> "DatapathMaps":
        """Open the maps pinned under pin_dir (no bcc needed)."""
        fds = {}
        try:
            for spec in layout.MAPS:
                path = os.path.join(pin_dir, spec.name)
                if not os.path.exists(path):
                    if spec.name in layout.ADDED_MAPS:
                        continue  # loaded by an earlier edgeft
                    raise DatapathError("%s is not pinned: load the edgeft programs with pin root %s first" % (path, pin_dir))
                fds[spec.name] = bpfsys.obj_get(path)
            return cls.from_fds(fds, owned=True)
        except Exception:
            for fd in fds.values():
                os.close(fd)
            raise

    def close(self) -> None:
        for h in self.handles.values():
            h.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # planes --------------------------------------------------------------
    def set_plane(self, plane: int, ifindex: int, up: bool = True, drained: bool = False, routed: bool = False) -> None:
        flags = (layout.PLANE_UP if up else 0) | (layout.PLANE_DRAINED if drained else 0) | (layout.PLANE_ROUTED if routed else 0)
        self.planes.put(plane, layout.Plane(ifindex=ifindex, flags=flags))

    def get_plane(self, plane: int) -> dict:
        p = self.planes.get(plane)
        return {
            "ifindex": p.ifindex,
            "up": bool(p.flags & layout.PLANE_UP),
            "drained": bool(p.flags & layout.PLANE_DRAINED),
            "routed": bool(p.flags & layout.PLANE_ROUTED),
        }

    def set_plane_flags(self, plane: int, flags: int) -> None:
        """Replace a configured plane's flags, keeping its ifindex."""
        p = self.planes.get(plane)
        p.flags = flags
        self.planes.put(plane, p)

    def capacity(self) -> dict:
        """max_entries of the sized maps, as the pins were created."""
        return {
            "peers": bpfsys.map_info(self.state.fd).max_entries,
            "addresses": bpfsys.map_info(self.peers.fd).max_entries,
        }

    # failover addresses (routed planes) -----------------------------------
    def set_failover(self, native: str, plane: int, failover: str, local: bool = False) -> None:
        """`failover` on `plane` stands for `native` (this host's own when local):
        egress translates to it, ingress back (both directions' entries)."""
        native_key, failover_key = addresses.to_key(native), addresses.to_key(failover)
        if _is_v4_key(native_key) != _is_v4_key(failover_key):
            raise DatapathError("failover address %s and native address %s are not of one family" % (failover, native))
        old = self.failover.get(layout.FoKey(native=native_key, plane=plane))
        if old is not None and bytes(old) != bytes(failover_key):
            self.xlat.delete(old)
        self.xlat.put(failover_key, layout.Xlat(native=native_key, flags=layout.XLAT_LOCAL if local else 0))
        self.failover.put(layout.FoKey(native=native_key, plane=plane), failover_key)

    def delete_failover(self, native: str, plane: int) -> bool:
        key = layout.FoKey(native=addresses.to_key(native), plane=plane)
        old = self.failover.get(key)
        if old is None:
            return False
        self.xlat.delete(old)
        return self.failover.delete(key)

    def failovers(self) -> dict:
        """(native, plane) -> (failover address, local)."""
        out = {}
        for k in self.failover.keys():
            addr = self.failover.get(k)
            if addr is None:
                continue
            x = self.xlat.get(addr)
            out[(addresses.from_key(k.native), k.plane)] = (addresses.from_key(addr), bool(x and x.flags & layout.XLAT_LOCAL))
        return out

    # peers ---------------------------------------------------------------
    def set_address(self, address: str, peer_id: int, plane: int = layout.PLANE_NONE) -> None:
        """Map one of a peer's addresses (native on plane, or PLANE_NONE) to it."""
        self._check_peer_id(peer_id)
        self.peers.put(addresses.to_key(address), layout.PeerRef(peer_id=peer_id, plane=plane))

    def delete_address(self, address: str) -> bool:
        return self.peers.delete(addresses.to_key(address))

    def addresses(self) -> dict:
        """address -> (peer id, plane)."""
        out = {}
        for k in self.peers.keys():
            ref = self.peers.get(k)
            if ref is not None:
                out[addresses.from_key(k)] = (ref.peer_id, ref.plane)
        return out

    def set_peer(
        self,
        peer_id: int,
        v4=(),
        v6=(),
        active_plane: int = 0,
        down_planes=(),
        flags: int = 0,
    ) -> None:
        """Write a peer's state. v4/v6: its address per plane (None: none there).

        Also maps every given address to the peer (native on its plane).
        """
        self._check_peer_id(peer_id)
        st = layout.PeerState(active_plane=active_plane, flags=flags)
        _set_next_hops(st, v4, v6)
        st.down_mask = _mask(down_planes)
        self.state.put(peer_id, st)
        for family in (v4, v6):
            for plane, a in enumerate(family):
                if a is not None:
                    self.set_address(a, peer_id, plane)

    def write_state(self, peer_id: int, v4=(), v6=(), flags: int = 0) -> None:
        """Set a peer's next hops and flags, keeping what traffic taught.

        active_plane, down_mask, learned_mask and changed_ns of an existing
        peer are kept (read-modify-write), so re-filling the table never undoes
        a failover in progress; a new peer starts on plane 0 with nothing down.
        Address keys are not touched (the caller orders those writes).
        """
        self._check_peer_id(peer_id)
        st = self.state.get(peer_id) or layout.PeerState()
        for plane in range(layout.PLANE_SLOTS):
            st.v4[plane] = 0
            st.v6[plane] = layout.Addr()
        _set_next_hops(st, v4, v6)
        st.flags = flags
        self.state.put(peer_id, st)

    def set_active(self, peer_id: int, plane: int, exclusive: bool = True) -> None:
        """Send this peer's traffic to plane; exclusive marks every other plane down.

        A control-plane judgement: learned bits are dropped, and packets cannot
        change it for EDGEFT_LEARN_HOLD_NS (changed_ns = now).
        """
        st = self._state(peer_id)
        st.active_plane = plane
        if exclusive:
            st.down_mask = ((1 << layout.PLANE_SLOTS) - 1) & ~(1 << plane)
            st.learned_mask = 0
        st.changed_ns = now_ns()
        self.state.put(peer_id, st)

    def clear_down(self, peer_id: int, plane: int) -> None:
        """Fail back: the peer's traffic may use plane again (judged or learned)."""
        self._clear_down(self._state(peer_id), peer_id, plane)

    def forget_learned(self, peer_id: int, plane: int) -> bool:
        """clear_down only where the down bit was learned from the peer's steering (never one
        the control plane judged); True if it was. The caller holds the pin directory lock."""
        st = self.state.get(peer_id)
        if st is None or not st.learned_mask & (1 << plane):
            return False
        self._clear_down(st, peer_id, plane)
        return True

    def _clear_down(self, st, peer_id: int, plane: int) -> None:
        st.down_mask &= ~(1 << plane)
        st.learned_mask &= ~(1 << plane)
        if not st.down_mask:  # nothing left to avoid: report the plane that came back
            st.active_plane = plane
        st.changed_ns = now_ns()
        self.state.put(peer_id, st)

    def hold(self, peer_ids=None, at_ns: int = None) -> None:
        """Stamp changed_ns: packets change nothing for EDGEFT_LEARN_HOLD_NS.

        Used when the control plane moves traffic back onto a plane (undrain,
        failback): the peer's packets still in flight on the other plane would
        otherwise be learned and move us away again.
        """
        at_ns = now_ns() if at_ns is None else at_ns
        for peer_id in self.peer_ids() if peer_ids is None else peer_ids:
            st = self.state.get(peer_id)
            if st is not None:
                st.changed_ns = at_ns
                self.state.put(peer_id, st)

    def peer_ids(self) -> list:
        return sorted(k.value for k in self.state.keys())

    def _state(self, peer_id: int):
        st = self.state.get(peer_id)
        if st is None:
            raise DatapathError("peer %d has no state" % peer_id)
        return st

    def get_peer(self, peer_id: int):
        st = self.state.get(peer_id)
        if st is None:
            return None
        return peer_view(st)

    def delete_peer(self, peer_id: int) -> None:
        """Remove the peer's state, its addresses and its last-seen slots."""
        for k in self.peers.keys():
            ref = self.peers.get(k)
            if ref is not None and ref.peer_id == peer_id:
                self.peers.delete(k)
        self.state.delete(peer_id)
        self.clear_seen(peer_id)

    def clear_seen(self, peer_id: int) -> None:
        """Zero the peer's last rx and last tx slots (a reused id starts unheard)."""
        for plane in range(layout.PLANE_SLOTS):
            self.seen.put(layout.seen_slot(peer_id, plane), 0)
            self.sent.put(layout.seen_slot(peer_id, plane), 0)

    def last_seen(self, peer_id: int) -> list:
        """Last rx ns (CLOCK_MONOTONIC) per plane; 0 = never."""
        return [self.seen.get(layout.seen_slot(peer_id, p)).value for p in range(layout.PLANE_SLOTS)]

    def last_sent(self, peer_id: int) -> list:
        """Last tx ns (CLOCK_MONOTONIC) per plane NIC the packets were routed to; 0 = never."""
        return [self.sent.get(layout.seen_slot(peer_id, p)).value for p in range(layout.PLANE_SLOTS)]

    def last_traffic(self, peer_ids) -> dict:
        """peer id -> the latest rx or tx ns on any plane (0 = none), for many peers at
        once: two batch reads of the slots up to the highest id, not one lookup per slot."""
        ids = list(peer_ids)
        if not ids:
            return {}
        count = (max(ids) + 1) * layout.PLANE_SLOTS
        stamps = []
        for handle in (self.seen, self.sent):
            values = (ctypes.c_uint64 * count)()  # zeros: slots a batch read did not reach stay 0
            try:
                bpfsys.array_lookup_batch(handle.fd, values, count)
            except BpfSyscallError as e:
                if not bpfsys.batch_unsupported(e):
                    raise
                for peer_id in ids:  # a kernel before 5.6: one lookup per slot of the peers asked about
                    for p in range(layout.PLANE_SLOTS):
                        slot = layout.seen_slot(peer_id, p)
                        values[slot] = handle.get(slot).value
            stamps.append(values[:])  # a list of ints, made in C: the rest slices it
        seen, sent = stamps
        out = {}
        for pid in ids:
            first = layout.seen_slot(pid, 0)  # a peer's slots are contiguous, plane 0 first
            end = first + layout.PLANE_SLOTS
            out[pid] = max(seen[first:end] + sent[first:end])
        return out

    def plane_counters(self, plane: int) -> dict:
        """Counters of one plane, summed over CPUs."""
        return _sum_per_cpu(self.counters, plane, layout.Counters)

    def xlat_counters_of(self, plane: int) -> dict:
        """Routed-mode translation counters of one plane, summed over CPUs."""
        return _sum_per_cpu(self.xlat_counters, plane, layout.XlatCounters)

    def clear(self) -> None:
        """Empty every map (tests, or a host leaving the fabric)."""
        for h in self.handles.values():
            h.clear()

    def _check_peer_id(self, peer_id: int) -> None:
        limit = bpfsys.map_info(self.state.fd).max_entries
        if not 0 <= peer_id < limit:
            raise ValueError("peer id %d out of range 0..%d (EDGEFT_MAX_PEERS)" % (peer_id, limit - 1))


def peer_view(st) -> dict:
    """A peer state value (layout.PeerState) as get_peer() returns it."""
    return {
        "v4": [addresses.v4_text(w) for w in st.v4],
        "v6": [addresses.v6_text(a) for a in st.v6],
        "active_plane": st.active_plane,
        "down_planes": [p for p in range(layout.PLANE_SLOTS) if st.down_mask & (1 << p)],
        "learned_planes": [p for p in range(layout.PLANE_SLOTS) if st.learned_mask & (1 << p)],
        "flags": st.flags,
        "changed_ns": st.changed_ns,
    }


def _set_next_hops(st, v4, v6) -> None:
    for plane, a in enumerate(v4):
        st.v4[plane] = addresses.v4_word(a)
    for plane, a in enumerate(v6):
        st.v6[plane] = addresses.v6_addr(a)


def _mask(planes) -> int:
    m = 0
    for p in planes:
        if not 0 <= p < layout.PLANE_SLOTS:
            raise ValueError("plane %d out of range 0..%d" % (p, layout.PLANE_SLOTS - 1))
        m |= 1 << p
    return m


def _is_v4_key(key) -> bool:
    return ipaddress.IPv6Address(bytes(key)).ipv4_mapped is not None


def _sum_per_cpu(handle, key, struct) -> dict:
    total = {f[0]: 0 for f in struct._fields_}
    for per_cpu in handle.get(key):
        for name in total:
            total[name] += getattr(per_cpu, name)
    return total
