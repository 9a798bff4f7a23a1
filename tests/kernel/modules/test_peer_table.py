"""edgeft.failover.peer_table on real pinned maps and a real namespace.

The module runs in-process (real argument parsing, check and diff mode)
inside host 1 of a two-host namespace pair; its maps are pinned on a private
bpffs. One test drives both modules through ansible-playbook and the netns
connection, to prove the argument specs and check mode as Ansible runs them.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import os
import pathlib
import shutil
import subprocess
import textwrap

import pytest

import hostlab as L

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.modules import peer_table
from repo import REPO

pytestmark = pytest.mark.skipif(L.missing() is not None, reason=str(L.missing()))

LINK_LOCAL_V6 = ipaddress.ip_network("fe80::/10")

H2 = L.peer_decl(2)
# Peers that do not exist on the wire: their neighbour entries never resolve.
H3 = {"name": "h3", "planes": [{"name": "a", "ipv4": "198.18.0.3"}, {"name": "b", "ipv4": "198.19.0.3", "ipv6": "fd00:edf7:b::3"}]}
H4 = {"name": "h4", "planes": [{"name": "a", "ipv4": "198.18.0.4/24"}], "identity": ["198.51.100.4"]}
H5 = {"name": "h5", "planes": [{"name": "b", "ipv6": "fd00:edf7:b::5"}]}


@pytest.fixture(scope="module")
def lab():
    with L.bpffs() as root, L.two_hosts(root) as lab:
        lab.compile(hosts=(1,))
        yield lab


@pytest.fixture
def host(lab, tmp_path):
    """Empty maps, no neighbour entries, a fresh state_dir."""
    lab.maps().clear()
    lab.flush_neighbours(1)
    lab.state_dir = str(tmp_path / "state")
    return lab


def run(host, peers, check=False, **kw):
    args = dict(pin_root=host.pins[1], state_dir=host.state_dir, planes=copy.deepcopy(L.PLANES), peers=copy.deepcopy(peers))
    args.update(kw)
    return L.run_module(peer_table.main, args, host.ns[1], check_mode=check)


def ok(result):
    assert not result.get("failed"), result.get("msg")
    return result


def snapshot(host):
    """Everything the module may write: maps, neighbours, the record."""
    m = host.maps()
    record = os.path.join(host.state_dir, "peer_table.json")
    return {
        "addresses": m.addresses(),
        "peers": {i: m.get_peer(i) for i in m.peer_ids()},
        "seen": {i: m.last_seen(i) for i in range(8)},
        "planes": [m.get_plane(i) for i in range(layout.PLANE_SLOTS)],
        # The module writes entries for peer addresses only; link-local (fe80::/10) entries are the
        # kernel's own neighbour discovery between the two namespaces and come and go with it.
        "neigh": sorted(n for n in host.neighbours(1) if ipaddress.ip_address(n[0]) not in LINK_LOCAL_V6),
        "record": pathlib.Path(record).read_text() if os.path.exists(record) else None,
    }


def ifindex(host, dev):
    return json.loads(L.ip("-n", host.ns[1], "-j", "link", "show", dev))[0]["ifindex"]


# ------------------------------------------------------------------ apply
def test_adds_peers_then_a_second_run_changes_nothing(host):
    r = ok(run(host, [H2, H3]))
    assert r["changed"] and r["added"] == ["h2", "h3"] and r["updated"] == r["removed"] == []
    assert {n: p["id"] for n, p in r["peers"].items()} == {"h2": 0, "h3": 1}
    assert r["peers"]["h3"]["planes"] == {"a": {"ipv4": "198.18.0.3", "ipv6": None},
                                          "b": {"ipv4": "198.19.0.3", "ipv6": "fd00:edf7:b::3"}}
    m = host.maps()
    assert m.addresses() == {
        "198.18.0.2": (0, 0), "fd00:edf7:a::2": (0, 0), "198.19.0.2": (0, 1), "fd00:edf7:b::2": (0, 1),
        "198.18.0.3": (1, 0), "198.19.0.3": (1, 1), "fd00:edf7:b::3": (1, 1),
    }
    h2 = m.get_peer(0)
    assert h2["v4"][:2] == ["198.18.0.2", "198.19.0.2"] and h2["v6"][:2] == ["fd00:edf7:a::2", "fd00:edf7:b::2"]
    assert (h2["active_plane"], h2["down_planes"], h2["flags"]) == (0, [], 0)
    assert m.get_plane(0) == {"ifindex": ifindex(host, "fab0"), "up": True, "drained": False, "routed": False}
    assert m.get_plane(1) == {"ifindex": ifindex(host, "fab1"), "up": True, "drained": False, "routed": False}
    assert [(p["name"], p["ifindex"]) for p in r["planes"]] == [("a", ifindex(host, "fab0")), ("b", ifindex(host, "fab1"))]

    before = snapshot(host)
    again = ok(run(host, [H3, H2]))  # order does not matter
    assert not again["changed"]
    assert again["added"] == again["updated"] == again["removed"] == []
    assert again["neighbors"] == {"added": [], "removed": []}
    assert snapshot(host) == before


def test_neighbours_are_managed_and_resolved(host):
    r = ok(run(host, [H2, H3]))
    want = {(L.ADDR[2][f][p], "fab%d" % p) for f in (4, 6) for p in (0, 1)}
    want |= {("198.18.0.3", "fab0"), ("198.19.0.3", "fab1"), ("fd00:edf7:b::3", "fab1")}
    assert set(r["neighbors"]["added"]) == {"%s dev %s" % n for n in want}
    entries = host.wait_resolved(1, [n for n in want if n[0].endswith("2")])
    assert all("managed" in entries[n] for n in want), entries
    for n in want:
        if n[0].endswith("2"):  # h2 exists: resolved to its NIC on that plane
            assert "REACHABLE" in entries[n]["state"], entries[n]
    peer_mac = {p: json.loads(L.ip("-n", host.ns[2], "-j", "link", "show", "fab%d" % p))[0]["address"] for p in (0, 1)}
    assert entries[("198.19.0.2", "fab1")]["lladdr"] == peer_mac[1]


def test_exact_set_updates_and_removes_only_what_changed(host):
    ok(run(host, [H2, H3, H4]))
    m = host.maps()
    m.seen.put(layout.seen_slot(1, 0), 12345)  # h3 was heard
    m.seen.put(layout.seen_slot(2, 0), 777)  # h4 too
    m.set_plane_flags(1, layout.PLANE_UP | layout.PLANE_DRAINED)  # plane_state's business
    L.ip("-n", host.ns[1], "neigh", "add", "198.18.0.77", "lladdr", "02:00:00:00:00:77", "dev", "fab0", "nud", "permanent")
    h2_moved = copy.deepcopy(H2)
    h2_moved["planes"][1]["ipv4"] = "198.19.0.22"

    r = ok(run(host, [h2_moved, H4]))
    assert (r["added"], r["updated"], r["removed"]) == ([], ["h2"], ["h3"])
    addrs = m.addresses()
    assert "198.19.0.2" not in addrs and addrs["198.19.0.22"] == (0, 1)
    assert not any(ref[0] == 1 for ref in addrs.values())  # h3's address keys
    assert m.get_peer(1) is None and m.last_seen(1) == [0, 0, 0, 0]  # state, seen slots
    assert m.get_peer(0)["v4"][1] == "198.19.0.22"
    assert m.get_peer(2) is not None and m.last_seen(2)[0] == 777  # h4 untouched
    assert addrs["198.51.100.4"] == (2, layout.PLANE_NONE)
    assert m.get_plane(1)["drained"]
    neigh = host.neighbours(1)
    assert ("198.18.0.3", "fab0") not in neigh and ("fd00:edf7:b::3", "fab1") not in neigh
    assert ("198.19.0.2", "fab1") not in neigh and "managed" in neigh[("198.19.0.22", "fab1")]
    assert ("198.18.0.77", "fab0") in neigh  # not ours
    removed = ["198.18.0.3 dev fab0", "198.19.0.2 dev fab1", "198.19.0.3 dev fab1", "fd00:edf7:b::3 dev fab1"]
    assert sorted(r["neighbors"]["removed"]) == removed


def ids(result):
    return {n: p["id"] for n, p in result["peers"].items()}


def test_ids_are_stable_and_freed_ids_are_reused(host):
    assert ids(ok(run(host, [H2, H3, H4]))) == {"h2": 0, "h3": 1, "h4": 2}
    assert ids(ok(run(host, [H4, H2]))) == {"h2": 0, "h4": 2}
    assert ids(ok(run(host, [H5, H4, H2]))) == {"h2": 0, "h4": 2, "h5": 1}
    assert ids(ok(run(host, [H3, H5, H4, H2]))) == {"h2": 0, "h3": 3, "h4": 2, "h5": 1}


def test_a_lost_record_keeps_the_ids_the_maps_hold(host):
    ok(run(host, [H2, H3]))
    os.unlink(os.path.join(host.state_dir, "peer_table.json"))
    r = ok(run(host, [H3, H2]))
    assert not r["changed"]
    assert ids(r) == {"h2": 0, "h3": 1}


def dynamic(peer):
    return peer["active_plane"], peer["down_planes"], peer["learned_planes"], peer["changed_ns"]


def test_a_rerun_keeps_what_traffic_taught(host):
    """A learned failover (peer left plane a) survives a re-run and an update."""
    ok(run(host, [H2, H3]))
    m = host.maps()
    st = m.state.get(0)
    st.active_plane, st.down_mask, st.learned_mask, st.changed_ns = 1, 0b01, 0b01, 424242
    m.state.put(0, st)

    assert not ok(run(host, [H2, H3]))["changed"]
    assert dynamic(m.get_peer(0)) == (1, [0], [0], 424242)
    r = ok(run(host, [dict(H2, identity=["198.51.100.2"]), H3]))
    assert r["updated"] == ["h2"]
    assert dynamic(m.get_peer(0)) == (1, [0], [0], 424242)
    h2 = copy.deepcopy(H2)
    h2["planes"][0]["ipv6"] = "fd00:edf7:a::22"
    ok(run(host, [h2, H3]))
    assert dynamic(m.get_peer(0)) == (1, [0], [0], 424242)
    assert m.get_peer(0)["v6"][0] == "fd00:edf7:a::22"


def test_planes_keep_their_flags_unless_their_nic_changes(host):
    ok(run(host, [H2]))
    m = host.maps()
    m.set_plane_flags(0, layout.PLANE_DRAINED)  # drained, and the agent saw it down
    assert not ok(run(host, [H2]))["changed"]
    assert m.get_plane(0) == {"ifindex": ifindex(host, "fab0"), "up": False, "drained": True, "routed": False}
    m.planes.put(0, layout.Plane(ifindex=99999, flags=layout.PLANE_DRAINED))  # the NIC was re-created
    assert ok(run(host, [H2]))["changed"]
    assert m.get_plane(0) == {"ifindex": ifindex(host, "fab0"), "up": True, "drained": True, "routed": False}
    m.planes.put(2, layout.Plane(ifindex=5, flags=1))  # a plane no longer declared
    ok(run(host, [H2]))
    assert m.get_plane(2) == {"ifindex": 0, "up": False, "drained": False, "routed": False}


def test_identity_addresses_and_learning_flag(host):
    ok(run(host, [dict(H2, identity=["198.51.100.2/32", "2001:db8::2"], learn=False)]))
    m = host.maps()
    assert m.addresses()["198.51.100.2"] == (0, layout.PLANE_NONE)
    assert m.addresses()["2001:db8::2"] == (0, layout.PLANE_NONE)
    assert m.get_peer(0)["flags"] == layout.PEER_NO_LEARN
    r = ok(run(host, [H2]))
    assert r["updated"] == ["h2"] and m.get_peer(0)["flags"] == 0
    assert "198.51.100.2" not in m.addresses()


def test_entries_no_record_names_are_removed(host):
    ok(run(host, [H2]))
    m = host.maps()
    m.set_peer(9, v4=["198.18.0.9"])
    m.set_address("198.18.0.10", 11)  # a key whose peer has no state at all
    r = ok(run(host, [H2]))
    assert r["removed"] == ["#11", "#9"]
    assert set(m.addresses()) == {L.ADDR[2][f][p] for f in (4, 6) for p in (0, 1)}
    assert m.peer_ids() == [0]


def test_neighbors_false_removes_the_entries_we_made(host):
    ok(run(host, [H2]))
    assert ("198.18.0.2", "fab0") in host.neighbours(1)
    r = ok(run(host, [H2], neighbors=False))
    assert r["changed"] and len(r["neighbors"]["removed"]) == 4
    assert not any(n for n in host.neighbours(1) if "managed" in host.neighbours(1)[n])


def test_an_empty_table_removes_every_peer(host):
    ok(run(host, [H2, H3]))
    r = ok(run(host, []))
    assert r["removed"] == ["h2", "h3"]
    assert host.maps().addresses() == {} and host.maps().peer_ids() == []
    assert not [n for n, e in host.neighbours(1).items() if "managed" in e]


# ------------------------------------------------------------- check/diff
def test_check_mode_changes_nothing(host):
    before = snapshot(host)
    r = ok(run(host, [H2, H3], check=True))
    assert r["changed"] and r["added"] == ["h2", "h3"]
    assert r["planes"][0]["ifindex"] == ifindex(host, "fab0")  # what would be written
    assert snapshot(host) == before

    ok(run(host, [H2, H3]))
    before = snapshot(host)
    h2 = copy.deepcopy(H2)
    h2["planes"][0]["ipv4"] = "198.18.0.20"
    r = ok(run(host, [h2, H4], check=True))
    assert (r["added"], r["updated"], r["removed"]) == (["h4"], ["h2"], ["h3"])
    assert snapshot(host) == before


def test_check_mode_on_a_host_not_attached_yet(host):
    """A first --check run: ebpf_program (check mode) pinned nothing."""
    fresh = os.path.join(os.path.dirname(host.pins[1]), "not-attached-yet")
    state_dir = os.path.join(host.state_dir, "fresh")
    r = ok(L.run_module(peer_table.main, dict(pin_root=fresh, state_dir=state_dir, planes=L.PLANES, peers=[H2, H3]),
                        host.ns[1], check_mode=True))
    assert r["changed"] and r["added"] == ["h2", "h3"] and r["removed"] == []
    assert not os.path.exists(fresh) and not os.path.exists(state_dir)
    r = L.run_module(peer_table.main, dict(pin_root=fresh, state_dir=state_dir, planes=L.PLANES, peers=[H2]), host.ns[1])
    assert r.get("failed") and "attach the programs first" in r["msg"]


def test_diff_shows_the_table_before_and_after(host):
    ok(run(host, [H2]))
    h2 = copy.deepcopy(H2)
    h2["planes"][1]["ipv6"] = "fd00:edf7:b::22"
    r = ok(run(host, [h2, H4], check=True))
    before, after = r["diff"]["before"], r["diff"]["after"]
    assert before["peers"] == {"h2": {"planes": {"a": {"ipv4": "198.18.0.2", "ipv6": "fd00:edf7:a::2"},
                                                 "b": {"ipv4": "198.19.0.2", "ipv6": "fd00:edf7:b::2"}},
                                      "identity": [], "learn": True}}
    assert after["peers"]["h2"]["planes"]["b"]["ipv6"] == "fd00:edf7:b::22"
    assert after["peers"]["h4"] == {"planes": {"a": {"ipv4": "198.18.0.4", "ipv6": None}}, "identity": ["198.51.100.4"], "learn": True}
    assert "fd00:edf7:b::2 dev fab1" in before["neighbors"] and "fd00:edf7:b::22 dev fab1" in after["neighbors"]
    assert before["planes"]["a"]["ifindex"] == after["planes"]["a"]["ifindex"] == ifindex(host, "fab0")
    assert r["diff"]["before_header"].endswith("(maps)")


# ------------------------------------------------------------- bad input
def _peers(*mutations):
    peers = copy.deepcopy([H2, H3])
    for path, value in mutations:
        obj = peers
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = value
    return peers


BAD = {
    "malformed_ipv4": (_peers(((1, "planes", 1, "ipv4"), "198.19.0.300")),
                       "peers[1].planes[1].ipv4: '198.19.0.300' is not an IP address"),
    "ipv6_as_ipv4": (_peers(((0, "planes", 0, "ipv4"), "fd00::9")), "peers[0].planes[0].ipv4: fd00::9 is not an IPv4 address"),
    "ipv4_as_ipv6": (_peers(((0, "planes", 1, "ipv6"), "198.19.0.9")), "peers[0].planes[1].ipv6: 198.19.0.9 is not an IPv6 address"),
    "network_address": (_peers(((1, "planes", 0, "ipv4"), "198.18.0.0/24")),
                        "peers[1].planes[0].ipv4: 198.18.0.0 is the network address of 198.18.0.0/24"),
    "multicast": (_peers(((1, "planes", 0, "ipv4"), "224.0.0.5")), "peers[1].planes[0].ipv4: 224.0.0.5 is not a unicast"),
    "link_local": (_peers(((0, "planes", 0, "ipv6"), "fe80::2")), "peers[0].planes[0].ipv6: fe80::2 is not a unicast"),
    "twice_in_a_peer": (_peers(((1, "planes", 1, "ipv4"), "198.18.0.3")),
                        "peers[1].planes[1].ipv4: 198.18.0.3 is already declared at peers[1].planes[0].ipv4"),
    "twice_across_peers": (_peers(((1, "planes", 0, "ipv4"), "198.18.0.2/24")),
                           "peers[1].planes[0].ipv4: 198.18.0.2 is already declared at peers[0].planes[0].ipv4"),
    "identity_reuses_a_plane_address": (_peers(((1, "identity"), ["fd00:edf7:a::2"])),
                                        "peers[1].identity[0]: fd00:edf7:a::2 is already declared at peers[0].planes[0].ipv6"),
    "bad_identity": (_peers(((0, "identity"), ["not-an-ip"])), "peers[0].identity[0]: 'not-an-ip' is not an IP address"),
    "unknown_plane": (_peers(((1, "planes"), H3["planes"] + [{"name": "c", "ipv4": "198.20.0.3"}])),
                      "peers[1].planes[2].name: 'c' is not one of this host's planes (a, b)"),
    "plane_listed_twice": (_peers(((1, "planes", 1, "name"), "a")), "peers[1].planes[1].name: plane 'a' is already listed at peers[1].planes[0]"),
    "no_address": (_peers(((1, "planes"), [{"name": "a"}, {"name": "b", "ipv4": ""}])),
                   "peers[1].planes: peer 'h3' has no address on any plane"),
    "duplicate_names": (_peers(((1, "name"), "h2")), "peers[1].name: peer 'h2' is already declared at peers[0]"),
    # A host is not its own peer: not by an address on its NICs, nor by its name (below, with host_name).
    "own_address": (_peers(((1, "planes", 0, "ipv4"), L.ADDR[1][4][0] + "/24")),
                    "peers[1].planes[0].ipv4: 198.18.0.1 is an address of this host, on fab0; a host is not its own "
                    "peer: leave it out of the peers"),
    "own_identity": (_peers(((0, "identity"), [L.ADDR[1][6][1]])),
                     "peers[0].identity[0]: fd00:edf7:b::1 is an address of this host, on fab1"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_peers_are_refused_before_anything_changes(host, case):
    ok(run(host, [H2, H3]))
    before = snapshot(host)
    peers, message = BAD[case]
    r = run(host, peers)
    assert r.get("failed") and message in r["msg"], r.get("msg")
    assert snapshot(host) == before


def test_a_peer_named_like_this_host_is_refused(host):
    ok(run(host, [H2, H3], host_name="h1"))
    before = snapshot(host)
    r = run(host, [H2, dict(H3, name="h1")], host_name="h1")
    assert r.get("failed") and r["msg"] == ("peers[1].name: 'h1' is this host (host_name); a host is not its own peer: "
                                            "leave it out of the peers"), r.get("msg")
    assert snapshot(host) == before


@pytest.mark.parametrize("kw, message", [
    ({"planes": [{"name": "a", "interface": "fab0"}, {"name": "b", "interface": "fab9"}]},
     "planes[1].interface: no interface 'fab9' on this host (it has: "),
    ({"planes": [{"name": "a", "interface": "fab0"}, {"name": "a", "interface": "fab1"}]},
     "planes[1].name: plane 'a' is already declared at planes[0]"),
    ({"planes": [{"name": "a", "interface": "fab0"}]}, "peers[0].planes[1].name: 'b' is not one of this host's planes (a)"),
    ({"max_peers": 1}, "peers: 2 peers declared, more than max_peers (1)"),
    ({"max_peers": 100}, "max_peers: 100 is more than the pinned map edgeft_state_v1 holds (64"),
    ({"peers": [{"name": "p%d" % i, "planes": [{"name": "a", "ipv4": "198.18.1.%d" % (i + 1)}]} for i in range(65)]},
     "peers: 65 peers declared, the pinned map edgeft_state_v1 holds at most 64"),
    ({"pin_root": "/nonexistent/edgeft"},
     "pin_root: /nonexistent/edgeft does not exist: attach the programs first with edgeft.failover.ebpf_program"),
    ({"peers": [{"name": "h2"}]}, "missing required arguments: planes found in peers"),
    ({"peers": [{"name": "h2", "planes": [{"name": "a", "ipv4": "198.18.0.2", "mac": "x"}]}]}, "peers.planes.mac"),
])
def test_bad_options_are_named(host, kw, message):
    ok(run(host, [H2, H3]))
    before = snapshot(host)
    r = run(host, kw.pop("peers", [H2, H3]), **kw)
    assert r.get("failed") and message in r["msg"], r.get("msg")
    assert snapshot(host) == before


def test_max_peers_equal_to_the_table_is_fine(host):
    assert ok(run(host, [H2, H3], max_peers=2))["changed"]


# ----------------------------------------------------------- via Ansible
PLAYBOOK = textwrap.dedent("""\
    - hosts: h1
      gather_facts: false
      vars:
        planes: [{name: a, interface: fab0}, {name: b, interface: fab1}]
        peers:
          - name: h2
            planes:
              - {name: a, ipv4: 198.18.0.2/24, ipv6: "fd00:edf7:a::2/64"}
              - {name: b, ipv4: 198.19.0.2/24, ipv6: "fd00:edf7:b::2/64"}
      module_defaults:
        edgeft.failover.peer_table: &where {pin_root: "{{ pin_root }}", state_dir: "{{ state_dir }}"}
        edgeft.failover.plane_state: *where
      tasks:
        - name: Peer table in check mode
          edgeft.failover.peer_table: {planes: "{{ planes }}", peers: "{{ peers }}"}
          check_mode: true
          diff: true
          register: check
        - name: Nothing was written
          edgeft.failover.plane_state: {}
          register: empty
        - name: Peer table
          edgeft.failover.peer_table: {planes: "{{ planes }}", peers: "{{ peers }}"}
          register: first
        - name: Peer table again
          edgeft.failover.peer_table: {planes: "{{ planes }}", peers: "{{ peers }}"}
          register: second
        - name: A bad address is named
          edgeft.failover.peer_table:
            planes: "{{ planes }}"
            peers: [{name: h2, planes: [{name: a, ipv4: 198.18.0.999}]}]
          register: bad
          ignore_errors: true
        - name: Drain plane a in check mode
          edgeft.failover.plane_state: {plane: a, state: drained}
          check_mode: true
          register: drain_check
        - name: Drain plane a
          edgeft.failover.plane_state: {plane: a, state: drained}
          register: drain
        - name: Drain plane b, the last one
          edgeft.failover.plane_state: {plane: b, state: drained}
          register: last
          ignore_errors: true
        - name: Query
          edgeft.failover.plane_state: {}
          register: query
        - name: Check
          ansible.builtin.assert:
            that:
              - check is changed and check.added == ['h2']
              - check.diff.after.peers.h2.planes.a.ipv4 == '198.18.0.2'
              - empty.peers == [] and empty is not changed
              - first is changed and first.peers.h2.id == 0
              - second is not changed
              - bad is failed and 'peers[0].planes[0].ipv4' in bad.msg
              - drain_check is changed and drain is changed
              - last is failed and last.msg.startswith('force:')
              - query is not changed
              - query.planes | map(attribute='drained') | list == [true, false]
              - query.peers[0].name == 'h2' and query.peers[0].addresses.planes.b.ipv4 == '198.19.0.2'
    """)


@pytest.mark.skipif(shutil.which("ansible-playbook") is None, reason="ansible-playbook not on PATH")
def test_modules_through_ansible_playbook(host, tmp_path):
    (tmp_path / "site.yml").write_text(PLAYBOOK)
    inventory = {"all": {"hosts": {"h1": {
        "ansible_connection": "edgeft.failover.netns", "ansible_host": host.ns[1],
        "ansible_python_interpreter": "/usr/bin/python3",
        "pin_root": host.pins[1], "state_dir": host.state_dir}}}}
    (tmp_path / "inventory.json").write_text(json.dumps(inventory))
    root = REPO
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0",
               ANSIBLE_CONFIG=os.environ.get("ANSIBLE_CONFIG") or str(root / "ansible.cfg"))
    env["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(
        [str(root / ".build" / "collections")] + [p for p in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep) if p])
    proc = subprocess.run(["ansible-playbook", "-i", str(tmp_path / "inventory.json"), str(tmp_path / "site.yml")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "h1 " in out and "failed=0" in out, out[-3000:]
    assert host.maps().get_plane(0)["drained"]


# ---------------------------------------------------------- routed planes
FO = {"own": {"ipv4": "198.19.255.1", "ipv6": "fd00:edf7:b:ff::1"}, "h2": {"ipv4": "198.19.255.2", "ipv6": "fd00:edf7:b:ff::2"}}


def routed_planes(**own):
    """This host's planes with native addresses and, on b, its failover addresses."""
    planes = copy.deepcopy(L.PLANES)
    for index, plane in enumerate(planes):
        plane["ipv4"], plane["ipv6"] = L.ADDR[1][4][index], L.ADDR[1][6][index]
    planes[1].update(failover4=FO["own"]["ipv4"], failover6=FO["own"]["ipv6"])
    planes[1].update(own)
    return planes


