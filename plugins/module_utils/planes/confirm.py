# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Proof that the peers steer around a drained plane: each one's answer to an echo comes back on another plane.

After a drain, our echo request to a peer's address on the plane leaves
steered onto another plane; the peer's data path learns from it that we keep
off the plane, and the peer's kernel answers to our address on the plane. That
answer leaves through the peer's egress program: steered, it arrives here on
another plane's NIC. It arrives on the drained plane's NIC only while the peer
still sends to us natively there (learning held after a recent change, learning
off for the peer, no other plane to go to). A learned bit stays until the peer
sees our traffic natively on the plane again - which a drained plane never
sends - or the peer's agent finds the plane answering its probes, which a
drained plane never does. So a peer confirmed once keeps off the plane for as
long as the drain lasts, with or without traffic to us.

After an undrain it is the other way round (back=True): our echo arrives natively on
the plane, and the peer forgets what the drain taught it - unless its own learning
hold, after a change of its own, swallows that packet (two hosts behind one switch
undrain at the same moment). Its answer then still comes back on another plane, and
the echo goes again RESEND_MS later, past the hold, until the answer comes back on
the plane: every peer is proven back on it for us.

Meanwhile we must not learn from that peer: its steered packets (answers included)
would teach us that it keeps off the plane, our next echoes would leave steered, and
the two hosts would keep each other off the plane for good, each echoing the other's
steering (with no agent to find the plane answering, nothing ends that). So each of
the first HOLD_ROUNDS rounds holds our learning from the peers not back yet until into
the next round, which gives each of them an echo past its own hold while we still
ignore it. A peer that really keeps off the plane (drained there) teaches us again
once our hold ends.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import time

from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import now_ns
from ansible_collections.edgeft.failover.plugins.module_utils.fabric import icmp
from ansible_collections.edgeft.failover.plugins.module_utils.planes.notify import (
    NOTIFY_PAYLOAD, echo_socket, peer_targets, plane_ifname)

RESEND_MS = 100  # past the data path's learning hold (50 ms) after a peer's last change
HOLD_ROUNDS = 3  # rounds of an undrain's confirmation that renew our hold for the peers not back yet
MIN_TIMEOUT_MS, MAX_TIMEOUT_MS = 100, 60000
_IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)
_IPV6_RECVPKTINFO = getattr(socket, "IPV6_RECVPKTINFO", 49)
_IPV6_PKTINFO = getattr(socket, "IPV6_PKTINFO", 50)
PEER_ID = struct.Struct("!I")  # the peer's id, after the run's tag in the payload (sequence numbers are 16 bits)


def _reply_socket(family):
    """A raw ICMP socket on no NIC in particular, told which NIC each packet came in on."""
    if family == 4:
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, socket.IPPROTO_ICMP)
        s.setsockopt(socket.IPPROTO_IP, _IP_PKTINFO, 1)
    else:
        s = socket.socket(socket.AF_INET6, socket.SOCK_RAW | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, socket.IPPROTO_ICMPV6)
        s.setsockopt(socket.IPPROTO_IPV6, _IPV6_RECVPKTINFO, 1)
    return s


def parse_reply(family, data, ancillary):
    """(ident, sequence, payload, arrival ifindex) of an echo reply; None for anything else."""
    if family == 4:
        if len(data) < 20:
            return None
        data = data[(data[0] & 0x0F) * 4:]  # a raw IPv4 socket reads the IP header too
    if len(data) < icmp.HEADER.size:
        return None
    kind, _code, _sum, ident, seq = icmp.HEADER.unpack_from(data)
    if kind != icmp.ECHO_REPLY[family]:
        return None
    ifindex = None
    for level, ctype, cdata in ancillary:
        if family == 4 and level == socket.IPPROTO_IP and ctype == _IP_PKTINFO and len(cdata) >= 12:
            ifindex = struct.unpack_from("=i", cdata)[0]
        elif family == 6 and level == socket.IPPROTO_IPV6 and ctype == _IPV6_PKTINFO and len(cdata) >= 20:
            ifindex = struct.unpack_from("=i", cdata, 16)[0]
    return ident, seq, data[icmp.HEADER.size:], ifindex


