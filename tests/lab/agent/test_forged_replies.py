"""Forged and replayed probe replies do not keep a dead path alive.

A rogue namespace joins the sender's ToR (tor-r1-a) with r2h1's plane-a address. Its ARP is off
and it has a static neighbour for r1h1, so it poisons no neighbour cache: it only talks to r1h1's
agent, at the port of the agent's probe socket. While r2h1's ToR is silent, it sends two kinds of
reply. Some are replays of replies captured on r1h1's NIC before the fault. The others are
forged: they carry the agent's session (which /status shows) and every sequence number around the
latest one sent, with guessed tokens. The agent must fail the path over as it does without the
rogue, and count those replies as rejected.

Everything runs in the lab's namespaces and in one the test makes and removes; the rogue sends
only to r1h1's lab address.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
import socket
import struct
import subprocess
import threading
import time
import uuid

from edgeft_lab import netns
from edgeft_lab.traffic import UdpStream
from lab_helpers import fault_after

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import probe

MS = 1000000
SENDER, PEER, PLANE, NIC = "r1h1", "r2h1", "a", "fab0"
ETH_P_IP = 0x0800


def _run(argv):
    subprocess.run(argv, capture_output=True, text=True, check=True)


@contextlib.contextmanager
def rogue_on_switch(lab, switch, address, prefixlen, target_ip, target_mac):
    """A namespace wired to the switch's bridge with `address`, ARP off, a static neighbour for
    the target; removed, with its cable, however the test ends."""
    name = "edgeft-rogue-%s" % uuid.uuid4().hex[:6]
    sw = lab.netns(switch)
    netns.create(name)
    try:
        _run(["ip", "-n", sw, "link", "add", "rgsw0", "type", "veth", "peer", "name", "rg0", "netns", name])
        _run(["ip", "-n", sw, "link", "set", "rgsw0", "master", "br0", "up"])
        _run(["ip", "-n", name, "link", "set", "rg0", "arp", "off", "up"])
        _run(["ip", "-n", name, "addr", "add", "%s/%d" % (address, prefixlen), "dev", "rg0"])
        _run(["ip", "-n", name, "neigh", "replace", target_ip, "lladdr", target_mac, "dev", "rg0", "nud", "permanent"])
        yield name
    finally:
        subprocess.run(["ip", "-n", sw, "link", "del", "rgsw0"], capture_output=True, check=False)
        netns.remove(name)


def probe_port(lab, host, address):
    """The UDP port of the agent's probe socket bound to `address` in the host's namespace."""
    out = subprocess.run(lab.exec_argv(host, ["ss", "-H", "-n", "-u", "-a", "src", address]),
                         capture_output=True, text=True, check=True).stdout
    ports = {int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines() if line.strip()}
    assert len(ports) == 1, out
    return ports.pop()


def capture_replies(lab, host, nic, source, port, seconds):
    """The UDP payloads of probe replies from `source` to `port` seen on the host's NIC."""

    def capture():
        found = []
        with socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_IP)) as s:
            s.bind((nic, ETH_P_IP))
            s.settimeout(0.05)
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                try:
                    packet = s.recv(2048)
                except socket.timeout:
                    continue
                header = (packet[0] & 0x0F) * 4
                if packet[9] != socket.IPPROTO_UDP or socket.inet_ntoa(packet[12:16]) != source:
                    continue
                sport, dport = struct.unpack("!HH", packet[header:header + 4])
                payload = packet[header + 8:]
                if sport == probe.PORT and dport == port and probe.parse_reply(payload):
                    found.append(payload)
        return found

    return netns.run_in(lab.netns(host), capture)


def test_forged_and_replayed_replies_do_not_hide_a_silent_tor(agent_lab):
    lab, agents = agent_lab
    agents.start_all()
    mine, theirs = lab.plan.host(SENDER).port(PLANE).ipv4, lab.plan.host(PEER).port(PLANE).ipv4
    with lab.ipr(SENDER) as ipr:
        mac = ipr.get_links(ifname=NIC)[0].get_attr("IFLA_ADDRESS")
    with UdpStream(lab, src=SENDER, dst=PEER, plane=PLANE, family=4, pps=10000) as udp:
        time.sleep(0.5)  # the peer has traffic: probed every interval
        port = probe_port(lab, SENDER, str(mine.ip))
        captured = capture_replies(lab, SENDER, NIC, str(theirs.ip), port, 0.5)
        assert len(captured) >= 10, "too few replies captured to replay: %d" % len(captured)
        status = agents.status(SENDER)
        session = status["agent"]["session"]
        [peer] = [p for p in status["peers"] if p["name"] == PEER]
        latest, started = peer["paths"][PLANE]["sent"], time.monotonic()
        with rogue_on_switch(lab, "tor-r1-a", str(theirs.ip), theirs.network.prefixlen, str(mine.ip), mac) as rogue:
            sock = netns.open_socket(rogue, socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind((str(theirs.ip), probe.PORT))
            stop, sent = threading.Event(), [0]

            def attack():
                replays = itertools.cycle(captured)
                while not stop.is_set():
                    # The sequence number the agent is at now (one probe per 10 ms interval),
                    # and a window around it, each with a guessed token.
                    now_seq = latest + int((time.monotonic() - started) * 100)
                    forged = [probe.FORMAT.pack(probe.MAGIC, probe.REPLY, probe.REQUEST, session, seq,
                                                secrets.randbits(64)) for seq in range(now_seq - 5, now_seq + 15)]
                    for payload in forged + list(itertools.islice(replays, 10)):
                        sock.sendto(payload, (str(mine.ip), port))
                        sent[0] += 1
                    time.sleep(0.005)

            worker = threading.Thread(target=attack, daemon=True)
            with sock:
                worker.start()
                try:
                    fault = fault_after(udp, 0.3)  # the rogue is sending before the fault
                    lab.silence("tor-r2-a")
                    time.sleep(1.0)
                finally:
                    stop.set()
                    worker.join()
            udp.mark("repair")
            lab.repair_all()
            time.sleep(2.0)
    u = udp.result()
    failover = [e for e in agents.events(SENDER, "failover", fault) if e.get("scope") == "path"]
    m = agents.metrics(SENDER)
    rejected = m[("edgeft_path_replies_rejected_total", frozenset({"peer": PEER, "plane": PLANE}.items()))]
    print("\nsilent tor-r2-a with a rogue on tor-r1-a (%d replies sent: replays of %d captured, and forged): "
          "UDP max gap %.1f ms, lost %d; path failover %s ms after the fault; %d replies rejected"
          % (sent[0], len(captured), u.max_gap_ms, u.lost,
             "%.1f" % ((failover[0]["t_ns"] - fault) / MS) if failover else "never", rejected))
    assert failover, agents.events(SENDER)
    assert u.max_outage_ms <= 100.0, u.summary()
    assert rejected >= 0.5 * sent[0], (rejected, sent[0])
