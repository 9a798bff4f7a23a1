"""Truncated IP frames on real veths: passed byte for byte, never dropped or steered.

An Ethernet frame whose ethertype says IPv4/IPv6 but whose fixed IP header is
cut short must pass both programs unmodified (docs/datapath.md, "What is
steered and what passes"). BPF_PROG_TEST_RUN cannot show it on recent kernels
(6.18 here): the kernel refuses (EINVAL) to build an skb from such a frame.
So these tests run the frames through the hooks the programs really sit on:

- Two throwaway namespaces, A (this host, programs attached to a0/a1 as in
  production) and B (the peer), joined by veth pairs a0-b0 (plane 0) and
  a1-b1 (plane 1), on this file's own bpffs and its own compiled programs.
  The NICs get no addresses and no IPv6 link-local address, so nothing but
  the test's frames crosses them and per-program run counts are exact.
- The maps steer: for egress the peer is moved to plane 1 (the complete frame
  would be redirected out a1), for ingress the complete frame (the peer's
  plane-0 address arriving on plane 1) would be learned. The controls prove
  both with the complete frames on the same wires.
- Frames are sent with AF_PACKET (packet_snd -> dev_queue_xmit: tc egress
  runs). Egress: captured in B on b0 and b1 (ETH_P_ALL), i.e. after it left
  a0's tc egress. Ingress: sent from b1, captured in A by a packet socket
  bound to a1 *and the frame's ethertype*: the kernel delivers to those
  (ptype_specific) after tc ingress, whereas ETH_P_ALL taps (ptype_all) see
  every frame before tc ingress and could not tell a drop from a pass.
  test_captures_see_a_drop_after_our_program proves both placements.
- That our program ran: its bpf_prog_info.run_cnt (stats switched on with
  BPF_ENABLE_STATS, a reference released at the end, not the global sysctl).
  That it let the chain go on (TC_ACT_UNSPEC): a witness program at a later
  tc priority on the same hook, which only runs if ours returned UNSPEC.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import socket
import struct
import subprocess
import time
import uuid

import pytest

import bpf_packets as P
import hostlab
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import bpfsys
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import BpfSyscallError
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.testrun import TC_ACT_UNSPEC, prog_test_run

ETH_P_ALL = 0x0003
ETHERTYPE = {4: 0x0800, 6: 0x86DD}
FIXED_HEADER = {4: 20, 6: 40}
# IP bytes kept after the Ethernet header. 0: an Ethernet-only frame with an IP
# ethertype; 12: the header cut inside the addresses' prefix; 19/39: one byte
# short of the fixed header (source complete, destination all but its last byte).
CUTS = {4: (0, 12, 19), 6: (0, 12, 39)}
CASES = [pytest.param(f, c, id="ipv%d-ip%d" % (f, c)) for f in (4, 6) for c in CUTS[f]]
FAMILIES = pytest.mark.parametrize("family", [4, 6], ids=["ipv4", "ipv6"])

# Plane 0 carries bpf_packets' MACs, so P.to_peer() frames are what a0 really sends.
MAC = {"a0": P.MAC_LOCAL, "b0": P.MAC_PEER, "a1": "02:00:00:00:01:01", "b1": "02:00:00:00:01:02"}
OUR_PRIO, WITNESS_PRIO, DROP_PRIO = 1, 2, 3
PARENT = {"egress": "ffff:fff3", "ingress": "ffff:fff2"}

# enum bpf_cmd / bpf_prog_type / bpf_stats_type, uapi/linux/bpf.h
BPF_PROG_LOAD = 5
BPF_ENABLE_STATS = 32
BPF_PROG_TYPE_SCHED_CLS = 3
BPF_STATS_RUN_TIME = 0
TC_ACT_SHOT = 2


class ProgLoadAttr(ctypes.Structure):
    _fields_ = [
        ("prog_type", ctypes.c_uint32),
        ("insn_cnt", ctypes.c_uint32),
        ("insns", ctypes.c_uint64),
        ("license", ctypes.c_uint64),
        ("log_level", ctypes.c_uint32),
        ("log_size", ctypes.c_uint32),
        ("log_buf", ctypes.c_uint64),
        ("kern_version", ctypes.c_uint32),
        ("prog_flags", ctypes.c_uint32),
        ("prog_name", ctypes.c_char * 16),
    ]


class EnableStatsAttr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32)]


class ProgRunStats(ctypes.Structure):
    """struct bpf_prog_info up to run_cnt (offsets of uapi/linux/bpf.h)."""

    _fields_ = [("head", ctypes.c_uint8 * 192), ("run_time_ns", ctypes.c_uint64), ("run_cnt", ctypes.c_uint64)]


def run_cnt(fd: int) -> int:
    info = ProgRunStats()
    attr = bpfsys.InfoAttr(bpf_fd=fd, info_len=ctypes.sizeof(info), info=ctypes.addressof(info))
    bpfsys.bpf(bpfsys.OBJ_GET_INFO_BY_FD, attr, "run count of program fd %d" % fd)
    return info.run_cnt


def load_constant_prog(verdict: int, name: str) -> int:
    """A SCHED_CLS program `r0 = verdict; exit` (fd; the caller closes it)."""
    insns = struct.pack("<BBhi", 0xB7, 0, 0, verdict) + struct.pack("<BBhi", 0x95, 0, 0, 0)
    buf = ctypes.create_string_buffer(insns, len(insns))
    lic = ctypes.create_string_buffer(b"GPL")
    attr = ProgLoadAttr(
        prog_type=BPF_PROG_TYPE_SCHED_CLS,
        insn_cnt=len(insns) // 8,
        insns=ctypes.addressof(buf),
        license=ctypes.addressof(lic),
        prog_name=name.encode(),
    )
    return bpfsys.bpf(BPF_PROG_LOAD, attr, "load %s" % name)


@pytest.fixture(scope="module")
def programs():
    """Both planes' programs over maps pinned on this module's own bpffs, with run stats on."""
    from ansible_collections.edgeft.failover.plugins.module_utils.datapath.build import compile_plane

    with hostlab.bpffs() as root:
        planes = []
        stats = bpfsys.bpf(BPF_ENABLE_STATS, EnableStatsAttr(type=BPF_STATS_RUN_TIME), "enable run stats")
        try:
            pin_dir = os.path.join(root, "host-a")
            for plane in (0, 1):
                planes.append(compile_plane(plane, pin_dir=pin_dir, tunables=hostlab.TUNABLES))
            yield planes
        finally:
            for p in planes:
                p.close()
            os.close(stats)


def batch(netns, lines: list) -> None:
    """One `ip -batch` run (in netns, if given); stops at the first failing line."""
    cmd = ["ip"] + (["-n", netns] if netns else []) + ["-batch", "-"]
    subprocess.run(cmd, input="".join(line + "\n" for line in lines), check=True, capture_output=True, text=True)


class Lab:
    """Namespaces A and B, veths a0-b0 and a1-b1, our programs (and witnesses) on A's NICs."""

    def __init__(self, planes) -> None:
        tag = uuid.uuid4().hex[:8]
        self.ns = {"A": "eft-tr-%s-a" % tag, "B": "eft-tr-%s-b" % tag}
        self.planes = planes
        self.maps = planes[0].maps
        self.ifindex = {}
        self.witness = {}  # (dev, direction) -> fd
        self.extra_fds = []

    def up(self) -> "Lab":
        a_ns, b_ns = self.ns["A"], self.ns["B"]
        batch(None, ["netns add %s" % a_ns, "netns add %s" % b_ns])
        cmds = {a_ns: [], b_ns: []}
        for plane in (0, 1):
            a, b = "a%d" % plane, "b%d" % plane
            cmds[a_ns].append("link add %s address %s type veth peer name %s address %s netns %s" % (a, MAC[a], b, MAC[b], b_ns))
            for ns, dev in ((a_ns, a), (b_ns, b)):
                # no link-local address: no DAD, RS or MLD; the wires stay silent
                cmds[ns] += ["link set %s addrgenmode none" % dev, "link set %s up" % dev]
            # Next hops of steering resolved for good (MACs of B's NICs), as the
            # control plane keeps them: a steered complete frame leaves a1 at once.
            cmds[a_ns] += ["neigh replace %s lladdr %s dev %s nud permanent" % (P.PEER[f][plane], MAC[b], a) for f in (4, 6)]
        for ns, lines in cmds.items():
            batch(ns, lines)
        from pyroute2 import IPRoute

        with hostlab.in_netns(self.ns["A"]), IPRoute() as ipr:
            for plane in (0, 1):
                dev = "a%d" % plane
                idx = self.ifindex[dev] = ipr.link_lookup(ifname=dev)[0]
                ipr.tc("add", "clsact", idx)
                for role, parent in PARENT.items():
                    prog = self.planes[plane].progs[role]
                    ipr.tc("add-filter", "bpf", idx, ":1", fd=prog.fd, name=prog.name, parent=parent,
                           classid=1, direct_action=True, prio=OUR_PRIO)
                    fd = self.witness[(dev, role)] = load_constant_prog(TC_ACT_UNSPEC, "edgeft_witness")
                    ipr.tc("add-filter", "bpf", idx, ":1", fd=fd, name="edgeft_witness", parent=parent,
                           classid=1, direct_action=True, prio=WITNESS_PRIO)
        self.maps.clear()
        for plane in (0, 1):
            self.maps.set_plane(plane, self.ifindex["a%d" % plane])
        self.maps.set_peer(P.PEER_ID, v4=P.PEER[4], v6=P.PEER[6])
        return self

    def down(self) -> None:
        for fd in list(self.witness.values()) + self.extra_fds:
            os.close(fd)
        subprocess.run(["ip", "-force", "-batch", "-"], input="".join("netns del %s\n" % ns for ns in self.ns.values()),
                       check=False, capture_output=True, text=True)

    def add_dropper(self, dev: str, role: str) -> None:
        """TC_ACT_SHOT after our program and the witness on one hook."""
        from pyroute2 import IPRoute

        fd = load_constant_prog(TC_ACT_SHOT, "edgeft_dropper")
        self.extra_fds.append(fd)
        with hostlab.in_netns(self.ns["A"]), IPRoute() as ipr:
            ipr.tc("add-filter", "bpf", self.ifindex[dev], ":1", fd=fd, name="edgeft_dropper", parent=PARENT[role],
                   classid=1, direct_action=True, prio=DROP_PRIO)

    def filters(self, dev: str, role: str) -> str:
        cmd = ["tc", "-n", self.ns["A"], "filter", "show", "dev", dev, role]
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout

    def runs(self) -> dict:
        """Run counts: ours and the witness, per NIC of A and direction."""
        out = {}
        for plane in (0, 1):
            dev = "a%d" % plane
            for role in PARENT:
                out[(dev, role, "ours")] = run_cnt(self.planes[plane].progs[role].fd)
                out[(dev, role, "witness")] = run_cnt(self.witness[(dev, role)])
        return out

    def socket(self, side: str, dev: str, proto: int):
        """A packet socket of namespace `side`, bound to dev and proto (0: send only)."""
        with hostlab.in_netns(self.ns[side]):
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # registers nothing until bound
            try:
                s.bind((dev, proto))
            except OSError:
                s.close()
                raise
        return s

    def send(self, side: str, dev: str, frame: bytes) -> None:
        """Raises ENOBUFS if tc egress of dev dropped the frame."""
        with contextlib.closing(self.socket(side, dev, 0)) as s:
            assert s.send(frame) == len(frame)

    def state(self) -> dict:
        """Everything the programs could have written for the peer and the planes."""
        return {
            "peer": self.maps.get_peer(P.PEER_ID),
            "seen": self.maps.last_seen(P.PEER_ID),
            "ctrs": [self.maps.plane_counters(p) for p in (0, 1)],
        }


