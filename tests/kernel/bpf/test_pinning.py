"""Pinned maps: shared by reloads and by processes that never compiled."""

from __future__ import annotations

import os

import pytest

import bpf_packets as P
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import bpfsys, layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.build import compile_plane
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import (
    DatapathError,
    LayoutMismatchError,
)
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import DatapathMaps
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.testrun import (
    TC_ACT_REDIRECT,
    prog_test_run,
)


def _map_ids(maps: DatapathMaps) -> dict:
    return {name: bpfsys.map_info(h.fd).id for name, h in maps.handles.items()}


def test_every_map_is_pinned_under_the_pin_dir(dp):
    assert sorted(os.listdir(dp.pin_dir)) == sorted(layout.MAPS_BY_NAME)


def test_both_planes_share_one_set_of_maps(dp):
    assert _map_ids(dp.planes[0].maps) == _map_ids(dp.planes[1].maps)


def test_programs_use_the_pinned_maps(dp):
    with DatapathMaps.open_pinned(dp.pin_dir) as pinned:
        pinned_ids = set(_map_ids(pinned).values())
    for plane in dp.planes:
        for prog in plane.progs.values():
            assert set(bpfsys.prog_map_ids(prog.fd)) <= pinned_ids


def test_another_process_view_steers_the_loaded_programs(dp):
    """Fill the peer table through the pins only: the loaded programs obey."""
    with DatapathMaps.open_pinned(dp.pin_dir) as pinned:
        pinned.set_peer(P.PEER_ID, v4=P.PEER[4], v6=P.PEER[6], active_plane=1, down_planes=[0])
        pkt = P.to_peer(4)
        assert prog_test_run(dp.fd(0, "egress"), pkt).retval == TC_ACT_REDIRECT
        assert pinned.plane_counters(0)["steered_packets"] == 1
        assert pinned.addresses()[P.PEER[4][1]] == (P.PEER_ID, 1)
    assert dp.maps.get_peer(P.PEER_ID)["active_plane"] == 1


def test_reload_reuses_the_pinned_maps_and_their_state(dp):
    dp.maps.set_peer(P.PEER_ID, v4=P.PEER[4])
    with compile_plane(0, pin_dir=dp.pin_dir, tunables=dp.planes[0].tunables, loader=dp.loader) as again:
        assert _map_ids(again.maps) == _map_ids(dp.maps)
        assert again.maps.get_peer(P.PEER_ID)["v4"][0] == P.PEER[4][0]
        # same source, same tag: an attach module can tell "already attached"
        assert again.progs["egress"].tag == dp.planes[0].progs["egress"].tag
        assert again.progs["egress"].id != dp.planes[0].progs["egress"].id


def test_pins_of_another_size_are_refused_before_compiling(dp):
    with pytest.raises(LayoutMismatchError) as e:
        compile_plane(0, pin_dir=dp.pin_dir, tunables=dict(dp.planes[0].tunables, EDGEFT_MAX_PEERS=128))
    assert "edgeft_state_v1" in str(e.value)
    assert "remove the pin" in str(e.value)


def test_pin_dir_must_be_on_bpffs(tmp_path):
    with pytest.raises(DatapathError, match="not on a bpf filesystem"):
        compile_plane(0, pin_dir=str(tmp_path / "pins"))


def test_open_pinned_names_the_missing_pin(bpffs):
    empty = os.path.join(bpffs, "empty-host")
    os.makedirs(empty, exist_ok=True)
    with pytest.raises(DatapathError, match="is not pinned"):
        DatapathMaps.open_pinned(empty)


def test_unpinned_compile_keeps_maps_private(dp):
    with compile_plane(1) as private:
        assert set(_map_ids(private.maps).values()).isdisjoint(_map_ids(dp.maps).values())


def test_pins_of_an_earlier_edgeft_without_the_wake_ring_are_read_and_the_next_load_adds_it(dp, bpffs):
    """A rolling upgrade meets hosts whose data path an earlier edgeft loaded: the agent and the
    modules read their maps without edgeft_wake_v1, and the programs' next load pins it."""
    earlier = os.path.join(bpffs, "earlier-host-" + dp.loader)
    with compile_plane(0, pin_dir=earlier, tunables=dp.planes[0].tunables, loader=dp.loader):
        pass
    os.unlink(os.path.join(earlier, "edgeft_wake_v1"))
    with DatapathMaps.open_pinned(earlier) as pinned:
        assert pinned.wake is None
        pinned.set_peer(P.PEER_ID, v4=P.PEER[4])
    with compile_plane(0, pin_dir=earlier, tunables=dp.planes[0].tunables, loader=dp.loader) as again:
        assert again.maps.get_peer(P.PEER_ID)["v4"][0] == P.PEER[4][0]  # the other maps' state kept
    assert sorted(os.listdir(earlier)) == sorted(layout.MAPS_BY_NAME)
    with DatapathMaps.open_pinned(earlier) as pinned:
        assert bpfsys.map_info(pinned.wake.fd).type == layout.MAP_RINGBUF
