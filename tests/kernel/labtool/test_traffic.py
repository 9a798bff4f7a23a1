"""Traffic measurement (edgeft_lab.traffic): the figures are right on synthetic data, a healthy
fabric shows a clean stream, a fault shows up as loss, a gap and a stall of its own length,
and a reset is counted. Streams cross racks: r1h1 -> r2h1 goes host, ToR, spine, ToR, host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from edgeft_lab import Fault, Lab, LabError
from edgeft_lab.traffic import TcpStream, UdpStream, check_lab_address, host_address
from edgeft_lab.traffic_results import BIN_NS, count_sequences, gaps_over, loss_runs, max_gap, max_outage, timeline
from lab_helpers import needs_root
from repo import REPO

# serial: gaps and stalls measured against millisecond bounds (scripts/test.sh runs them alone).
pytestmark = pytest.mark.serial

FAULT_S = 0.3


# ----------------------------------------------------------------- the arithmetic, no namespaces


def test_count_sequences_loss_duplicates_reordering():
    # 0..9 sent; 3, 4, 5 lost; 7 twice; 2 after 6; 42 never sent.
    counts = count_sequences(10, [0, 1, 6, 2, 7, 7, 8, 9, 42])
    assert (counts.received, counts.duplicates, counts.reordered, counts.strays) == (7, 1, 1, 1)
    assert (counts.longest_loss_run, counts.longest_loss_run_first_seq) == (3, 3)
    tail = count_sequences(5, [0, 1])  # losses at the end count too
    assert (tail.received, tail.longest_loss_run, tail.longest_loss_run_first_seq) == (2, 3, 2)
    assert count_sequences(3, [0, 1, 2]).longest_loss_run_first_seq is None


def test_loss_runs_are_dated_by_the_last_packet_sent_before_them():
    ms = 1_000_000
    first = 5 * ms
    # 0..9 sent a ms apart; 3-5 lost; 8-9 lost at the end; 7 arrived twice, 2 after 6.
    seqs = [0, 1, 6, 2, 7, 7]
    sends = [first + seq * ms for seq in seqs]
    assert loss_runs(10, seqs, sends, first) == [[2.0, 3], [7.0, 2]]
    assert loss_runs(4, [2, 3], [first + 2 * ms, first + 3 * ms], first) == [[0.0, 2]]  # before the first arrival
    assert loss_runs(3, [], [], first) == [[0.0, 3]]
    assert loss_runs(3, [0, 1, 2, 99], [first] * 4, first) == []  # a stray is not a loss


def test_max_outage_spans_the_send_times_that_lost_everything():
    ms = 1_000_000
    first = 5 * ms
    # 0..9 sent a ms apart; 3-5 lost: the outage runs from 2's send to 6's.
    seqs = [0, 1, 2, 6, 7, 8, 9]
    sends = [first + seq * ms for seq in seqs]
    assert max_outage(10, seqs, sends, first, first + 9 * ms) == 4 * ms
    # The sender paused 30 ms between 4 and 5 but nothing was lost: an arrival gap, no outage.
    sends = [first + seq * ms + (30 * ms if seq >= 5 else 0) for seq in range(10)]
    assert max_outage(10, list(range(10)), sends, first, sends[-1]) == 0
    assert max_gap(sends, first, sends[-1])[0] == 31 * ms
    # Losses at either end reach the stream's bounds.
    assert max_outage(10, [2, 3], [first + 2 * ms, first + 3 * ms], first, first + 9 * ms) == 6 * ms
    assert max_outage(3, [], [], first, first + 2 * ms) == 2 * ms


def test_max_gap_counts_the_stream_bounds():
    assert max_gap([10, 20, 70, 80], start=0, end=100) == (50, 20)
    assert max_gap([10, 20], start=0, end=100) == (80, 20)  # never came back: gap to the end
    assert max_gap([], start=0, end=100) == (100, 0)
    assert max_gap([5, 130], start=0, end=100) == (95, 5)  # a late arrival closes the gap
    ms = 1_000_000
    assert gaps_over([10 * ms, 40 * ms, 45 * ms], start=0, end=100 * ms, threshold=25 * ms) == [[10.0, 30.0], [45.0, 55.0]]


def test_timeline_bins():
    start = 1000
    assert timeline([start, start + 1, start + BIN_NS, start + 3 * BIN_NS], start, start + 3 * BIN_NS) == [2, 1, 0, 1]
    assert timeline([start + 5], start, start + BIN_NS, weights=[1500]) == [1500, 0]


def test_only_lab_addresses_are_accepted():
    lab = Lab("default", name="t-noaddr")  # not up: refused before anything starts
    for outside in ("8.8.8.8", "192.0.2.1", "2001:db8::1", "198.20.0.1"):
        with pytest.raises(LabError, match="outside the lab"):
            UdpStream(lab, "r1h1", "r2h1", address=outside)
    assert check_lab_address("198.19.2.11") == "198.19.2.11"
    assert host_address(lab, "r2h1", "b", 6) == "fd0e:d6ef:7b00:2::b"
    with pytest.raises(LabError, match="unknown host"):
        TcpStream(lab, "r1h1", "r9h9")


# ----------------------------------------------------------------- real traffic


@needs_root
@pytest.mark.parametrize(("plane", "family"), [("a", 4), ("b", 6)])
def test_healthy_fabric_udp_is_lossless_at_10kpps(healthy, plane, family):
    with UdpStream(healthy, "r1h1", "r2h1", plane=plane, family=family, pps=10_000) as stream:
        time.sleep(2.0)
    result = stream.result()
    print(result.summary())
    assert result.address == host_address(healthy, "r2h1", plane, family)
    assert result.sent >= 19_000 and result.achieved_pps >= 9_000
    assert (result.lost, result.duplicates, result.strays, result.socket_drops) == (0, 0, 0, 0)
    assert result.send_errors == {} and result.longest_loss_run == 0
    assert result.max_gap_ms < 50
    assert result.rx_timestamps == "kernel"
    assert sum(result.timeline) == result.received
    json.dumps(result.as_dict())


@needs_root
def test_healthy_fabric_tcp_flows_without_resets(healthy):
    with TcpStream(healthy, "r1h2", "r2h2", family=6, rate_bps=50e6) as stream:
        time.sleep(1.5)
    result = stream.result()
    print(result.summary())
    assert result.survived and result.graceful_close
    assert (result.resets, result.timeouts, result.connect_failures, result.connections) == (0, 0, 0, 1)
    assert result.bytes_received == result.bytes_sent > 0
    assert 40 <= result.goodput_mbps <= 55
    assert result.max_stall_ms < 100
    assert sum(result.timeline) == result.bytes_received
    json.dumps(result.as_dict())


@needs_root
def test_link_down_mid_stream_shows_as_loss_gap_and_stall(healthy):
    """r2h1's plane-a cable is cut for 300 ms under a UDP and a TCP stream (nothing fails over).
    A plane-b stream between the same hosts is the control: it must not notice."""
    lab = healthy
    udp = UdpStream(lab, "r1h1", "r2h1", plane="a", pps=10_000)
    tcp = TcpStream(lab, "r1h1", "r2h1", plane="a", family=6, rate_bps=50e6)
    control = UdpStream(lab, "r1h1", "r2h1", plane="b", pps=2_000)
    streams = (udp, tcp, control)
    try:
        for stream in streams:
            stream.start()
        time.sleep(0.5)
        for stream in streams:
            stream.mark("fault")
        # The destination's side: the sender's own carrier (and so its neighbour entry) stays,
        # so the outage is the fault alone (a sender-side cut adds an ARP retry of up to 1 s).
        lab.link_down("r2h1", "a", side="switch")
        time.sleep(FAULT_S)
        lab.repair(Fault("link-down", host="r2h1"))
        for stream in streams:
            stream.mark("repair")
        time.sleep(1.0)
    finally:
        results = [stream.result() for stream in streams]  # always stops the workers
    u, t, c = results
    for result in results:
        print(result.summary(), result.marks)

    outage_ms = u.marks["repair"] - u.marks["fault"]  # what the fault really lasted, with its netlink work
    assert u.lost > 0 and u.longest_loss_run > 0
    assert 250 <= u.max_gap_ms <= outage_ms + 50
    # The gap is the fault's, not elsewhere: it starts once the fault call began and ends by the
    # time the repair call returned (the mark follows it). When within that window the link
    # really went down is the netlink call's latency (120 ms once on a loaded machine).
    assert u.marks["fault"] - 5 <= u.max_gap_at_ms
    assert u.max_gap_at_ms + u.max_gap_ms <= u.marks["repair"] + 50
    assert u.sender_max_gap_ms < 50  # and not the sender's own pause
    assert u.received_between(u.marks["repair"] + 50) > 5_000  # traffic resumed after the repair
    assert u.lost == pytest.approx(u.longest_loss_run, abs=5)  # one outage, not scattered loss
    assert len(u.gaps) == 1 and u.gaps[0][1] == u.max_gap_ms
    assert len(u.loss_runs) == 1 and u.loss_runs[0][1] == u.lost  # one run, dated at the fault
    assert abs(u.loss_runs[0][0] - u.marks["fault"]) < 30

    assert 250 <= t.max_stall_ms < 1_500  # the outage plus TCP's retransmission backoff
    assert abs(t.max_stall_at_ms - t.marks["fault"]) < 30
    assert t.survived and t.resets == 0
    assert t.received_between(t.max_stall_at_ms + t.max_stall_ms) > 1_000_000  # it flows again

    assert c.lost == 0 and c.max_gap_ms < 50


@needs_root
@pytest.mark.parametrize("reconnect", [False, True])
def test_tcp_reset_is_counted(healthy, reconnect):
    with TcpStream(healthy, "r1h1", "r2h2", rate_bps=50e6, reconnect=reconnect) as stream:
        time.sleep(0.3)
        stream.mark("abort")
        stream.abort_receiver()  # SO_LINGER 0 close: the client's next write meets a RST
        time.sleep(0.5)
    result = stream.result()
    print(result.summary(), result.errors)
    assert result.resets == 1 and not result.survived
    assert any("ECONNRESET" in e or "EPIPE" in e for e in result.errors)
    if reconnect:
        assert result.connections == 2 and result.graceful_close
        assert result.received_between(result.marks["abort"] + 100) > 0
    else:
        assert result.connections == 1 and not result.graceful_close
        assert result.received_between(result.marks["abort"] + 50) == 0


@needs_root
def test_tcp_connect_failure_is_counted(healthy):
    healthy.silence("tor-r1-a")  # the SYNs vanish
    with TcpStream(healthy, "r1h1", "r2h1", connect_timeout=0.3) as stream:
        assert stream.connected is False
    result = stream.result()
    assert (result.connect_failures, result.connections, result.bytes_received) == (1, 0, 0)
    assert not result.survived and "connect failed" in result.errors[0]


@needs_root
def test_cli_traffic(default_lab):
    def cli(*args: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "edgeft_lab", "--name", default_lab.name, "traffic", *args]
        env = dict(os.environ, PYTHONPATH=str(REPO / "lab"))
        return subprocess.run(argv, capture_output=True, text=True, check=False, env=env, timeout=60)

    done = cli("udp", "--from", "r2h2", "--to", "r1h2", "--plane", "b", "--family", "6", "--duration", "0.5", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["address"] == "fd0e:d6ef:7b00:1::c" and doc["sent"] > 4_000 and doc["lost"] == 0
    done = cli("tcp", "--from", "r1h1", "--to", "r2h1", "--duration", "0.3", "--rate", "20M")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("tcp r1h1 -> r2h1 198.18.2.11:") and "survived yes" in done.stdout
    done = cli("udp", "--from", "r1h1", "--to", "r2h1", "--address", "9.9.9.9")
    assert done.returncode == 1 and "outside the lab" in done.stderr
