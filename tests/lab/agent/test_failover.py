"""The agent on a real (namespace) fabric: failover gaps, no false failovers,
flap dampening, restarts, revertive failback after the hold-down.

The tests share one lab (r1h1 in rack 1, r2h1 in rack 2, planes a and b), deployed with
site.yml and reset before each test (conftest.py); the figures are printed (pytest -s shows them).
"""

from __future__ import annotations

import subprocess
import time

from edgeft_lab.traffic import TcpStream, UdpStream
from lab_helpers import fault_after

from ansible_collections.edgeft.failover.plugins.module_utils.constants import VERSION

HOLD_DOWN_MS = 1000  # role default (roles/ebpf_failover/defaults/main.yml)
# 1,000 probe intervals of 10 ms on each path, under 10 kpps: long enough for a false failover
# from probe timing to show. The 60 s soak is the benchmark's no-fault row.
QUIET_SECONDS = 10.0
MS = 1000000


def events(agents, host, kind=None, since_ns=0):
    st = agents.status(host)
    return [e for e in st["events"] if (kind is None or e["kind"] == kind) and e["t_ns"] >= since_ns]


def wait_for_event(agents, host, kind, since_ns, timeout=5.0, **match):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [e for e in events(agents, host, kind, since_ns) if all(e.get(k) == v for k, v in match.items())]
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError("no %s event %s on %s within %.1f s: %s" % (kind, match, host, timeout, events(agents, host)))


def path_state(agents, host, peer, plane):
    st = agents.status(host)
    entry = [p for p in st["peers"] if p["name"] == peer][0]
    return entry, entry["paths"][plane]


def test_carrier_loss_on_the_senders_link(agent_lab):
    """r1h1's plane-a NIC goes down (host side): the gap to r2h1's plane-a address stays within 10 ms."""
    lab, agents = agent_lab
    agents.start_all()
    with UdpStream(lab, src="r1h1", dst="r2h1", plane="a", family=4, pps=10000) as udp:
        fault = fault_after(udp, 0.5)
        lab.link_down("r1h1", "a", side="host")
        time.sleep(1.0)
        udp.mark("repair")
        lab.repair_all()
        time.sleep(2.5)  # through the hold-down and the failback
    r = udp.result()
    plane_event = wait_for_event(agents, "r1h1", "failover", fault, scope="plane", plane="a")
    figures = (r.max_gap_ms, r.max_gap_at_ms, r.lost, r.sent, (plane_event["t_ns"] - fault) / MS, r.gaps)
    print("\nhost-side link down r1h1/a: UDP 10 kpps r1h1->r2h1 plane a: max gap %.1f ms at %.0f ms, lost %d of %d;"
          " plane a failover %.1f ms after the fault; gaps >= 20 ms: %s" % figures)
    assert r.socket_drops == 0
    assert r.max_outage_ms <= 10.0, r.summary()
    failbacks = events(agents, "r1h1", "failback", fault)
    assert any(e["scope"] == "plane" for e in failbacks), failbacks


