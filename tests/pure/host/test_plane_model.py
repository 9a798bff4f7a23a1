"""The plane model (host/planes.py): one rule set, and every module that reads planes refuses a
bad declaration with the same message, before it reads or changes anything on the host; so do
the agent's configuration and the failover_addresses filter (which names the host first).

Each module's core is called as the module calls it; the declaration is refused before any
netlink, map or file access, so no kernel is needed.
"""

from __future__ import annotations

import copy
import re

import pytest

from ansible_collections.edgeft.failover.plugins.filter.planes import plane_refusal
from ansible_collections.edgeft.failover.plugins.module_utils import failover_addresses, plane_check, plane_info
from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import Config
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.host import planes as model
from ansible_collections.edgeft.failover.plugins.module_utils.multihome import spec as multihome_spec
from ansible_collections.edgeft.failover.plugins.module_utils.peers import run as peer_table
from ansible_collections.edgeft.failover.plugins.module_utils.planes import state as plane_state

A = {"name": "a", "interface": "fab0", "ipv4": "198.18.1.11/16", "ipv6": "fd0e:d6ef:7a00:1::b/64"}
B = {"name": "b", "interface": "fab1", "ipv4": "198.19.1.11/16", "ipv6": "fd0e:d6ef:7b00:1::b/64"}
PIN_ROOT = "/sys/fs/bpf/edgeft-never-opened"  # the declaration is refused before it is looked at


def _nics(n):
    return [{"name": "p%d" % i, "interface": "fab%d" % i} for i in range(n)]


# Rules on names and interfaces: every module's planes option carries these keys.
NAME_RULES = [
    ("too-many", _nics(5), "planes: 5 planes, the data path has 4 plane slots"),
    ("not-a-dict", [_nics(1)[0], "fab1"], "planes[1]: expected a dict with name, interface and ipv4/ipv6, got 'fab1'"),
    ("no-name", [_nics(1)[0], {"name": "", "interface": "fab1"}], "planes[1].name: a plane name is required"),
    ("same-name", [_nics(1)[0], {"name": "p0", "interface": "fab1"}],
     "planes[1].name: plane 'p0' is already declared at planes[0]"),
    ("no-interface", [_nics(1)[0], {"name": "p1", "interface": ""}], "planes[1].interface: an interface name is required"),
    ("long-interface", [_nics(1)[0], {"name": "p1", "interface": "a-very-long-nic0"}],
     "planes[1].interface: 'a-very-long-nic0' is not a valid interface name (at most 15 characters, no '/', ':' or "
     "spaces)"),
    ("bad-interface", [_nics(1)[0], {"name": "p1", "interface": "fab:1"}],
     "planes[1].interface: 'fab:1' is not a valid interface name"),
    ("same-interface", [_nics(1)[0], {"name": "p1", "interface": "fab0"}],
     "planes[1].interface: 'fab0' already carries plane 'p0' (planes[0])"),
]
# Rules on addresses: for the modules whose planes carry them (multihome, peer_table, plane_info).
ADDRESS_RULES = [
    ("empty", [], "planes: at least one plane is required"),
    ("not-a-list", "fab0", "planes: at least one plane is required"),
    ("ipv4-not-an-address", [A, dict(B, ipv4="198.19.1.300/16")],
     "planes[1].ipv4: '198.19.1.300/16' is not an address with prefix length"),
    ("ipv4-is-ipv6", [A, dict(B, ipv4="fd00::1/64")], "planes[1].ipv4: fd00::1/64 is not an IPv4 address"),
    ("ipv6-link-local", [A, dict(B, ipv6="fe80::1/64")], "planes[1].ipv6: fe80::1 is link-local"),
    ("ipv4-network-address", [A, dict(B, ipv4="198.19.0.0/16")],
     "planes[1].ipv4: 198.19.0.0 is the network address of 198.19.0.0/16"),
    ("ipv4-overlap", [A, dict(B, ipv4="198.18.200.1/16")],
     "planes[1].ipv4: 198.18.0.0/16 overlaps planes[0].ipv4 198.18.0.0/16; planes must use disjoint subnets"),
    ("ipv6-overlap", [A, dict(B, ipv6="fd0e:d6ef:7a00:1::c/64")],
     "planes[1].ipv6: fd0e:d6ef:7a00:1::/64 overlaps planes[0].ipv6 fd0e:d6ef:7a00:1::/64"),
]
FAILOVER_RULES = [
    ("failover-in-native-subnet", [A, dict(B, failover4="198.19.255.1")],
     "planes[1].failover4: 198.19.255.1 is inside the native subnet 198.19.0.0/16 (planes[1].ipv4)"),
    ("failover-twice", [dict(A, failover4="198.20.0.1"), dict(B, failover4="198.20.0.1")],
     "planes[1].failover4: 198.20.0.1 is also planes[0].failover4"),
    ("failover-not-an-address", [A, dict(B, failover6="fd0e:d6ef:7bff::b/64")],
     "planes[1].failover6: 'fd0e:d6ef:7bff::b/64' is not an IP address (give it without a prefix length)"),
]


def _multihome(planes):
    multihome_spec.normalize_planes(planes)


def _peer_table(planes):
    peer_table.peer_table({"planes": planes, "peers": [], "pin_root": PIN_ROOT, "state_dir": "/nonexistent"})


def _plane_info(planes):
    plane_info.plane_info({"planes": planes, "fail_on_mismatch": True, "require_carrier": False})


def _plane_state(planes):
    plane_state.plane_state({"planes": planes, "pin_root": PIN_ROOT, "state": "query"})


