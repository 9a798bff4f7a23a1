"""The two attached hosts of the plane_state and plane_check tests (hostlab.attached_two_hosts,
one for the session: conftest.py): their reset before each test, and what the plane_state tests
do with them."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time

import hostlab as L

from ansible_collections.edgeft.failover.plugins.module_utils.planes import drain_routes
from ansible_collections.edgeft.failover.plugins.modules import peer_table, plane_state

OTHER = {1: 2, 2: 1}


def fill(lab, h, extra=(), families=(4, 6)):
    """Host h's peer table: the other host (by the addresses of `families`) and `extra`."""
    r = L.run_module(peer_table.main, dict(pin_root=lab.pins[h], state_dir=lab.state_dirs[h], planes=L.PLANES,
                                           peers=[L.peer_decl(OTHER[h], families=families)] + list(extra)), lab.ns[h])
    assert not r.get("failed"), r["msg"]


def drain_record(lab, h=1):
    """plane_state's per-peer drain record of host h, None when there is no file."""
    try:
        with open(os.path.join(lab.state_dirs[h], "peer_drains.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def state(lab, plane=None, h=1, check=False, **kw):
    args = dict(dict(pin_root=lab.pins[h], state_dir=lab.state_dirs[h]), **kw)
    if plane is not None:
        args["plane"] = plane
    return L.run_module(plane_state.main, args, lab.ns[h], check_mode=check)


def ok(result):
    assert not result.get("failed"), result.get("msg")
    return result


def counters(lab, h, plane):
    return lab.maps(h).plane_counters(plane)


def ping(lab, h, dst, count=3):
    cmd = ["ip", "netns", "exec", lab.ns[h], "ping", "-c", str(count), "-i", "0.05", "-W", "1", dst]
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def udp_roundtrip(lab, family, n=5):
    """n datagrams host 1 -> host 2's plane-a address; how many arrived."""
    af = socket.AF_INET if family == 4 else socket.AF_INET6
    with L.in_netns(lab.ns[2]):
        rx = socket.socket(af, socket.SOCK_DGRAM)
    with L.in_netns(lab.ns[1]):
        tx = socket.socket(af, socket.SOCK_DGRAM)
    with rx, tx:
        rx.bind((L.ADDR[2][family][0], 0))
        rx.settimeout(1.0)
        for i in range(n):
            tx.sendto(b"edgeft-%d" % i, (L.ADDR[2][family][0], rx.getsockname()[1]))
        got = 0
        with contextlib.suppress(socket.timeout):
            while got < n:
                rx.recv(100)
                got += 1
    return got


def peer_state(lab, h):
    """Host h's view of the other host (peer id 0 in both tables)."""
    return lab.maps(h).get_peer(0)


def delta(base, now, h, plane, key):
    return now[h][plane][key] - base[h][plane][key]


def wait_for(cond, timeout=3.0):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def reset(lab):
    """Both peer tables filled, counters zero, planes up, nothing learned, no per-peer drain recorded."""
    for h in (1, 2):
        lab.maps(h).clear()
        fill(lab, h)
        for name in ("peer_drains.json", "peer_drains.lock"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(lab.state_dirs[h], name))
        # Routes a drain put in the held table (drain_routes.py) outlive the maps' reset.
        for family in ("-4", "-6"):
            subprocess.run(["ip", "-n", lab.ns[h], family, "route", "flush", "table", str(drain_routes.TABLE + 1)],
                           capture_output=True, check=False)
    for h in (1, 2):
        other = OTHER[h]
        lab.wait_resolved(h, [(L.ADDR[other][f][p], "fab%d" % p) for f in (4, 6) for p in (0, 1)])
    return lab


def routing(lab, h=1, peer_id=0):
    p = lab.maps(h).get_peer(peer_id)
    return p["active_plane"], p["down_planes"], p["learned_planes"], p["changed_ns"]
