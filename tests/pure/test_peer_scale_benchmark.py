"""benchmarks/peer_scale.py without the kernel: synthetic peers stay in the lab's ranges and
are distinct up to a full table, the frames go to and come from the peer asked for, sizes past
the table's capacity are refused, and the table prints every row with its ratio."""

from __future__ import annotations

import ipaddress

import pytest
from peer_scale import LOCAL, ROWS, format_table, frame, parse_args, peer_addresses  # benchmarks/

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout

LAB = {4: ipaddress.ip_network("198.18.0.0/15"), 6: ipaddress.ip_network("fd0e:d6ef::/32")}
CAPACITY = layout.TUNABLES["EDGEFT_MAX_PEERS"]


@pytest.mark.parametrize("family", [4, 6])
def test_a_full_table_of_peers_is_distinct_and_in_the_lab_ranges(family):
    addresses = [a for peer_id in range(CAPACITY) for a in peer_addresses(peer_id, family)]
    assert len(set(addresses)) == 2 * CAPACITY
    assert all(ipaddress.ip_address(a) in LAB[family] for a in addresses + list(LOCAL[family]))
    assert not set(addresses) & set(LOCAL[family])


def test_frames_go_to_and_come_from_the_peer_asked_for():
    from scapy.layers.l2 import Ether

    out, back = Ether(frame("egress", 6, 2048)), Ether(frame("ingress", 4, 7))
    assert (out.payload.src, out.payload.dst) == (LOCAL[6][0], peer_addresses(2048, 6)[0])
    assert (back.payload.src, back.payload.dst) == (peer_addresses(7, 4)[0], LOCAL[4][0])


def test_sizes_past_the_capacity_are_refused():
    assert parse_args([]).peers == [4, CAPACITY]
    with pytest.raises(SystemExit):
        parse_args(["--peers", "4,%d" % (CAPACITY + 1)])


def test_the_table_has_every_row_and_the_ratio():
    runs = [dict({key: 100.0 for key, _label in ROWS}, peers=4), dict({key: 105.0 for key, _label in ROWS}, peers=4096)]
    lines = format_table(runs).splitlines()
    assert lines[0].split() == ["4", "peers", "4096", "peers", "ratio"] and len(lines) == 1 + len(ROWS)
    assert all(line.split()[-3:] == ["100.0", "105.0", "1.050"] for line in lines[1:])