@pytest.fixture
def lab(programs):
    """A fresh pair of namespaces per test, deleted (with its tc filters) even on failure."""
    lab = Lab(programs)
    try:
        yield lab.up()
    finally:
        lab.down()


def frames(sock, until: bytes = None, wait: float = 1.0) -> list:
    """Every frame sock's NIC received within `wait` s (not the ones it sent),
    stopping early once `until` arrived."""
    got, end = [], time.monotonic() + wait
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return got
        sock.settimeout(left)
        try:
            data, addr = sock.recvfrom(65536)
        except socket.timeout:
            return got
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        got.append(data)
        if data == until:
            return got


def delta(before: dict, after: dict) -> dict:
    """Non-zero run count changes."""
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


def show(fs: list) -> str:
    return "[%s]" % ", ".join(f.hex() for f in fs)


def truncated(frame: bytes, family: int, cut: int) -> bytes:
    """The Ethernet header and the first `cut` bytes of the fixed IP header."""
    assert 0 <= cut < FIXED_HEADER[family] and len(frame) > 14 + FIXED_HEADER[family]
    return frame[: 14 + cut]


def truncated_to_peer(family: int, cut: int) -> bytes:
    """Egress on plane 0: this host to the peer's plane-0 address."""
    return truncated(P.to_peer(family), family, cut)


