"""Two throwaway "hosts" for the peer-table and plane-state tests.

Each host is a network namespace with two plane NICs, fab0 (plane a) and fab1
(plane b); host 1's fab<n> is a veth whose other end is host 2's fab<n>, so a
packet between them really crosses a plane wire and its tc hooks. Maps are
pinned on a private bpffs outside /sys (`ip netns exec` remounts /sys). All of
it is removed on exit, also when a test fails. Lab addresses only.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import uuid

# Re-exported: the kernel tests' one namespace toolkit (nshost).
from nshost import ModuleExit, bpffs, in_netns, run_module  # noqa: F401  # pylint: disable=unused-import

TUNABLES = {"EDGEFT_MAX_PEERS": 64, "EDGEFT_MAX_ADDRS": 512}
PLANES = [{"name": "a", "interface": "fab0"}, {"name": "b", "interface": "fab1"}]
# ADDR[host][family][plane]
ADDR = {
    1: {4: ("198.18.0.1", "198.19.0.1"), 6: ("fd00:edf7:a::1", "fd00:edf7:b::1")},
    2: {4: ("198.18.0.2", "198.19.0.2"), 6: ("fd00:edf7:a::2", "fd00:edf7:b::2")},
}


def missing() -> str | None:
    """Why the two-host tests cannot run here (root, bcc), or None: for skipif."""
    if os.geteuid() != 0:
        return "needs root (namespaces, tc, bpf)"
    try:
        import bcc  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        return "bcc missing: install python3-bpfcc"
    return None


def ip(*args: str) -> str:
    return subprocess.run(["ip", *args], check=True, capture_output=True, text=True).stdout


def peer_decl(host: int, name: str = None, families=(4, 6), **extra) -> dict:
    """The peer_table declaration of `host` as seen from the other one."""
    planes = []
    for plane, p in enumerate(PLANES):
        entry = {"name": p["name"]}
        for f in families:
            entry["ipv%d" % f] = ADDR[host][f][plane] + ("/24" if f == 4 else "/64")
        planes.append(entry)
    return dict({"name": name or "h%d" % host, "planes": planes}, **extra)


class TwoHosts:
    """Namespaces ns[1], ns[2] joined on planes a and b; pin dirs pins[1], pins[2]."""

    def __init__(self, root: str) -> None:
        tag = uuid.uuid4().hex[:8]
        self.ns = {1: "eft-pt-%s-1" % tag, 2: "eft-pt-%s-2" % tag}
        self.pins = {h: os.path.join(root, "h%d" % h) for h in (1, 2)}
        self.compiled = {}

    def up(self) -> "TwoHosts":
        for ns in self.ns.values():
            ip("netns", "add", ns)
        for plane in (0, 1):
            dev = "fab%d" % plane
            ip("-n", self.ns[1], "link", "add", dev, "type", "veth", "peer", "name", dev, "netns", self.ns[2])
            for h, ns in self.ns.items():
                ip("-n", ns, "addr", "add", ADDR[h][4][plane] + "/24", "dev", dev)
                ip("-n", ns, "addr", "add", ADDR[h][6][plane] + "/64", "dev", dev, "nodad")
                ip("-n", ns, "link", "set", dev, "up")
        for ns in self.ns.values():
            ip("-n", ns, "link", "set", "lo", "up")
            # Steered packets arrive on the "wrong" NIC: loose reverse-path filtering.
            for conf in ("all", "default", "fab0", "fab1"):
                subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.conf.%s.rp_filter=2" % conf], check=True)
        return self

    def down(self) -> None:
        for plane in list(self.compiled.values()):
            plane.close()
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)

    def compile(self, hosts=(1,)):
        """Both planes' programs of each host, over its pinned maps."""
        from ansible_collections.edgeft.failover.plugins.module_utils.datapath.build import compile_plane

        for h in hosts:
            for plane in (0, 1):
                self.compiled[(h, plane)] = compile_plane(plane, pin_dir=self.pins[h], tunables=TUNABLES)

    def maps(self, h: int = 1):
        return self.compiled[(h, 0)].maps

    def attach(self, h: int) -> None:
        """clsact + both programs on host h's plane NICs (as ebpf_program does)."""
        from pyroute2 import IPRoute

        with in_netns(self.ns[h]), IPRoute() as ipr:
            for plane in (0, 1):
                idx = ipr.link_lookup(ifname="fab%d" % plane)[0]
                ipr.tc("add", "clsact", idx)
                for role, parent in (("egress", "ffff:fff3"), ("ingress", "ffff:fff2")):
                    prog = self.compiled[(h, plane)].progs[role]
                    ipr.tc("add-filter", "bpf", idx, ":1", fd=prog.fd, name=prog.name, parent=parent,
                           classid=1, direct_action=True)

    def neighbours(self, h: int = 1) -> dict:
        out = {}
        for family in ("-4", "-6"):
            for n in json.loads(ip("-n", self.ns[h], "-j", family, "neigh", "show") or "[]"):
                out[(n["dst"], n["dev"])] = n
        return out

    def flush_neighbours(self, h: int = 1) -> None:
        for addr, dev in self.neighbours(h):
            subprocess.run(["ip", "-n", self.ns[h], "neigh", "del", addr, "dev", dev], check=False, capture_output=True)

    def wait_resolved(self, h: int, pairs, timeout: float = 5.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            n = self.neighbours(h)
            if all("REACHABLE" in n.get(p, {}).get("state", []) for p in pairs) or time.monotonic() > deadline:
                return n
            time.sleep(0.05)


@contextlib.contextmanager
def attached_two_hosts(tmp_path_factory):
    """two_hosts on a private bpffs, both hosts' programs compiled and attached, and a state
    directory per host in `state_dirs` (from pytest's tmp_path_factory): for a module's lab."""
    with bpffs() as root, two_hosts(root) as lab:
        lab.compile(hosts=(1, 2))
        lab.attach(1)
        lab.attach(2)
        lab.state_dirs = {h: str(tmp_path_factory.mktemp("state-h%d" % h)) for h in (1, 2)}
        yield lab


@contextlib.contextmanager
def two_hosts(root: str):
    lab = TwoHosts(root)
    try:
        yield lab.up()
    finally:
        lab.down()
