# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probe packet: a mirror of struct edgeft_probe in bpf/edgeft_maps.h.

A request goes to the peer's address on one plane, UDP port PORT; the peer's
tc ingress program answers it in the kernel (swaps addresses, ports and the
two kind halves), so a reply carries back our session, sequence number and
send time untouched. tests/kernel/bpf/test_probe_reflector.py compiles asserts of
these values against the header.

CHECK / CHECK_REPLY are the plane_check module's probes (module_utils/plane_check.py):
reflected like a request, also on a drained plane. The agent never sends them
and parse_reply() never accepts their replies, so a drained plane stays dead
to the agent's judgement.
"""

from __future__ import annotations

import struct

PORT = 7531
MAGIC = 0x65667470  # "eftp"
REQUEST = 0x7271  # "rq"
REPLY = 0x7270  # "rp"
CHECK = 0x6371  # "cq"
CHECK_REPLY = 0x6370  # "cp"

# magic, kind, kind_swap, session, seq, sent_ns; network order throughout
FORMAT = struct.Struct("!IHHIIQ")
SIZE = FORMAT.size

# Offsets of struct edgeft_probe's fields (asserted against the header).
FIELDS = (("magic", 0, 4), ("kind", 4, 2), ("kind_swap", 6, 2), ("session", 8, 4), ("seq", 12, 4), ("sent_ns", 16, 8))


def request(session, seq, sent_ns):
    """The payload of a request."""
    return FORMAT.pack(MAGIC, REQUEST, REPLY, session & 0xFFFFFFFF, seq & 0xFFFFFFFF, sent_ns)


def parse_reply(data):
    """(session, seq, sent_ns) of a reply payload, or None for anything else."""
    return _parse(data, REPLY, REQUEST)


def check_request(session, seq, sent_ns):
    """The payload of a check request (answered on a drained plane too)."""
    return FORMAT.pack(MAGIC, CHECK, CHECK_REPLY, session & 0xFFFFFFFF, seq & 0xFFFFFFFF, sent_ns)


def parse_check_reply(data):
    """(session, seq, sent_ns) of a check reply payload, or None for anything else."""
    return _parse(data, CHECK_REPLY, CHECK)


def _parse(data, kind_want, swap_want):
    if len(data) < SIZE:
        return None
    magic, kind, kind_swap, session, seq, sent_ns = FORMAT.unpack_from(data)
    if magic != MAGIC or kind != kind_want or kind_swap != swap_want:
        return None
    return session, seq, sent_ns