def routed_h2(**over):
    peer = copy.deepcopy(H2)
    peer["planes"][1].update(dict(failover4=FO["h2"]["ipv4"], failover6=FO["h2"]["ipv6"]), **over)
    return peer


def test_failover_addresses_make_a_plane_routed_and_reach_both_maps(host):
    r = ok(run(host, [routed_h2()], planes=routed_planes()))
    m = host.maps()
    assert m.failovers() == {
        (L.ADDR[1][4][0], 1): (FO["own"]["ipv4"], True), (L.ADDR[1][6][0], 1): (FO["own"]["ipv6"], True),
        (L.ADDR[2][4][0], 1): (FO["h2"]["ipv4"], False), (L.ADDR[2][6][0], 1): (FO["h2"]["ipv6"], False),
    }
    assert [m.get_plane(i)["routed"] for i in (0, 1)] == [False, True]
    assert [p["routed"] for p in r["planes"]] == [False, True]
    # The peers' addresses are behind a routed plane's gateway: no neighbour entries there.
    assert {dev for _addr, dev in host.neighbours(1)} == {"fab0"}
    assert "198.19.255.2 on plane b for %s (peer)" % L.ADDR[2][4][0] in r["failover_addresses"]
    again = ok(run(host, [routed_h2()], planes=routed_planes()))
    assert not again["changed"]
    # Declared away: the entries and the routed flag go, the drained/up flags stay.
    gone = ok(run(host, [H2]))
    assert gone["changed"] and m.failovers() == {} and not m.get_plane(1)["routed"] and m.get_plane(1)["up"]