def test_silent_peer_tor(agent_lab):
    """The peer's ToR forwards nothing while its links stay up: probes detect it,
    traffic moves to plane b within 100 ms, TCP survives without a reset and, with the TCP
    program's lower minimum RTO (docs/tcp.md), stalls less than the kernel's 200 ms."""
    lab, agents = agent_lab
    agents.start_all()
    with UdpStream(lab, src="r1h1", dst="r2h1", plane="a", family=4, pps=10000) as udp, \
            TcpStream(lab, "r1h1", "r2h1", plane="a", rate_bps=50e6) as tcp:
        fault = fault_after(udp, 0.5)
        lab.silence("tor-r2-a")
        time.sleep(1.5)
        udp.mark("repair")
        lab.repair_all()
        time.sleep(2.0)
    u, t = udp.result(), tcp.result()
    detect = {h: wait_for_event(agents, h, "failover", fault, scope="path") for h in ("r1h1", "r2h1")}
    # The fault takes effect when nftables has it: the UDP gap's start is that moment.
    outage = u.start_ns + int(u.max_gap_at_ms * MS)
    print("\nsilent tor-r2-a: UDP 10 kpps max gap %.1f ms (lost %d), TCP 50 Mbit/s max stall %.1f ms, resets %d, "
          "survived %s; failover r1h1 %.1f ms, r2h1 %.1f ms after the traffic stopped (%.1f/%.1f ms after the fault call)"
          % (u.max_gap_ms, u.lost, t.max_stall_ms, t.resets, t.survived,
             (detect["r1h1"]["t_ns"] - outage) / MS, (detect["r2h1"]["t_ns"] - outage) / MS,
             (detect["r1h1"]["t_ns"] - fault) / MS, (detect["r2h1"]["t_ns"] - fault) / MS))
    assert u.max_outage_ms <= 100.0, u.summary()
    assert t.resets == 0, t.summary()
    assert t.survived, t.summary()
    # Retransmissions 16, 48 and 112 ms after a loss: within 100 ms of failover the stall ends
    # before the kernel's minimum RTO (200 ms) would have resent anything.
    assert t.max_stall_ms < 150.0 and t.rto_ms < 200, t.summary()
    m = agents.metrics("r1h1")
    assert m[("edgeft_agent_tcp_program_attached", frozenset())] == 1
    assert m[("edgeft_tcp_connections_tuned_total", frozenset())] >= 1
    path = frozenset({"peer": "r2h1", "plane": "a"}.items())
    plane_a = frozenset({"plane": "a", "interface": "fab0"}.items())
    assert m[("edgeft_agent_failovers_total", frozenset())] >= 1
    assert m[("edgeft_path_failovers_total", path)] == 1 and m[("edgeft_path_failbacks_total", path)] == 1
    assert m[("edgeft_path_up", path)] == 1
    assert m[("edgeft_datapath_steered_packets_total", plane_a)] > 0  # traffic really left plane a meanwhile
    # The plane's aggregates count the same path, and the agent says its version.
    assert m[("edgeft_plane_path_failovers_total", plane_a)] == 1 and m[("edgeft_plane_path_failbacks_total", plane_a)] == 1
    assert m[("edgeft_plane_paths", plane_a | {("state", "up")})] == 1
    assert [key for name, key in m if name == "edgeft_build_info"] == [frozenset({"version": VERSION}.items())]


def kept_local(lab, host):
    """The host's local-table routes through lo that edgeft added (protocol 237)."""
    argv = lab.exec_argv(host, ["ip", "-6", "route", "show", "table", "local", "dev", "lo", "proto", "237"])
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def test_the_receivers_nic_down_over_ipv6(agent_lab):
    """r2h1's plane-a NIC goes down (host side) under IPv6 traffic to its plane-a address: Linux
    drops that address's local route with the carrier, so the agent keeps it local through lo
    until the carrier returns (fabric/routes.py keep_local); without it the fault's whole
    duration was lost."""
    lab, agents = agent_lab
    agents.start_all()
    address = lab.plan.host("r2h1").port("a").ipv6.ip
    with UdpStream(lab, src="r1h1", dst="r2h1", plane="a", family=6, pps=10000) as udp:
        fault_after(udp, 0.5)
        lab.link_down("r2h1", "a", side="host")
        time.sleep(1.0)
        kept = kept_local(lab, "r2h1")
        udp.mark("repair")
        lab.repair_all()
        time.sleep(2.0)
    r = udp.result()
    print("\nhost-side link down r2h1/a, IPv6: UDP 10 kpps max gap %.1f ms, lost %d of %d" % (r.max_gap_ms, r.lost, r.sent))
    assert "local %s " % address in kept, kept
    assert r.max_outage_ms <= 100.0, r.summary()
    assert kept_local(lab, "r2h1").strip() == ""


def test_no_failover_without_faults(agent_lab):
    """QUIET_SECONDS of probing under traffic without any fault: not one failover or failback.

    The short form: the soak-length run (60 s by default) is the no-fault row of the failover
    benchmark, `benchmarks/failover_matrix.py --quiet 60`, which counts failovers the same way."""
    lab, agents = agent_lab
    agents.start_all()
    with UdpStream(lab, src="r1h1", dst="r2h1", plane="a", family=4, pps=10000):
        time.sleep(QUIET_SECONDS)
    for host in ("r1h1", "r2h1"):
        st = agents.status(host)
        loss = {n: p["loss"] for peer in st["peers"] for n, p in peer["paths"].items()}
        print("\n%s after %.1f s: failovers %d, failbacks %d, probe loss (last 100) %s, loop lag max %s ms"
              % (host, st["agent"]["uptime_ms"] / 1000.0, st["totals"]["failovers"], st["totals"]["failbacks"], loss,
                 st["agent"]["loop_lag_max_ms"]))
        assert st["totals"] == {"failovers": 0, "failbacks": 0}, st["events"]


