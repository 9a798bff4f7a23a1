"""The TCP program (bpf/tcp_peers.c through datapath/sockops.py) on two attached hosts: real
connections between namespaces, a real cgroup, the kernel's own TCP_INFO. Host 1's peer table
holds host 2's plane addresses; 198.18.0.99 on host 2 is not in it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

import hostlab as L
import tcp_env
from repo import REPO

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout, sockops
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError

pytestmark = pytest.mark.skipif(L.missing() is not None, reason=L.missing() or "")

NOT_A_PEER = "198.18.0.99"
SETTINGS = sockops.TcpSettings(rto_min_us=16000, delack_max_us=8000, signal_hold_ns=10000000)
KERNEL_RTO_MIN_US = 200000


@pytest.fixture
def not_a_peer(hosts):
    L.ip("-n", hosts.ns[2], "addr", "add", NOT_A_PEER + "/32", "dev", "fab0")
    try:
        yield NOT_A_PEER
    finally:
        L.ip("-n", hosts.ns[2], "addr", "del", NOT_A_PEER + "/32", "dev", "fab0")


@pytest.fixture
def attached(hosts, tmp_path):
    """The program on host 1's maps attached to a cgroup of the test's own for the client, and
    host 2's on another for the server: both ends run edgeft. Yields host 1's, its cgroup and
    the server's."""
    obj = tcp_env.tcp_object(tmp_path)
    with tcp_env.cgroup() as cg1, tcp_env.cgroup() as cg2:
        program = sockops.TcpProgram(obj, hosts.pins[1], cg1, SETTINGS)
        server_side = sockops.TcpProgram(obj, hosts.pins[2], cg2, SETTINGS)
        try:
            yield program, cg1, cg2
        finally:
            program.close()
            server_side.close()


def test_only_connections_to_peers_get_the_settings(hosts, attached, not_a_peer):
    program, cg, server_cg = attached
    addresses = [(4, L.ADDR[2][4][0]), (6, L.ADDR[2][6][1]), (4, not_a_peer)]
    with tcp_env.listeners(hosts, addresses, server_cg) as targets, tcp_env.client(hosts, cg, targets) as c:
        peer4, peer6, other = c.first
    # The RTO is the smoothed RTT (tens of us here) plus at least the minimum, in jiffies.
    assert SETTINGS.rto_min_us <= peer4["rto_us"] < 40000, peer4
    assert SETTINGS.rto_min_us <= peer6["rto_us"] < 40000, peer6
    assert other["rto_us"] >= KERNEL_RTO_MIN_US, other
    # Both ends tuned (the server's delayed ACKs within the client's RTO): nothing retransmitted.
    assert peer4["retrans"] == peer6["retrans"] == 0, (peer4, peer6)
    counters = program.counters()
    assert counters["tuned"] == 2 and counters["tune_failed"] == 0 and counters["last_error"] is None, counters


def test_a_connection_outside_the_cgroup_keeps_the_kernels_settings(hosts, attached, tmp_path):
    program, _cg, server_cg = attached
    with tcp_env.cgroup() as elsewhere, tcp_env.listeners(hosts, [(4, L.ADDR[2][4][0])], server_cg) as targets, \
            tcp_env.client(hosts, elsewhere, targets) as c:
        (peer,) = c.first
    assert peer["rto_us"] >= KERNEL_RTO_MIN_US, peer
    assert program.counters()["tuned"] == 0


