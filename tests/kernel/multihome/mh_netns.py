"""A throwaway network namespace with two plane NICs, and the multihome module run inside it.

fab0 and fab1 are veths whose peers (fab0p, fab1p) stay in the same namespace, up,
so the plane NICs get carrier when they come up. The namespace is removed on exit,
also when a test fails. Lab addresses only.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import uuid
from pathlib import Path

from pyroute2 import IPRoute
from pyroute2 import netns as pyroute2_netns

# Re-exported: the kernel tests' one namespace toolkit (nshost).
from nshost import ModuleExit, in_netns, run_module  # noqa: F401  # pylint: disable=unused-import

TABLES = (254, 60901, 60902)
FAMILIES = {4: socket.AF_INET, 6: socket.AF_INET6}


def ip(ns, *args):
    return subprocess.run(["ip", "-n", ns, *args], check=True, capture_output=True, text=True).stdout


@contextlib.contextmanager
def plane_host(fab1_up=False):
    """Namespace name; fab0 up, fab1 down unless fab1_up; no addresses on either."""
    ns = "mhu-%s" % uuid.uuid4().hex[:8]
    pyroute2_netns.create(ns)
    try:
        for nic in ("fab0", "fab1"):
            ip(ns, "link", "add", nic, "type", "veth", "peer", "name", nic + "p")
            ip(ns, "link", "set", nic + "p", "up")
        ip(ns, "link", "set", "fab0", "up")
        if fab1_up:
            ip(ns, "link", "set", "fab1", "up")
        yield ns
    finally:
        pyroute2_netns.remove(ns)


def snapshot(ns):
    """Addresses and routes (no IPv6 link-local ones), links, the main and plane tables, rules and the plane NICs' sysctls."""
    out = {"addresses": set(), "links": {}, "routes": set(), "rules": set(), "sysctls": {}}
    with in_netns(ns), IPRoute() as ipr:
        names = {}
        for link in ipr.get_links():
            names[link["index"]] = link.get_attr("IFLA_IFNAME")
            out["links"][names[link["index"]]] = (link.get_attr("IFLA_MTU"), bool(link["flags"] & 1))
        for msg in ipr.get_addr():
            addr = msg.get_attr("IFA_ADDRESS")
            if not (msg["family"] == socket.AF_INET6 and addr.startswith("fe80:")):
                out["addresses"].add((names[msg["index"]], "%s/%d" % (addr, msg["prefixlen"])))
        for family, af in FAMILIES.items():
            for table in TABLES:
                for r in ipr.get_routes(family=af, table=table):
                    dst = r.get_attr("RTA_DST") or ("0.0.0.0" if family == 4 else "::")
                    if dst.startswith("fe80:"):  # the kernel's own, following carrier (also on the veth peers)
                        continue
                    out["routes"].add((table, "%s/%d" % (dst, r["dst_len"]), r.get_attr("RTA_GATEWAY"),
                                       names.get(r.get_attr("RTA_OIF")), r["scope"], r["proto"]))
            for r in ipr.get_rules(family=af):
                src = r.get_attr("FRA_SRC")
                out["rules"].add((family, r.get_attr("FRA_PRIORITY") or 0, "%s/%d" % (src, r["src_len"]) if src else "all",
                                  r.get_attr("FRA_TABLE") or r["table"], r.get_attr("FRA_PROTOCOL") or 0))
        for family in ("ipv4", "ipv6"):
            for dev in ("fab0", "fab1", "all"):
                base = Path("/proc/sys/net", family, "conf", dev)
                for entry in sorted(base.iterdir()) if base.is_dir() else []:
                    with contextlib.suppress(OSError):
                        out["sysctls"]["net.%s.conf.%s.%s" % (family, dev, entry.name)] = entry.read_text().strip()
    return out