def steered_from_peer(family: int, cut: int = None) -> bytes:
    """Ingress on plane 1: the peer's plane-0 address to ours, as a peer steering to us sends it."""
    frame = P.udp(family, P.PEER[family][0], P.LOCAL[family][0], macs=(MAC["b1"], MAC["a1"]))
    return frame if cut is None else truncated(frame, family, cut)


@pytest.mark.parametrize("family, cut", CASES)
def test_kernel_test_run_cannot_judge_these_frames(programs, family, cut):
    """Why the veth tests exist: BPF_PROG_TEST_RUN refuses these frames on
    kernels with the 2025 fix (EINVAL); an older kernel runs them, and then
    they must pass unmodified here as well."""
    for plane in programs:
        for role, frame in (("egress", truncated_to_peer(family, cut)), ("ingress", steered_from_peer(family, cut))):
            try:
                r = prog_test_run(plane.progs[role].fd, frame)
            except BpfSyscallError as e:
                assert e.errno == errno.EINVAL
            else:
                assert (r.retval, r.data) == (TC_ACT_UNSPEC, frame)


def test_the_wires_are_silent_and_wired_as_intended(lab):
    """Exact run counts need quiet NICs; our programs sit before the witnesses."""
    before = lab.runs()
    time.sleep(0.2)
    assert delta(before, lab.runs()) == {}
    for dev in ("a0", "a1"):
        for role in PARENT:
            shown = lab.filters(dev, role)
            assert shown.index("pref %d bpf" % OUR_PRIO) < shown.index("pref %d bpf" % WITNESS_PRIO), shown
            assert "edgeft_%s" % role in shown and "direct-action" in shown, shown