def test_flapping_link_fails_over_once_per_hold_down(agent_lab):
    """r1h1's plane-a link flaps at 5 Hz for 3 s: every judged object (the plane on
    r1h1, the path over it on each side) fails over at most once per hold-down."""
    lab, agents = agent_lab
    agents.start_all()
    start = time.monotonic_ns()
    lab.flap("r1h1", "a", hz=5, duration=3)
    time.sleep(3.5)
    lab.repair_all()
    seen = {}
    for host in ("r1h1", "r2h1"):
        for e in events(agents, host, "failover", start):
            seen.setdefault((host, e["scope"], e.get("peer"), e["plane"]), []).append(e["t_ns"])
    print("\nflapping r1h1/a at 5 Hz for 3 s: failovers per object: %s"
          % {"%s %s %s/%s" % k: len(v) for k, v in seen.items()})
    assert ("r1h1", "plane", None, "a") in seen, seen
    for key, stamps in seen.items():
        gaps = [(b - a) / MS for a, b in zip(stamps, stamps[1:])]
        assert all(g >= HOLD_DOWN_MS for g in gaps), (key, gaps)


def test_agent_killed_during_a_failure_and_restarted(agent_lab):
    """SIGKILL while traffic is failed over: it keeps flowing on plane b; the restarted
    agent resumes from the maps without a failover or failback in its first second."""
    lab, agents = agent_lab
    agents.start_all()
    with UdpStream(lab, src="r1h1", dst="r2h1", plane="a", family=4, pps=10000) as udp:
        fault = fault_after(udp, 0.3)
        lab.silence("tor-r2-a")
        wait_for_event(agents, "r1h1", "failover", fault, scope="path")
        time.sleep(0.2)
        killed = time.monotonic_ns()
        udp.mark("kill")
        agents.kill("r1h1")
        rc, dead_status, _err = agents.cli("r1h1", "status")  # no agent: what the maps say
        assert rc == 0 and "not running" in dead_status, dead_status
        time.sleep(max(0.0, 1.0 - (time.monotonic_ns() - killed) / 1e9))
        udp.mark("restart")
        agents.start("r1h1")
        entry, path = None, None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                entry, path = path_state(agents, "r1h1", "r2h1", "a")
                break
            except (OSError, ValueError, IndexError, KeyError):
                time.sleep(0.05)
        started = agents.status("r1h1")["agent"]["now_ns"] - agents.status("r1h1")["agent"]["uptime_ms"] * MS
        time.sleep(1.2)
        early = [e for e in events(agents, "r1h1") if e["t_ns"] - started < 1000 * MS]
        entry, path = path_state(agents, "r1h1", "r2h1", "a")
        udp.mark("repair")
    u = udp.result()
    lab.repair_all()
    kill_ms = u.marks["kill"]
    restart_ms = u.marks["restart"]
    dead_window = u.received_between(kill_ms, restart_ms)
    expected = (restart_ms - kill_ms) * 10  # 10 kpps = 10 per ms
    print(dead_status)
    print("\nagent SIGKILLed %.0f ms after the failover: %d of ~%d packets arrived while it was dead; restarted: "
          "r2h1/a %s, active plane %s, events in its first second: %s; max gap %.1f ms at %.0f ms"
          % (kill_ms - u.marks["fault"], dead_window, expected, path["state"], entry["active_plane"], early,
             u.max_gap_ms, u.max_gap_at_ms))
    assert dead_window >= 0.95 * expected
    assert early == []
    rc, out, _err = agents.cli("r1h1", "status")
    assert rc == 0 and "r2h1" in out and "failovers" in out, out
    assert path["state"] == "down" and entry["active_plane"] == "b" and "a" in entry["down_planes"]
    assert u.max_outage_ms <= 100.0, u.summary()