def confirm_peers(maps, index, timeout_ms, back=False, clock=time.monotonic):
    """Echo requests on plane `index` to every peer with an address on it, again every
    RESEND_MS to those whose answer has not come back where it should - on another plane
    after a drain, on this one after an undrain (back) - until all have or timeout_ms is
    over.

    Returns ({peer id: how it ended}, warnings): "confirmed", "answered on the plane"
    (drained: the peer still sends to us there), "answered on another plane" (back: the
    peer still keeps off it for us), or "no answer".
    """
    ifname = plane_ifname(maps, index)
    plane_ifindex = maps.planes.get(index).ifindex
    if ifname is None:
        return {}, ["confirm: plane %d's ifindex %d does not exist here; no peer confirmed" % (index, plane_ifindex)]
    targets = {peer_id: (family, addr) for peer_id, family, addr in peer_targets(maps, index)}
    outcome = {peer_id: "no answer" for peer_id in targets}
    if not targets:
        return outcome, []
    ident = os.getpid() & 0xFFFF
    tag = NOTIFY_PAYLOAD + os.urandom(4)  # this run's: another run's answers are not ours
    senders, receivers, errors = {}, {}, []
    try:
        try:
            for family in sorted({f for f, _a in targets.values()}):
                senders[family] = echo_socket(family, ifname)
                receivers[family] = _reply_socket(family)
        except OSError as e:
            return outcome, ["confirm: cannot open an ICMP socket for plane %s: %s" % (ifname, e.strerror or e)]
        poller = select.poll()
        by_fd = {}
        for family, s in receivers.items():
            poller.register(s.fileno(), select.POLLIN)
            by_fd[s.fileno()] = (family, s)
        deadline = clock() + timeout_ms / 1000.0
        rounds = 0
        while True:
            if back and rounds < HOLD_ROUNDS:
                # Stamped a round ahead: the data path's hold then lasts into the next round.
                maps.hold([p for p, o in outcome.items() if o != "confirmed"], at_ns=now_ns() + RESEND_MS * 1000000)
            rounds += 1
            for peer_id, (family, addr) in targets.items():
                if outcome[peer_id] == "confirmed":
                    continue
                try:
                    payload = tag + PEER_ID.pack(peer_id)
                    senders[family].sendto(icmp.echo_request(family, ident, peer_id, payload), (addr, 0))
                except OSError as e:
                    text = "confirm: echo request to %s on %s failed: %s" % (addr, ifname, e.strerror or e)
                    if text not in errors:
                        errors.append(text)
            round_end = min(deadline, clock() + RESEND_MS / 1000.0)
            while any(o != "confirmed" for o in outcome.values()):
                left = round_end - clock()
                if left <= 0:
                    break
                for fd, _events in poller.poll(max(1, int(left * 1000))):
                    family, s = by_fd[fd]
                    _read(s, family, ident, tag, plane_ifindex, outcome, back)
            if all(o == "confirmed" for o in outcome.values()) or clock() >= deadline:
                return outcome, errors[:5]
    except OSError as e:
        return outcome, (errors + ["confirm: stopped waiting for answers on plane %s: %s" % (ifname, e.strerror or e)])[:5]
    finally:
        for s in list(senders.values()) + list(receivers.values()):
            s.close()


def _read(s, family, ident, tag, plane_ifindex, outcome, back=False) -> None:
    while True:
        try:
            data, ancillary, _flags, _addr = s.recvmsg(512, socket.CMSG_SPACE(32))
        except BlockingIOError:
            return
        except OSError:
            continue  # an ICMP error surfacing on the socket: read on
        parsed = parse_reply(family, data, ancillary)
        if parsed is None:
            continue
        got_ident, _seq, got_payload, ifindex = parsed
        if got_ident != ident or len(got_payload) != len(tag) + PEER_ID.size or not got_payload.startswith(tag):
            continue  # not ours, or another run's
        peer_id = PEER_ID.unpack_from(got_payload, len(tag))[0]
        if outcome.get(peer_id, "confirmed") == "confirmed":
            continue  # a duplicate, or settled already
        on_plane = ifindex == plane_ifindex  # an unknown NIC proves neither
        if back:
            outcome[peer_id] = "confirmed" if on_plane else "answered on another plane"
        else:
            outcome[peer_id] = "answered on the plane" if ifindex is None or on_plane else "confirmed"
