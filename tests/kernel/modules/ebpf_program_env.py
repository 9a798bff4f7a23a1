"""Test environment of the ebpf_program module: throwaway namespaces, a private
bpffs, an in-process module runner, and a UDP stream that counts every packet.

A test host is a network namespace with two plane NICs p0/p1; each is a veth
whose other end (q0/q1) lives in a second "peer" namespace, so packets between
the two really cross the NICs and their tc hooks. Both namespaces, the bpffs
mount and everything in them are removed afterwards, even when a test fails.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import struct
import subprocess
import threading
import time
import uuid

from pyroute2 import IPRoute, netns

import hostlab
import nshost
from repo import REPO
from nshost import in_netns as inside

SRC = str(REPO / 'bpf' / 'failover_tc.c')
PLANES = {0: ('p0', 'q0', '198.18.0.1', '198.18.0.2'), 1: ('p1', 'q1', '198.19.0.1', '198.19.0.2')}
PORT = 9911


def environment_problem():
    """Why these tests cannot run here (root, bcc, kernel headers), or None."""
    problem = hostlab.missing()
    if problem:
        return problem
    from ansible_collections.edgeft.failover.plugins.module_utils.datapath import build
    try:
        build.check_headers()
    except Exception as e:  # noqa: BLE001
        return str(e)
    return None


class Lab:
    """A host namespace (p0, p1) wired to a peer namespace (q0, q1)."""

    def __init__(self):
        tag = uuid.uuid4().hex[:8]
        self.ns = 'eft-ep-%s' % tag
        self.peer = 'eft-ep-%s-p' % tag
        self.index = {}

    def up(self):
        netns.create(self.ns)
        netns.create(self.peer)
        with inside(self.ns), IPRoute() as ipr:
            for dev, peer_dev, addr, _unused in PLANES.values():
                ipr.link('add', ifname=dev, kind='veth', peer=peer_dev)
                ipr.link('set', index=ipr.link_lookup(ifname=peer_dev)[0], net_ns_fd=self.peer)
                idx = ipr.link_lookup(ifname=dev)[0]
                ipr.addr('add', index=idx, address=addr, prefixlen=24)
                ipr.link('set', index=idx, state='up')
                self.index[dev] = idx
            ipr.link('set', index=ipr.link_lookup(ifname='lo')[0], state='up')
        with inside(self.peer), IPRoute() as ipr:
            for _unused, peer_dev, _unused2, peer_addr in PLANES.values():
                idx = ipr.link_lookup(ifname=peer_dev)[0]
                ipr.addr('add', index=idx, address=peer_addr, prefixlen=24)
                ipr.link('set', index=idx, state='up')
            ipr.link('set', index=ipr.link_lookup(ifname='lo')[0], state='up')
        return self

    def down(self):
        for name in (self.peer, self.ns):
            with contextlib.suppress(Exception):
                netns.remove(name)

    def tc(self, *args):
        """`tc` output inside the host namespace (for assertions and foreign objects)."""
        return subprocess.run(['ip', 'netns', 'exec', self.ns, 'tc'] + list(args),
                              check=True, capture_output=True, text=True).stdout

    def qdiscs(self, dev):
        return [q['kind'] for q in json.loads(self.tc('-j', 'qdisc', 'show', 'dev', dev) or '[]')]

    def filters(self, dev, direction):
        """[(prio, handle, name, prog_id)] of bpf and other filters, as tc sees them."""
        if 'clsact' not in self.qdiscs(dev):
            return []
        out = []
        for f in json.loads(self.tc('-j', 'filter', 'show', 'dev', dev, direction) or '[]'):
            opts = f.get('options')
            if opts is None:
                continue  # a priority's list head
            out.append((f['pref'], int(opts.get('handle', '0'), 16), opts.get('bpf_name'), opts.get('prog', {}).get('id')))
        return out


def attach_params(pin_root, state_dir, **extra):
    params = {
        'src': SRC,
        'pin_root': pin_root,
        'state_dir': state_dir,
        'attach': [
            {'interface': 'p0', 'direction': 'egress', 'plane': 0},
            {'interface': 'p0', 'direction': 'ingress', 'plane': 0},
            {'interface': 'p1', 'direction': 'egress', 'plane': 1},
            {'interface': 'p1', 'direction': 'ingress', 'plane': 1},
        ],
    }
    params.update(extra)
    return params


def run_module(lab, args, check_mode=False, diff=True):
    """The ebpf_program module's main() in this process, inside the lab's host namespace."""
    from ansible_collections.edgeft.failover.plugins.modules import ebpf_program

    return nshost.run_module(ebpf_program.main, args, lab.ns, check_mode=check_mode, diff=diff)


class UdpStreams:
    """UDP packets with sequence numbers through every plane NIC, both ways.

    One sender thread paces all streams; one receiver thread records which
    sequence numbers arrived. Host -> peer crosses p0/p1 egress, peer -> host
    crosses p0/p1 ingress.
    """

    def __init__(self, lab, pps_per_stream=1500):
        self.interval = 1.0 / pps_per_stream
        self.streams = []  # (id, send socket, destination)
        self.receivers = {}  # socket -> stream id
        for plane, (_unused, _unused2, addr, peer_addr) in PLANES.items():
            for sender_ns, src, receiver_ns, dst, way in ((lab.ns, addr, lab.peer, peer_addr, 'egress'),
                                                          (lab.peer, peer_addr, lab.ns, addr, 'ingress')):
                sid = len(self.streams)
                with inside(receiver_ns):
                    r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                r.bind((dst, PORT + sid))
                r.setblocking(False)
                with inside(sender_ns):
                    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.bind((src, 0))
                self.streams.append((sid, s, (dst, PORT + sid), 'p%d %s' % (plane, way)))
                self.receivers[r] = sid
        self.sent = [0] * len(self.streams)
        self.got = [set() for stream in self.streams]
        self.send_errors = 0
        self._stop = threading.Event()
        self._stopped_sending = threading.Event()
        self._threads = [threading.Thread(target=self._send, daemon=True), threading.Thread(target=self._receive, daemon=True)]

    def _send(self):
        next_at = time.monotonic()
        while not self._stop.is_set():
            for sid, s, dst, _unused in self.streams:
                try:
                    s.sendto(struct.pack('!II', sid, self.sent[sid]) + b'edgeft-stream', dst)
                    self.sent[sid] += 1
                except OSError:
                    self.send_errors += 1
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        self._stopped_sending.set()

    def _receive(self):
        quiet_since = None
        while True:
            ready = select.select(list(self.receivers), [], [], 0.05)[0]
            for r in ready:
                with contextlib.suppress(BlockingIOError):
                    while True:
                        data = r.recv(64)
                        sid, seq = struct.unpack('!II', data[:8])
                        self.got[sid].add(seq)
            if ready:
                quiet_since = None
            elif self._stopped_sending.is_set():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 0.3:
                    return

    def start(self):
        for t in self._threads:
            t.start()
        return self

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(10)
        for stream in self.streams:
            stream[1].close()
        for r in self.receivers:
            r.close()

    def report(self):
        """{stream label: (sent, received, lost)}"""
        return {label: (self.sent[sid], len(self.got[sid]), self.sent[sid] - len(self.got[sid]))
                for sid, _unused, _unused2, label in self.streams}