def test_failback_only_after_the_hold_down(agent_lab):
    lab, agents = agent_lab
    agents.start_all()
    t0 = time.monotonic_ns()
    lab.silence("tor-r2-a")
    wait_for_event(agents, "r1h1", "failover", t0, scope="path")
    time.sleep(0.5)
    repaired = time.monotonic_ns()
    lab.repair_all()
    back = wait_for_event(agents, "r1h1", "failback", repaired, timeout=5.0, scope="path")
    after = (back["t_ns"] - repaired) / MS
    _entry, path = path_state(agents, "r1h1", "r2h1", "a")
    print("\nrepair of tor-r2-a: failback %.0f ms later (hold-down %d ms); %s" % (after, HOLD_DOWN_MS, back["reason"]))
    assert after >= HOLD_DOWN_MS
    assert after <= HOLD_DOWN_MS + 500
    assert path["state"] == "up"
    entry, _path = path_state(agents, "r1h1", "r2h1", "a")
    assert entry["down_planes"] == [] and entry["learned_planes"] == []


def probing(agents, host, peer):
    entry = [p for p in agents.status(host)["peers"] if p["name"] == peer][0]
    return entry["traffic"], {n: (p["probe_every_ms"], p["sent"]) for n, p in entry["paths"].items()}


def test_only_peers_with_traffic_are_probed_every_interval(agent_lab):
    """Idle peers are probed once a second; traffic (either way) brings a peer to the
    full rate within the activity scan, and it drops back after the active window."""
    lab, agents = agent_lab
    agents.start_all()
    deadline = time.monotonic() + 5.0  # the window after the ping matrix of the neutral state
    while probing(agents, "r1h1", "r2h1")[0] and time.monotonic() < deadline:
        time.sleep(0.1)
    traffic, idle = probing(agents, "r1h1", "r2h1")
    time.sleep(2.0)
    _traffic, idle_later = probing(agents, "r1h1", "r2h1")
    idle_rate = {n: (idle_later[n][1] - idle[n][1]) / 2.0 for n in idle}
    assert not traffic and all(every == 1000 for every, _sent in idle.values()), idle
    assert all(rate <= 2.0 for rate in idle_rate.values()), idle_rate  # 1/s, not 100/s
    # Only r2h1 sends: r1h1 sees it arrive (rx), r2h1 sees it leave (tx); both go to the full rate.
    with UdpStream(lab, src="r2h1", dst="r1h1", plane="a", family=4, pps=1000):
        time.sleep(0.4)
        woke = {h: probing(agents, h, p) for h, p in (("r1h1", "r2h1"), ("r2h1", "r1h1"))}
        time.sleep(1.0)
        busy = probing(agents, "r1h1", "r2h1")
    busy_rate = {n: (busy[1][n][1] - woke["r1h1"][1][n][1]) / 1.0 for n in busy[1]}
    print("\nprobes per second to r2h1: idle %s, with traffic %s" % (idle_rate, busy_rate))
    for host, (traffic, paths) in woke.items():
        assert traffic and all(every == 10 for every, _sent in paths.values()), (host, paths)
    assert all(rate >= 50 for rate in busy_rate.values()), busy_rate
    time.sleep(2.5)  # the active window (2 s) after the stream stopped
    traffic, paths = probing(agents, "r1h1", "r2h1")
    assert not traffic and all(every == 1000 for every, _sent in paths.values()), paths
    st = agents.status("r1h1")
    assert st["totals"] == {"failovers": 0, "failbacks": 0}, st["events"]


def test_an_idle_peer_whose_plane_died_is_failed_over_from_its_first_packet(agent_lab):
    """Idle peers are probed rarely, and the agent reads the traffic stamps only every second.
    Traffic to a peer that was idle while its ToR went silent still fails over within one
    detection time of its first packet: the data path's wake record makes the agent probe the
    peer's paths at once (agent/resume.py)."""
    lab, agents = agent_lab
    agents.start_all()
    deadline = time.monotonic() + 5.0  # the window after the ping matrix of the neutral state
    while probing(agents, "r1h1", "r2h1")[0] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not probing(agents, "r1h1", "r2h1")[0], "r2h1 never went idle at r1h1"
    wake = ("edgeft_agent_wake_records_total", frozenset())
    before = agents.metrics("r1h1")
    assert before[("edgeft_agent_wake_records_open", frozenset())] == 1
    lab.silence("tor-r2-a")
    try:
        with UdpStream(lab, src="r1h1", dst="r2h1", plane="a", family=4, pps=10000) as udp:
            time.sleep(1.0)
    finally:
        lab.repair_all()
    u = udp.result()
    after = agents.metrics("r1h1")
    print("\nidle r2h1 behind a silent tor-r2-a, then 10 kpps from r1h1: outage %.1f ms, lost %d; wake records %d"
          % (u.max_outage_ms, u.lost, after[wake] - before[wake]))
    assert u.max_outage_ms <= 100.0, u.summary()
    assert after[wake] > before[wake]
    assert after[("edgeft_path_failovers_total", frozenset({"peer": "r2h1", "plane": "a"}.items()))] == 1


