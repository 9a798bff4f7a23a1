"""UDP stream workers (run by traffic_proc in a host namespace): a paced sender, a receiver.

Each datagram carries the stream's id, a sequence number and its send time (CLOCK_MONOTONIC
ns). The workers only record; traffic_results derives the figures.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import struct
import time
from array import array
from pathlib import Path
from typing import Any

from .traffic_proc import Control

HEADER = struct.Struct("!8sQQ")  # stream id, sequence number, send time (ns)
TICK_NS = 1_000_000  # the sender wakes every ms and sends what is due: 10 kpps = bursts of ~10
MAX_DEBT_S = 0.005  # catch up on a hiccup up to 5 ms of packets; beyond that skip (no bursts)
NS = 1_000_000_000
# Linux values the socket module does not export.
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
SO_TIMESTAMPNS = 35  # also SCM_TIMESTAMPNS; struct timespec of two longs on 64-bit
BUFFER_BYTES = 32 << 20  # room for seconds of traffic: only the network may drop
POLL_MS = 20


def family_of(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def send(ctl: Control, cfg: dict[str, Any]) -> None:
    pps: int = cfg["pps"]
    stream_id: bytes = cfg["stream_id"]
    sock = socket.socket(family_of(cfg["address"]), socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, BUFFER_BYTES)
    if cfg.get("source"):
        sock.bind((cfg["source"], 0))
    sock.setblocking(False)  # a full queue is an error to count, never a pause of the stream
    dest = (cfg["address"], ctl.receive())  # the receiver's port, once it is bound
    payload = bytearray(max(cfg["size"], HEADER.size))
    errors: dict[str, int] = {}
    max_debt = max(1, int(pps * MAX_DEBT_S))
    seq = slots = stalls = max_gap = 0
    ctl.ready()
    # Packet k of the schedule is due at base + k/pps; `slots` counts schedule slots used.
    base = first = last = time.monotonic_ns()
    while True:
        now = time.monotonic_ns()
        owed = (now - base) * pps // NS + 1 - slots
        if owed > max_debt:  # the sender itself was held up: skip rather than burst
            slots += owed - max_debt
            owed = max_debt
            stalls += 1
        slots += max(owed, 0)
        while owed > 0:
            stamp = time.monotonic_ns()
            HEADER.pack_into(payload, 0, stream_id, seq, stamp)
            try:
                sock.sendto(payload, dest)
            except OSError as exc:  # the packet is lost like any other: count it, carry on
                name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
                errors[name] = errors.get(name, 0) + 1
            if seq == 0:
                first = stamp
            elif stamp - last > max_gap:
                max_gap = stamp - last
            last = stamp
            seq += 1
            owed -= 1
        if ctl.command() is not None:
            break
        next_due = base + slots * NS // pps
        time.sleep(max(next_due - time.monotonic_ns(), TICK_NS) / NS)
    sock.close()
    ctl.result({"sent": seq, "first_ns": first, "last_ns": last, "errors": errors, "max_gap_ns": max_gap, "stalls": stalls})


def _socket_drops(sock: socket.socket) -> int:
    """The kernel's drop counter of this socket (full receive buffer), from /proc/net/udp[6]."""
    inode = str(os.fstat(sock.fileno()).st_ino)
    name = "udp6" if sock.family == socket.AF_INET6 else "udp"
    for line in Path("/proc/net", name).read_text().splitlines()[1:]:
        fields = line.split()
        if fields[9] == inode:
            return int(fields[-1])
    return 0


def receive(ctl: Control, cfg: dict[str, Any]) -> None:
    stream_id: bytes = cfg["stream_id"]
    sock = socket.socket(family_of(cfg["address"]), socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, BUFFER_BYTES)
    # Kernel receive timestamps: arrival times that do not depend on when this process runs.
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.bind((cfg["bind"], cfg["port"]))
    sock.setblocking(False)
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    ctl.ready(port=sock.getsockname()[1])
    # The kernel stamps with CLOCK_REALTIME; shift to CLOCK_MONOTONIC (constant over a run).
    before = time.monotonic_ns()
    offset = (before + time.monotonic_ns()) // 2 - time.time_ns()
    seqs, sends, arrivals = array("q"), array("q"), array("q")
    foreign = user_stamps = 0
    cmsg_space = socket.CMSG_SPACE(16)
    stopping = False
    while True:
        try:
            message = sock.recvmsg(2048, cmsg_space)
        except BlockingIOError:
            if stopping:
                break  # everything that arrived before the stop is read
            poller.poll(POLL_MS)
            stopping = ctl.command(time.monotonic_ns()) is not None
            continue
        data, ancillary = message[0], message[1]
        arrival = 0
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= 16:
                seconds, nanoseconds = struct.unpack_from("qq", value)
                arrival = seconds * NS + nanoseconds + offset
        if not arrival:
            arrival = time.monotonic_ns()
            user_stamps += 1
        if len(data) < HEADER.size or data[:8] != stream_id:
            foreign += 1  # not this stream's (a stray from an earlier run on the same port)
            continue
        header = HEADER.unpack_from(data)
        seqs.append(header[1])
        sends.append(header[2])
        arrivals.append(arrival)
        if not stopping:
            stopping = ctl.command(arrival) is not None
    drops = _socket_drops(sock)
    sock.close()
    ctl.result({
        "seqs": seqs, "sends": sends, "arrivals": arrivals, "foreign": foreign, "socket_drops": drops,
        "timestamps": "user" if user_stamps else "kernel",
    })