def _plane_check(planes):
    plane_check.plane_check({"planes": planes, "plane": "p0", "pin_root": PIN_ROOT})


def _agent(planes):
    Config({"planes": planes})


def _failover_addresses(planes):
    failover_addresses.plan({"h1": planes}, {})


WITH_ADDRESSES = {"multihome": _multihome, "peer_table": _peer_table, "plane_info": _plane_info, "agent": _agent}
NAMES_ONLY = {"plane_state": _plane_state, "plane_check": _plane_check}


def _as_filter_says(message):
    """The filter reads every host's edgeft_planes: each option path it names starts with the host."""
    return re.sub(r"(?<![\w.])planes(?=[\[:])", "host h1: edgeft_planes", message)


def _refusal(run, planes):
    with pytest.raises(EdgeftError) as err:
        run(copy.deepcopy(planes))
    return str(err.value)


@pytest.mark.parametrize("planes,message", [r[1:] for r in NAME_RULES], ids=[r[0] for r in NAME_RULES])
def test_every_module_refuses_a_bad_name_or_interface_alike(planes, message):
    # multihome needs an address on every plane: give each one, so only the rule under test fails.
    addressed = [dict(p, ipv4="198.%d.1.11/16" % (18 + i)) if isinstance(p, dict) else p for i, p in enumerate(planes)]
    refusals = {name: _refusal(run, addressed) for name, run in WITH_ADDRESSES.items()}
    refusals.update({name: _refusal(run, planes) for name, run in NAMES_ONLY.items()})
    assert set(refusals.values()) == {refusals["multihome"]}, refusals
    assert refusals["multihome"].startswith(message)
    assert _refusal(_failover_addresses, addressed) == _as_filter_says(refusals["multihome"])
    assert plane_refusal(copy.deepcopy(addressed), option="planes") == refusals["multihome"]


@pytest.mark.parametrize("planes,message", [r[1:] for r in ADDRESS_RULES + FAILOVER_RULES],
                         ids=[r[0] for r in ADDRESS_RULES + FAILOVER_RULES])
def test_every_module_refuses_a_bad_address_alike(planes, message):
    runs = dict(WITH_ADDRESSES)
    if any(key.startswith("failover") for p in planes if isinstance(p, dict) for key in p):
        del runs["plane_info"]  # plane_info's planes option has no failover addresses
    refusals = {name: _refusal(run, planes) for name, run in runs.items()}
    assert set(refusals.values()) == {refusals["multihome"]}, refusals
    assert refusals["multihome"].startswith(message)
    assert _refusal(_failover_addresses, planes) == _as_filter_says(refusals["multihome"])
    assert plane_refusal(copy.deepcopy(planes), option="planes") == refusals["multihome"]


def test_a_valid_declaration_normalises_once_for_all():
    planes = model.normalize_planes([A, B])
    assert [(p["name"], p["interface"], p["index"], p["where"]) for p in planes] == [
        ("a", "fab0", 0, "planes[0]"), ("b", "fab1", 1, "planes[1]")]
    assert str(planes[1]["ipv4"]) == "198.19.1.11/16" and planes[0]["ifindex"] is None


def test_only_multihome_needs_an_address():
    bare = [{"name": "a", "interface": "fab0"}]
    assert model.normalize_planes(bare)[0]["ipv4"] is None
    with pytest.raises(model.OptionError, match=r"^planes\[0\]: plane 'a' declares no address: give ipv4, ipv6 or both"):
        multihome_spec.normalize_planes(bare)


def test_the_host_check_names_the_missing_nic_and_fills_in_ifindex():
    links = {"fab0": {"ifindex": 7}, "lo": {"ifindex": 1}}
    assert [p["ifindex"] for p in model.normalize_planes([A], links)] == [7]
    with pytest.raises(model.OptionError, match=r"^planes\[1\]\.interface: no interface 'fab1' on this host \(it has: "
                                                r"fab0, lo\)"):
        model.normalize_planes([A, B], links)


def test_only_the_readers_of_an_address_take_it_bare():
    """peer_table and the agent need only the host's address on a plane (documented: with or
    without a prefix length); multihome configures it and plane_info compares it, so they need
    the prefix."""
    planes = [A, dict(B, ipv4="198.19.1.11")]
    assert str(model.normalize_planes(planes, prefix_required=False)[1]["ipv4"]) == "198.19.1.11/32"
    assert Config({"planes": planes}).planes[1][4] == "198.19.1.11"
    for run in (_multihome, _plane_info):
        assert _refusal(run, planes) == "planes[1].ipv4: '198.19.1.11' needs a prefix length (e.g. 198.18.1.11/16)"


def test_the_role_filter_also_holds_the_plane_count_to_the_build():
    """ebpf_failover asserts on plane_refusal before any module runs: a third plane on a data path
    built for two is refused there, not by ebpf_program after multihome configured the plane."""
    c = {"name": "c", "interface": "fab2", "ipv4": "198.20.1.11/16"}
    assert plane_refusal([A, B]) == ""
    assert plane_refusal([A, B, c]) == (
        "edgeft_planes: 3 planes, but the data path is built for 2 (EDGEFT_MAX_PLANES); declare at most 2, or set "
        "ebpf_failover_defines.EDGEFT_MAX_PLANES to 3")
    assert plane_refusal([A, B, c], {"EDGEFT_MAX_PLANES": 3}) == ""
    assert plane_refusal([A, B], {"EDGEFT_MAX_PEERS": "many"}) == (
        "ebpf_failover_defines: EDGEFT_MAX_PEERS: 'many' is not an integer")
    assert plane_refusal([A, B, dict(c, interface="")]) == "edgeft_planes[2].interface: an interface name is required"
