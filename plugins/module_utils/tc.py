# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tc clsact qdiscs and direct-action bpf filters through netlink (pyroute2).

Works with pyroute2 0.7.2 (Debian 12's python3-pyroute2, what targets run) and
later 0.7.x. Those versions do not decode TCA_BPF_TAG/TCA_BPF_ID (nor the
top-level TCA_CHAIN), so the raw attribute bytes are read where they are
missing. Kept free of Ansible imports so tests and the agent use it directly.
"""

from __future__ import annotations

import os
import socket
import struct
from collections import namedtuple

from ansible_collections.edgeft.failover.plugins.module_utils import netlink
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import bpfsys
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError

TC_H_CLSACT = 0xFFFFFFF1  # == TC_H_INGRESS: clsact and ingress qdiscs sit at the same parent
CLSACT_HANDLE = 0xFFFF0000
PARENTS = {'ingress': 0xFFFFFFF2, 'egress': 0xFFFFFFF3}
ETH_P_ALL = 0x0003
TCA_BPF_FLAG_ACT_DIRECT = 1

# Attribute numbers from linux/pkt_cls.h and linux/rtnetlink.h.
_TCA_CHAIN = 11
_TCA_BPF_TAG = 10
_TCA_BPF_ID = 11

_BPF_PROG_GET_FD_BY_ID = 13

Filter = namedtuple('Filter', 'index parent priority protocol handle chain kind name prog_id prog_tag flags')
"""One tc filter as the kernel reports it (name/prog_id/prog_tag/flags only for kind bpf)."""


class TcError(EdgeftError):
    """A tc operation failed; the text names the interface and what was tried."""

    def __init__(self, msg, errno_=0):
        super().__init__(msg)
        self.errno = errno_


def parent_name(parent):
    return '%x:%x' % (parent >> 16, parent & 0xFFFF)


def open_ipr():
    """IPRoute bound to the caller's current network namespace."""
    return netlink.open_ipr(TcError)


def _netlink(what, func, *args, **kwargs):
    try:
        return func(*args, **kwargs)
    except netlink.NetlinkError as e:
        code = getattr(e, 'code', 0) or 0
        raise TcError('%s: %s' % (what, os.strerror(code) if code else e), code) from None


def _raw_attrs(msg):
    """{type: payload bytes} of the attributes pyroute2 left undecoded ('UNKNOWN')."""
    raw = {}
    for slot in msg.get('attrs', []) if hasattr(msg, 'get') else []:
        cell = getattr(slot, 'cell', None)
        if not cell or cell[0] != 'UNKNOWN':
            continue
        nla = cell[1]
        data, offset, length = getattr(nla, 'data', None), getattr(nla, 'offset', None), getattr(nla, 'length', None)
        if data is None or offset is None or not length or length < 4:
            continue
        nla_type = struct.unpack_from('HH', data, offset)[1]
        raw[nla_type & 0x3FFF] = bytes(data[offset + 4:offset + length])
    return raw


def _attr(msg, name, raw_type, decode):
    """Attribute by pyroute2 name (newer releases), else from its raw bytes."""
    value = msg.get_attr(name) if hasattr(msg, 'get_attr') else None
    if value is not None:
        return value
    payload = _raw_attrs(msg).get(raw_type)
    return decode(payload) if payload is not None else None


def _u32(payload):
    return struct.unpack('=I', payload[:4])[0] if len(payload) >= 4 else None


def _hex(payload):
    return payload.hex() if isinstance(payload, (bytes, bytearray)) else str(payload)


def qdisc_at_clsact(ipr, index):
    """Kind of the qdisc at ffff:fff1 ('clsact', 'ingress') or None."""
    for msg in _netlink('list qdiscs of ifindex %d' % index, ipr.get_qdiscs, index):
        if msg['parent'] == TC_H_CLSACT:
            return msg.get_attr('TCA_KIND')
    return None


def add_clsact(ipr, index):
    _netlink('add clsact qdisc on ifindex %d' % index, ipr.tc, 'add', 'clsact', index)


def del_clsact(ipr, index):
    _netlink('delete clsact qdisc on ifindex %d' % index, ipr.tc, 'del', 'clsact', index)


def list_filters(ipr, index, parent):
    """Every filter (not the per-priority chain heads) under parent of ifindex."""
    found = []
    msgs = _netlink('list filters of ifindex %d parent %s' % (index, parent_name(parent)),
                    ipr.get_filters, index=index, parent=parent)
    for msg in msgs:
        if not msg['handle']:
            continue  # the head of a priority's filter list, not a filter
        kind = msg.get_attr('TCA_KIND')
        chain = _attr(msg, 'TCA_CHAIN', _TCA_CHAIN, _u32) or 0
        name = prog_id = prog_tag = flags = None
        opts = msg.get_attr('TCA_OPTIONS')
        if kind == 'bpf' and opts is not None and hasattr(opts, 'get_attr'):
            name = opts.get_attr('TCA_BPF_NAME')
            flags = opts.get_attr('TCA_BPF_FLAGS') or 0
            prog_id = _attr(opts, 'TCA_BPF_ID', _TCA_BPF_ID, _u32)
            prog_tag = _attr(opts, 'TCA_BPF_TAG', _TCA_BPF_TAG, _hex)
            if prog_tag is not None and not isinstance(prog_tag, str):
                prog_tag = _hex(prog_tag)
        found.append(Filter(index, msg['parent'], msg['info'] >> 16, socket.ntohs(msg['info'] & 0xFFFF),
                            msg['handle'], chain, kind, name, prog_id, prog_tag, flags))
    return found


def set_bpf_filter(ipr, index, parent, priority, handle, fd, name, replace=False, flags=TCA_BPF_FLAG_ACT_DIRECT):
    """Add (fails if the slot is taken) or replace in place the bpf filter at parent/priority/handle.

    A replace swaps the program atomically for the packets: the kernel
    publishes the new program with RCU, so none is lost or seen twice.
    """
    command = 'replace-filter' if replace else 'add-filter'
    what = '%s bpf filter %r on ifindex %d %s prio %d handle 0x%x' % (
        'replace' if replace else 'add', name, index, parent_name(parent), priority, handle)
    _netlink(what, ipr.tc, command, 'bpf', index, handle, fd=fd, name=name, parent=parent, prio=priority,
             protocol=ETH_P_ALL, flags=flags & ~TCA_BPF_FLAG_ACT_DIRECT,
             direct_action=bool(flags & TCA_BPF_FLAG_ACT_DIRECT))


def del_filter(ipr, index, parent, priority, handle, protocol=ETH_P_ALL, kind='bpf'):
    what = 'delete %s filter on ifindex %d %s prio %d handle 0x%x' % (kind, index, parent_name(parent), priority, handle)
    _netlink(what, ipr.tc, 'del-filter', kind, index, handle, parent=parent, prio=priority, protocol=protocol)


def prog_fd_by_id(prog_id):
    """A new fd of the loaded program `prog_id` (caller closes it).

    Taken from an attached filter's TCA_BPF_ID before it is replaced, it keeps
    the old program alive so a failed swap can put it back.
    """
    return bpfsys.bpf(_BPF_PROG_GET_FD_BY_ID, bpfsys.IdAttr(id=prog_id), 'open program id %d' % prog_id)
