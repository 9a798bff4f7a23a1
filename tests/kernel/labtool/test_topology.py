"""Topology validation: every bad input is rejected before anything is created."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import yaml
from edgeft_lab import Lab, TopologyError, load_topology
from edgeft_lab.topology import TOPOLOGY_DIR
from lab_helpers import assert_nothing_left, unique_name
from repo import REPO


BASE = {
    "name": unique_name(),  # never the prefix of a lab running beside the tests
    "fabric": {"kind": "leaf-spine", "mode": "l2"},
    "racks": 2,
    "hosts_per_rack": 2,
    "planes": [
        {"name": "a", "nic": "fab0", "ipv4": "198.18.0.0/16", "ipv6": "fd0e:d6ef:7a00::/56"},
        {"name": "b", "nic": "fab1", "ipv4": "198.19.0.0/16", "ipv6": "fd0e:d6ef:7b00::/56"},
    ],
}


def _set(path: str, value: object):
    """A mutation of BASE: set the value at a dotted path (list indexes as numbers)."""

    def mutate(doc: dict) -> None:
        *parents, last = path.split(".")
        node = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if value is _DELETE:
            del node[last]
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


_DELETE = object()

BAD_CASES = [
    # (id, mutation, key path, part of the reason)
    ("unknown-top-key", _set("colour", "red"), "colour", "unknown key"),
    ("unknown-fabric-key", _set("fabric.spines", 2), "fabric.spines", "unknown key"),
    ("unknown-plane-key", _set("planes.0.vlan", 7), "planes[0].vlan", "unknown key"),
    ("explicit-links-not-in-schema", _set("links", [{"from": "tor-r1-a", "to": "spine-z"}]), "links", "unknown key"),
    ("missing-planes", _set("planes", _DELETE), "planes", "required key is missing"),
    ("missing-plane-ipv6", _set("planes.1.ipv6", _DELETE), "planes[1].ipv6", "required key is missing"),
    ("bad-kind", _set("fabric.kind", "mesh"), "fabric.kind", "must be one of"),
    ("bad-mode", _set("fabric.mode", "bgp"), "fabric.mode", "must be one of"),
    ("racks-zero", _set("racks", 0), "racks", "between 1 and"),
    ("racks-bool", _set("racks", True), "racks", "must be an integer"),
    ("racks-string", _set("racks", "two"), "racks", "must be an integer"),
    ("hosts-list-length", _set("hosts_per_rack", [1, 2, 3]), "hosts_per_rack", "3 entries but racks is 2"),
    ("hosts-too-many", _set("hosts_per_rack", 245), "hosts_per_rack", "between 1 and 244"),
    ("mtu-too-small", _set("mtu", 1000), "mtu", "between 1280"),
    ("bad-lab-name", _set("name", "Edge_FT"), "name", "lab name"),
    ("duplicate-plane-name", _set("planes.1.name", "a"), "planes[1].name", "duplicate plane name 'a'"),
    ("duplicate-nic", _set("planes.1.nic", "fab0"), "planes[1].nic", "duplicate interface 'fab0'"),
    ("overlap-ipv4", _set("planes.1.ipv4", "198.18.128.0/17"), "planes[1].ipv4", "overlaps planes[0].ipv4"),
    ("overlap-ipv6", _set("planes.1.ipv6", "fd0e:d6ef:7a00::/56"), "planes[1].ipv6", "overlaps planes[0].ipv6"),
    ("host-bits-set", _set("planes.0.ipv4", "198.18.0.1/16"), "planes[0].ipv4", "has host bits set"),
    ("not-a-prefix", _set("planes.0.ipv4", "banana"), "planes[0].ipv4", "invalid IPv4 prefix"),
    ("prefix-too-long", _set("planes.0.ipv6", "fd0e::/129"), "planes[0].ipv6", "invalid IPv6 prefix"),
    ("wrong-family", _set("planes.0.ipv4", "fd0e:d6ef:7a00::/56"), "planes[0].ipv4", "not an IPv4 prefix"),
    ("ipv4-outside-lab-range", _set("planes.0.ipv4", "10.0.0.0/16"), "planes[0].ipv4", "outside 198.18.0.0/15"),
    ("ipv4-partly-outside", _set("planes.0.ipv4", "198.16.0.0/14"), "planes[0].ipv4", "outside 198.18.0.0/15"),
    ("ipv6-outside-ula", _set("planes.0.ipv6", "2001:db8::/56"), "planes[0].ipv6", "outside fc00::/7"),
    ("ipv4-too-small", _set("planes.0.ipv4", "198.18.0.0/24"), "planes[0].ipv4", "too small"),
    ("ipv6-too-small", _set("planes.0.ipv6", "fd0e:d6ef:7a00::/64"), "planes[0].ipv6", "too small"),
    ("nic-too-long", _set("planes.0.nic", "fabric-plane-a-0"), "planes[0].nic", "16 characters"),
    ("nic-bad-chars", _set("planes.0.nic", "fab/0"), "planes[0].nic", "not a usable interface name"),
    ("switch-name-too-long", _set("planes.0.name", "abcdefghijkl"), "planes[0].name", "tor-r1-abcdefghijkl"),
    ("plane-name-bad", _set("planes.0.name", "A-1"), "planes[0].name", "lowercase"),
]


@pytest.mark.parametrize("mutation,key_path,reason", [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES])
def test_bad_topology_is_rejected_before_anything_exists(tmp_path, mutation, key_path, reason):
    doc = copy.deepcopy(BASE)
    doc["name"] = unique_name()
    mutation(doc)
    path = tmp_path / "bad.yml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(TopologyError) as caught:
        Lab(path)
    error = caught.value
    assert error.source == str(path)
    assert error.key_path == key_path
    assert reason in error.reason
    assert str(error).startswith(f"{path}: {key_path}: ")
    assert_nothing_left(str(doc.get("name", "x")))


def test_duplicate_yaml_key_is_rejected(tmp_path):
    path = tmp_path / "dup.yml"
    path.write_text(yaml.safe_dump(BASE) + "racks: 3\n")
    with pytest.raises(TopologyError) as caught:
        load_topology(path)
    assert caught.value.key_path.startswith("line ")
    assert "duplicate key 'racks'" in caught.value.reason


def test_invalid_yaml_and_missing_file(tmp_path):
    path = tmp_path / "broken.yml"
    path.write_text("racks: [1, 2\n")
    with pytest.raises(TopologyError, match="invalid YAML"):
        load_topology(path)
    with pytest.raises(TopologyError, match="no such topology file"):
        load_topology("no-such-topology")


@pytest.mark.parametrize("name", ["default", "routed", "flat"])
def test_shipped_topologies_are_valid(name):
    topology = load_topology(name)
    assert topology.source == f"lab/topologies/{name}.yml"
    assert topology.name == "edgeft"
    assert [p.name for p in topology.planes] == ["a", "b"]


def test_shipped_topology_shapes():
    assert (load_topology("default").kind, load_topology("default").mode) == ("leaf-spine", "l2")
    assert (load_topology("routed").kind, load_topology("routed").mode) == ("leaf-spine", "routed")
    assert (load_topology("flat").kind, load_topology("flat").mode) == ("flat", "l2")
    assert sorted(p.stem for p in TOPOLOGY_DIR.glob("*.yml")) >= ["default", "flat", "routed"]


def test_topology_round_trips_through_its_dict():
    from edgeft_lab.topology import from_dict

    topology = load_topology("routed")
    again = from_dict(topology.to_dict(), topology.source)
    assert again == topology
    assert again.fingerprint() == topology.fingerprint()
    assert topology.renamed("other").fingerprint() != topology.fingerprint()


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "lab"))
    return subprocess.run([sys.executable, "-m", "edgeft_lab", *args], capture_output=True, text=True, env=env, check=False)


def test_cli_reports_a_bad_topology_in_one_line_with_exit_2(tmp_path):
    doc = copy.deepcopy(BASE)
    doc["name"] = unique_name()  # its own prefix: other labs may be running beside this test
    doc["planes"][1]["ipv4"] = "10.1.0.0/16"
    path = tmp_path / "bad.yml"
    path.write_text(yaml.safe_dump(doc))
    for command in (["validate"], ["up"]):
        result = _cli("--topology", str(path), *command)
        assert result.returncode == 2, result
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert f"{path}: planes[1].ipv4: 10.1.0.0/16 is outside 198.18.0.0/15" in result.stderr
    assert_nothing_left(doc["name"])


def test_cli_validate_shipped():
    result = _cli("--topology", "routed", "validate")
    assert result.returncode == 0
    assert "lab/topologies/routed.yml: ok" in result.stdout
