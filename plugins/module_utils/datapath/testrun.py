"""BPF_PROG_TEST_RUN: run a loaded program on one packet, as Cilium/Katran tests do.

For tc (SCHED_CLS) programs the kernel builds an skb on the loopback device
(or on ctx.ifindex), runs the program and hands back the verdict and the
packet bytes; redirect helpers only record their target, nothing is sent.
"""

from __future__ import annotations

import ctypes
from collections import namedtuple

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import bpfsys

TC_ACT_UNSPEC = -1
TC_ACT_OK = 0
TC_ACT_SHOT = 2
TC_ACT_REDIRECT = 7

RunResult = namedtuple("RunResult", "retval data duration ctx")

# Room for programs that grow the packet (encapsulation); ours never do.
_HEADROOM = 256


def prog_test_run(prog_fd: int, data: bytes, ctx: bytes = None, repeat: int = 1) -> RunResult:
    """Run prog_fd on data; return (signed retval, data out, ns per run, ctx out)."""
    data = bytes(data)
    din = ctypes.create_string_buffer(data, len(data))
    dout = ctypes.create_string_buffer(len(data) + _HEADROOM)
    attr = bpfsys.ProgRunAttr(
        prog_fd=prog_fd,
        data_size_in=len(data),
        data_size_out=len(dout),
        data_in=ctypes.addressof(din),
        data_out=ctypes.addressof(dout),
        repeat=repeat,
    )
    cin = cout = None
    if ctx is not None:
        ctx = bytes(ctx)
        cin = ctypes.create_string_buffer(ctx, len(ctx))
        cout = ctypes.create_string_buffer(len(ctx))
        attr.ctx_size_in = attr.ctx_size_out = len(ctx)
        attr.ctx_in = ctypes.addressof(cin)
        attr.ctx_out = ctypes.addressof(cout)
    bpfsys.bpf(bpfsys.PROG_TEST_RUN, attr, "BPF_PROG_TEST_RUN on prog fd %d" % prog_fd)
    retval = ctypes.c_int32(attr.retval).value
    out = dout.raw[: attr.data_size_out]
    ctx_out = cout.raw[: attr.ctx_size_out] if cout is not None else None
    return RunResult(retval, out, attr.duration, ctx_out)