@FAMILIES
def test_control_complete_frame_is_steered_out_of_a1(lab, family):
    """The maps of the egress cases steer: the complete frame leaves by a1."""
    lab.maps.set_active(P.PEER_ID, 1)
    frame = P.to_peer(family)
    want = bytes.fromhex(MAC["b1"].replace(":", "") + MAC["a1"].replace(":", "")) + frame[12:]
    with contextlib.closing(lab.socket("B", "b0", ETH_P_ALL)) as b0, contextlib.closing(lab.socket("B", "b1", ETH_P_ALL)) as b1:
        before = lab.runs()
        lab.send("A", "a0", frame)
        on_b1 = frames(b1, until=want, wait=1.0)
        on_b0 = frames(b0, wait=0.05)
    assert (on_b0, on_b1) == ([], [want])  # L2 mode: new MACs, every other byte unchanged
    assert delta(before, lab.runs()) == {
        ("a0", "egress", "ours"): 1,  # redirect: the a0 chain stops at ours
        ("a1", "egress", "ours"): 1,  # a steered frame passes the target's program
        ("a1", "egress", "witness"): 1,
    }
    assert lab.maps.plane_counters(0)["steered_packets"] == 1


@pytest.mark.parametrize("family, cut", CASES)
def test_truncated_frame_passes_egress_unmodified(lab, family, cut):
    lab.maps.set_active(P.PEER_ID, 1)  # the complete frame would be redirected (control above)
    state = lab.state()
    frame = truncated_to_peer(family, cut)
    with contextlib.closing(lab.socket("B", "b0", ETH_P_ALL)) as b0, contextlib.closing(lab.socket("B", "b1", ETH_P_ALL)) as b1:
        before = lab.runs()
        lab.send("A", "a0", frame)
        on_b0 = frames(b0, until=frame, wait=1.0)
        on_b1 = frames(b1, wait=0.05)
    runs = delta(before, lab.runs())
    assert on_b0 == [frame], "sent %s on a0; b0 got %s, b1 got %s" % (frame.hex(), show(on_b0), show(on_b1))
    assert on_b1 == [], "sent %s on a0; it also left by a1: %s" % (frame.hex(), show(on_b1))
    assert runs == {("a0", "egress", "ours"): 1, ("a0", "egress", "witness"): 1}, "sent %s on a0; runs %s" % (frame.hex(), runs)
    assert lab.state() == state