def test_hosts_echoing_each_others_steering_go_back_to_the_plane(agent_lab):
    """Both hosts keep off plane a only because each learned it from the other (a flap
    can leave them so): their own probes, answered for the hold-down, end the echo."""
    from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import DatapathMaps, now_ns

    lab, agents = agent_lab
    agents.start_all()
    time.sleep(HOLD_DOWN_MS / 1000.0 + 0.2)  # every path answered for longer than the hold-down
    start = time.monotonic_ns()
    for host in ("r1h1", "r2h1"):
        with DatapathMaps.open_pinned(str(lab.pin_root(host))) as maps:
            for peer_id in maps.peer_ids():
                st = maps.state.get(peer_id)
                st.active_plane, st.down_mask, st.learned_mask, st.changed_ns = 1, 1, 1, now_ns()
                maps.state.put(peer_id, st)
    with UdpStream(lab, src="r1h1", dst="r2h1", plane="a", family=4, pps=1000) as udp:
        time.sleep(3.0)
    r = udp.result()
    unlearned = {h: events(agents, h, "unlearned", start) for h in ("r1h1", "r2h1")}
    print("\nmutual echo on plane a: unlearned %s; UDP lost %d, max gap %.1f ms"
          % ({h: [(e["peer"], round((e["t_ns"] - start) / MS)) for e in v] for h, v in unlearned.items()}, r.lost, r.max_gap_ms))
    assert any(unlearned.values()), unlearned
    for host, peer in (("r1h1", "r2h1"), ("r2h1", "r1h1")):
        entry, _path = path_state(agents, host, peer, "a")
        assert (entry["down_planes"], entry["learned_planes"], entry["active_plane"]) == ([], [], "a"), (host, entry)
    assert r.lost == 0, r.summary()
    assert agents.status("r1h1")["totals"] == {"failovers": 0, "failbacks": 0}


def test_a_drain_is_not_taken_for_an_echo(agent_lab):
    """r2h1 drains plane a (the DRAINED flag, as plane_state sets it): its reflector stops
    answering there, so r1h1's agent judges the path down itself and never 'unlearns'
    the drain; after the undrain it fails back."""
    from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
    from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import DatapathMaps

    lab, agents = agent_lab
    agents.start_all()

    def set_drained(drained):
        with DatapathMaps.open_pinned(str(lab.pin_root("r2h1"))) as maps:
            flags = maps.planes.get(0).flags
            maps.set_plane_flags(0, flags | layout.PLANE_DRAINED if drained else flags & ~layout.PLANE_DRAINED)
            if not drained:
                maps.hold()

    start = time.monotonic_ns()
    with UdpStream(lab, src="r1h1", dst="r2h1", plane="a", family=4, pps=1000) as udp:
        time.sleep(0.3)
        set_drained(True)
        time.sleep(2.5)  # longer than the hold-down: an echo would have been forgotten by now
        during = path_state(agents, "r1h1", "r2h1", "a")
        set_drained(False)
        time.sleep(HOLD_DOWN_MS / 1000.0 + 1.0)
    r = udp.result()
    entry, path = during
    print("\ndrain of r2h1/a under the agents: r1h1 sees %s/%s during the drain; unlearned events %s; UDP lost %d"
          % (path["state"], entry["down_planes"], events(agents, "r1h1", "unlearned", start), r.lost))
    assert path["state"] == "down" and "a" in entry["down_planes"], entry
    assert events(agents, "r1h1", "unlearned", start) == []
    assert any(e["scope"] == "path" for e in events(agents, "r1h1", "failback", start))
    assert r.lost == 0, r.summary()