def test_retransmissions_to_a_peer_reach_the_agent_once_per_hold(hosts, attached):
    program, cg, server_cg = attached
    with tcp_env.listeners(hosts, [(4, L.ADDR[2][4][0])], server_cg) as targets, tcp_env.client(hosts, cg, targets) as c:
        assert program.events() == []
        with tcp_env.black_hole(hosts, 2, L.ADDR[1][4][0]):
            c.stream()
            started = time.monotonic()
            got = []
            while time.monotonic() - started < 0.5:
                got += program.events()
                time.sleep(0.01)
        after = c.finish()
    # The stream retransmits until it ends, and a record may come after the loop above: read
    # what is left, so that the counters below and the records cover the same retransmissions.
    got += program.events()
    assert got, "no record of the retransmissions"
    assert {e.peer_id for e in got} == {0} and {e.plane for e in got} == {0}
    assert {e.kind for e in got} <= {layout.TCP_RTO, layout.TCP_RETRANS}
    stamps = [e.ns for e in got]
    assert all(b - a >= SETTINGS.signal_hold_ns for a, b in zip(stamps, stamps[1:])), stamps
    counters = program.counters()
    assert counters["retrans"] >= 1 and counters["rto"] >= 1, counters
    assert counters["events"] == len(got) and counters["events_lost"] == 0, counters
    # The stream's own RTOs were the lowered ones: several retransmissions within half a second.
    assert after[0]["retrans"] >= 3, after


def test_the_settings_leave_with_the_program(hosts, tmp_path):
    with tcp_env.cgroup() as cg:
        sockops.TcpProgram(tcp_env.tcp_object(tmp_path), hosts.pins[1], cg, SETTINGS).close()
        with tcp_env.listeners(hosts, [(4, L.ADDR[2][4][0])]) as targets, tcp_env.client(hosts, cg, targets) as c:
            (peer,) = c.first
    assert peer["rto_us"] >= KERNEL_RTO_MIN_US, peer


def test_bad_input_is_refused_before_anything_is_attached(hosts, tmp_path):
    obj = tcp_env.tcp_object(tmp_path)
    with pytest.raises(DatapathError, match=r"^tcp\.cgroup: .* is not a directory of the cgroup v2 hierarchy"):
        sockops.TcpProgram(obj, hosts.pins[1], str(tmp_path), SETTINGS)
    with tcp_env.cgroup() as cg:
        empty = tmp_path / "pins"
        empty.mkdir()
        with pytest.raises(DatapathError, match=r"^pin_root: .*edgeft_peers_v1 is not pinned"):
            sockops.TcpProgram(obj, str(empty), cg, SETTINGS)
        with pytest.raises(DatapathError, match=r"^tcp\.object: .* is not the TCP program's object"):
            sockops.TcpProgram(tcp_env.plane_object(tmp_path), hosts.pins[1], cg, SETTINGS)
    with pytest.raises(DatapathError, match=r"^tcp\.rto_min_ms: 4 ms is below what this kernel accepts: 2 jiffies, 8 ms at HZ=250"):
        sockops.check_settings(sockops.TcpSettings(4000, 0, 0), 250)
    with pytest.raises(DatapathError, match=r"^tcp\.delack_max_ms: 300 ms is above the kernel's 200 ms"):
        sockops.check_settings(sockops.TcpSettings(16000, 300000, 0), 1000)
    sockops.check_settings(sockops.TcpSettings(2000, 2000, 0), 1000)
    sockops.check_settings(sockops.TcpSettings(1000, 1000, 0), None)  # HZ unknown: the program counts refusals


ATTACH_AS_THE_UNIT = r"""
import json, sys
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import sockops
obj, pins, cgroup = sys.argv[1:4]
program = sockops.TcpProgram(obj, pins, cgroup, sockops.TcpSettings(16000, 8000, 10000000))
print(json.dumps(program.counters()))
program.close()
"""


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) missing")
def test_the_program_loads_and_attaches_with_the_units_capabilities_alone(hosts, tmp_path):
    """The agent's unit keeps CAP_BPF, CAP_NET_ADMIN and, for this program, CAP_PERFMON: loaded
    with those alone (here even without CAP_PERFMON, which this kernel's verifier does not need
    for it; Debian 12's does)."""
    caps = "-all,+bpf,+net_admin"
    with tcp_env.cgroup() as cg:
        argv = ["setpriv", "--inh-caps=" + caps, "--ambient-caps=" + caps, "--bounding-set=" + caps,
                sys.executable, "-c", ATTACH_AS_THE_UNIT, tcp_env.tcp_object(tmp_path), hosts.pins[1], cg]
        done = subprocess.run(argv, capture_output=True, text=True, check=False,
                              env=dict(os.environ, PYTHONPATH=str(REPO / ".build" / "collections")))
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["tune_failed"] == 0