@FAMILIES
def test_control_complete_frame_is_learned_on_ingress(lab, family):
    """The maps of the ingress cases act: the complete frame teaches plane 1, and passes."""
    frame = steered_from_peer(family)
    with contextlib.closing(lab.socket("A", "a1", ETHERTYPE[family])) as after_tc:
        before = lab.runs()
        lab.send("B", "b1", frame)
        got = frames(after_tc, until=frame)
    assert got == [frame]
    assert delta(before, lab.runs()) == {("a1", "ingress", "ours"): 1, ("a1", "ingress", "witness"): 1}
    peer = lab.maps.get_peer(P.PEER_ID)
    assert (peer["active_plane"], peer["down_planes"]) == (1, [0])
    assert lab.maps.plane_counters(1)["learned"] == 1


@pytest.mark.parametrize("family, cut", CASES)
def test_truncated_frame_passes_ingress_unmodified(lab, family, cut):
    state = lab.state()
    frame = steered_from_peer(family, cut)
    with contextlib.closing(lab.socket("A", "a1", ETHERTYPE[family])) as after_tc, \
            contextlib.closing(lab.socket("B", "b0", ETH_P_ALL)) as b0, contextlib.closing(lab.socket("B", "b1", ETH_P_ALL)) as b1:
        before = lab.runs()
        lab.send("B", "b1", frame)
        got = frames(after_tc, until=frame, wait=1.0)
        left_a = frames(b0, wait=0.05) + frames(b1, wait=0.05)
    runs = delta(before, lab.runs())
    assert got == [frame], "sent %s into a1; after tc ingress a1 had %s" % (frame.hex(), show(got))
    assert left_a == [], "sent %s into a1; A sent back out %s" % (frame.hex(), show(left_a))
    assert runs == {("a1", "ingress", "ours"): 1, ("a1", "ingress", "witness"): 1}, "sent %s into a1; runs %s" % (frame.hex(), runs)
    assert lab.state() == state  # nothing learned, seen or counted


@pytest.mark.parametrize("role", ["egress", "ingress"])
def test_captures_see_a_drop_after_our_program(lab, role):
    """The method itself: a frame dropped on the hook after ours (and after the
    witness) never reaches the capture the pass tests rely on. On ingress an
    ETH_P_ALL tap on the same NIC still sees it: it runs before tc ingress, so
    it could not have told a drop from a pass."""
    family, cut = 4, 12
    if role == "egress":
        frame, dev, rx = truncated_to_peer(family, cut), "a0", ("B", "b0", ETH_P_ALL)
    else:
        frame, dev, rx = steered_from_peer(family, cut), "a1", ("A", "a1", ETHERTYPE[family])
    lab.add_dropper(dev, role)
    with contextlib.closing(lab.socket(*rx)) as capture, contextlib.closing(lab.socket("A", "a1", ETH_P_ALL)) as tap:
        before = lab.runs()
        if role == "egress":  # tc egress drops reach the sender too: NET_XMIT_DROP -> ENOBUFS
            with pytest.raises(OSError) as e:
                lab.send("A", "a0", frame)
            assert e.value.errno == errno.ENOBUFS
            assert frames(capture, wait=0.3) == []
        else:
            lab.send("B", "b1", frame)
            assert frames(tap, until=frame) == [frame]
            assert frames(capture, wait=0.3) == []
    assert delta(before, lab.runs()) == {(dev, role, "ours"): 1, (dev, role, "witness"): 1}
