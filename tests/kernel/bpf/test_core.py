"""The Python core around the programs: program identity, errors, accessors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import bpf_packets as P
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import addresses, build
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import (
    BccMissingError,
    DatapathError,
    HeadersMissingError,
)


def _fdinfo(fd: int) -> dict:
    with open("/proc/self/fdinfo/%d" % fd) as f:
        return dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)


def test_prog_id_and_tag_match_the_kernel(host):
    for prog in host.planes[0].progs.values():
        info = _fdinfo(prog.fd)
        assert info["prog_tag"].strip() == prog.tag
        assert int(info["prog_id"]) == prog.id
        assert len(prog.tag) == 16


def test_the_two_planes_are_different_programs(host):
    assert host.planes[0].progs["egress"].tag != host.planes[1].progs["egress"].tag


def test_missing_bcc_says_which_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "bcc", None)
    with pytest.raises(BccMissingError, match="python3-bpfcc"):
        build.compile_plane(0, loader="bcc")


def test_missing_headers_say_which_package(monkeypatch):
    monkeypatch.delenv("BCC_KERNEL_SOURCE", raising=False)
    real = os.path.isdir
    monkeypatch.setattr(os.path, "isdir", lambda p: False if "/lib/modules/" in p else real(p))
    with pytest.raises(HeadersMissingError, match="linux-headers-%s" % os.uname().release):
        build.compile_plane(0, loader="bcc")


def test_bad_plane_and_tunables_are_refused_early():
    with pytest.raises(DatapathError, match="EDGEFT_MAX_PLANES"):
        build.compile_plane(2)
    with pytest.raises(ValueError, match="unknown data path tunable"):
        build.compile_plane(0, tunables={"EDGEFT_NOPE": 1})


def test_module_utils_import_without_bcc():
    """ansible-test's import sanity: nothing may need bcc at import time."""
    code = (
        "import sys; sys.modules['bcc'] = None\n"
        "import pkgutil, importlib\n"
        "import ansible_collections.edgeft.failover.plugins.module_utils.datapath as d\n"
        "for m in pkgutil.iter_modules(d.__path__):\n"
        "    importlib.import_module(d.__name__ + '.' + m.name)\n"
    )
    collections = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".build", "collections"))
    env = dict(os.environ, PYTHONPATH=collections)
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


@pytest.mark.parametrize("bad", ["224.0.0.1", "ff02::1", "fe80::1", "127.0.0.1", "::1", "0.0.0.0", "255.255.255.255", "169.254.1.1"])
def test_scoped_or_group_addresses_cannot_name_a_peer(bad):
    with pytest.raises(ValueError):
        addresses.to_key(bad)


def test_address_keys_round_trip():
    for a in (P.PEER[4][0], P.PEER[6][1]):
        assert addresses.from_key(addresses.to_key(a)) == a
    assert bytes(addresses.to_key("198.18.0.2"))[10:] == b"\xff\xff\xc6\x12\x00\x02"


def test_peer_ids_beyond_the_map_are_refused(dp):
    with pytest.raises(ValueError, match="EDGEFT_MAX_PEERS"):
        dp.maps.set_peer(1 << 20, v4=P.PEER[4])


def test_delete_peer_removes_addresses_state_and_last_seen(dp):
    dp.maps.set_peer(P.PEER_ID, v4=P.PEER[4], v6=P.PEER[6])
    dp.maps.set_peer(P.PEER_ID + 1, v4=("198.18.0.3",))
    dp.maps.seen.put(P.PEER_ID * 4, 123)
    dp.maps.delete_peer(P.PEER_ID)
    assert dp.maps.get_peer(P.PEER_ID) is None
    assert dp.maps.addresses() == {"198.18.0.3": (P.PEER_ID + 1, 0)}
    assert dp.maps.last_seen(P.PEER_ID) == [0, 0, 0, 0]


@pytest.mark.parametrize("max_planes", [1, 4])
def test_every_plane_count_passes_the_verifier(max_planes):
    for plane in sorted({0, max_planes - 1}):
        with build.compile_plane(plane, tunables={"EDGEFT_MAX_PLANES": max_planes, "EDGEFT_MAX_PEERS": 8}) as c:
            assert c.progs["egress"].id and c.progs["ingress"].id


def test_four_planes_fall_back_past_unusable_targets():
    """Plane 0 down for the peer, its active plane 1 down too: plane 2 it is."""
    from ansible_collections.edgeft.failover.plugins.module_utils.datapath.testrun import TC_ACT_REDIRECT, prog_test_run

    with build.compile_plane(0, tunables={"EDGEFT_MAX_PLANES": 4, "EDGEFT_MAX_PEERS": 8}) as c:
        for plane in range(4):
            c.maps.set_plane(plane, 1000 + plane)
        c.maps.set_peer(1, v4=["198.18.0.2", "198.19.0.2", "198.18.2.2", "198.18.3.2"], active_plane=1, down_planes=[0, 1])
        pkt = P.to_peer(4)

        def steered_in():
            return [c.maps.plane_counters(p)["steered_in_packets"] for p in range(4)]

        assert prog_test_run(c.progs["egress"].fd, pkt).retval == TC_ACT_REDIRECT
        assert steered_in() == [0, 0, 1, 0]
        c.maps.set_plane(2, 1002, drained=True)
        assert prog_test_run(c.progs["egress"].fd, pkt).retval == TC_ACT_REDIRECT
        assert steered_in() == [0, 0, 1, 1]
        c.maps.set_plane(3, 1003, up=False)
        assert prog_test_run(c.progs["egress"].fd, pkt).retval == -1
        assert c.maps.plane_counters(0)["steered_packets"] == 2