def test_check_mode_reports_failover_addresses_without_writing(host):
    ok(run(host, [H2]))
    before = snapshot(host)
    r = ok(run(host, [routed_h2()], check=True, planes=routed_planes()))
    assert r["changed"] and r["diff"]["before"]["failover_addresses"] == []
    assert len(r["diff"]["after"]["failover_addresses"]) == 4
    assert snapshot(host) == before and host.maps().failovers() == {}


@pytest.mark.parametrize("planes, peer, message", [
    # The plane model's rule (host/planes.py), as multihome reports it.
    ({"failover4": L.ADDR[1][4][0]}, {}, "planes[1].failover4: %s is this host's own address (planes[0].ipv4)" % L.ADDR[1][4][0]),
    ({"failover4": "fd00:edf7:b:ff::9"}, {}, "planes[1].failover4: fd00:edf7:b:ff::9 is not an IPv4 address"),
    ({}, {"failover4": FO["own"]["ipv4"]}, "peers[0].planes[1].failover4: failover address 198.19.255.1 is already declared at planes[1].failover4"),
    ({"failover4": None, "failover6": None}, {}, "peers[0].planes[1]: the peer has failover addresses but no plane of this host has one"),
    ({"failover4": L.ADDR[2][4][1]}, {}, "planes[1].failover4: %s is also a native or identity address" % L.ADDR[2][4][1]),
])
def test_bad_failover_addresses_are_refused_before_anything_changes(host, planes, peer, message):
    ok(run(host, [H2, H3]))
    before = snapshot(host)
    r = run(host, [routed_h2(**peer)], planes=routed_planes(**planes))
    assert r.get("failed") and message in r["msg"], r.get("msg")
    assert snapshot(host) == before


def test_a_failover_address_needs_the_native_address_it_stands_for(host):
    planes = routed_planes()
    planes[0].pop("ipv4")
    r = run(host, [routed_h2()], planes=planes)
    want = ("planes[1].failover4: this host's failover address on plane b stands for its ipv4 address on plane a, "
            "which planes[0].ipv4 does not give")
    assert r.get("failed") and want in r["msg"], r["msg"]
