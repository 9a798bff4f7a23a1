"""Reading the peer state map whole: one batch read, and views the agent's resync reuses.

Real maps of both loaders (the session's pinned host); the batch read's fallback for kernels
before 5.6 is forced by making the batch call fail the way such a kernel does (EINVAL).
"""

from __future__ import annotations

import ctypes
import errno

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.agent.steer import Steering
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import bpfsys, layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import BpfSyscallError
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import peer_view


def _capacity(maps):
    return bpfsys.map_info(maps.state.fd).max_entries  # the session host's small table (conftest)


def _fill(maps, count=None):
    count = _capacity(maps) - 4 if count is None else count
    for peer_id in range(count):
        maps.set_peer(peer_id, v4=("198.18.1.%d" % (peer_id % 250 + 2), "198.19.%d.%d" % (peer_id // 250, peer_id % 250 + 2)))


def _walked(maps):
    return {peer_id: bytes(maps.state.get(peer_id)) for peer_id in maps.peer_ids()}


def test_the_batch_read_returns_every_peer_as_a_walk_does(dp):
    _fill(dp.maps)
    read = dp.maps.state.values_by_key()
    assert len(read) == _capacity(dp.maps) - 4
    assert read == _walked(dp.maps)


def test_an_empty_table_reads_as_empty(dp):
    assert dp.maps.state.values_by_key() == {}


def test_kernels_without_batch_reads_walk_the_map(dp, monkeypatch):
    _fill(dp.maps, 20)

    def old_kernel(*_args):
        raise BpfSyscallError("map batch lookup", errno.EINVAL)

    monkeypatch.setattr(bpfsys, "hash_lookup_batch", old_kernel)
    assert dp.maps.state.values_by_key() == _walked(dp.maps)


def test_other_batch_errors_are_not_hidden(dp, monkeypatch):
    def broken(*_args):
        raise BpfSyscallError("map batch lookup", errno.EPERM)

    monkeypatch.setattr(bpfsys, "hash_lookup_batch", broken)
    with pytest.raises(BpfSyscallError):
        dp.maps.state.values_by_key()


def test_steering_keeps_the_views_of_unchanged_peers(dp):
    _fill(dp.maps, 8)
    steer = Steering(dp.maps, dp.pin_dir)
    first = steer.peers()
    assert list(first) == sorted(first)
    assert all(view == peer_view(dp.maps.state.get(peer_id)) for peer_id, view in first.items())

    dp.maps.set_peer(3, v4=("198.18.9.9", "198.19.9.9"))  # readdressed
    dp.maps.delete_peer(5)
    dp.maps.forget_learned(6, 1)  # unchanged: nothing was learned
    state = dp.maps.state.get(7)
    state.learned_mask |= 1 << 1  # what the data path writes when it learns
    dp.maps.state.put(7, state)
    second = steer.peers()

    assert set(second) == set(first) - {5}
    assert [peer_id for peer_id in second if second[peer_id] is not first[peer_id]] == [3, 7]
    assert second[3]["v4"][0] == "198.18.9.9" and second[7]["learned_planes"] == [1]
    assert steer.peers()[3] is second[3]  # a read without change rebuilds nothing


@pytest.mark.parametrize("calls", ["one", "several"])
def test_a_full_table_reads_whole_in_one_call_or_several(dp, calls):
    capacity = _capacity(dp.maps)
    _fill(dp.maps, capacity)
    per_call = capacity if calls == "one" else capacity // 4
    pairs = bpfsys.hash_lookup_batch(dp.maps.state.fd, 4, ctypes.sizeof(layout.PeerState), per_call)
    assert sorted(int.from_bytes(key, "little") for key, _value in pairs) == list(range(capacity))


@pytest.mark.parametrize("kernel", ["batch", "before 5.6"])
def test_last_traffic_reads_both_stamp_arrays_whole(dp, monkeypatch, kernel):
    """The agent's activity scan: the latest rx or tx stamp of each peer asked about, 0 for none,
    the same with the batch reads and with one lookup per slot."""
    _fill(dp.maps, 10)
    dp.maps.seen.put(layout.seen_slot(2, 1), 500)
    dp.maps.sent.put(layout.seen_slot(2, 0), 700)
    dp.maps.seen.put(layout.seen_slot(9, 3), 40)
    dp.maps.sent.put(layout.seen_slot(4, 2), 90)  # not asked about
    if kernel != "batch":
        def old_kernel(*_args):
            raise BpfSyscallError("map batch lookup", errno.EINVAL)

        monkeypatch.setattr(bpfsys, "array_lookup_batch", old_kernel)
    assert dp.maps.last_traffic([9, 2, 0]) == {9: 40, 2: 700, 0: 0}
