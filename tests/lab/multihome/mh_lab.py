"""Helpers of the multihome lab tests: run the playbook, read a lab host back.

Everything is read inside the host's namespace, independently of the module's
own code: addresses, routes and rules with pyroute2 (Lab.ipr), sysctls from
/proc/sys/net in a thread that entered the namespace (/proc/sys/net is per
network namespace).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path

from edgeft_lab import netns
from repo import REPO

PLAYBOOK = Path(__file__).resolve().parent / "multihome.yml"
RECAP = re.compile(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
NICS = ("fab0", "fab1")
TABLES = (254, 60901, 60902)  # main and the plane tables
FAMILIES = {4: socket.AF_INET, 6: socket.AF_INET6}


def run_playbook(inventory, *extra):
    """ansible-playbook of the multihome playbook with edgeft_persist=none; (rc, output, {host: (changed, failed)})."""
    argv = ["ansible-playbook", "-i", str(inventory), str(PLAYBOOK), "-e", "edgeft_persist=none"] + list(extra)
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False,
                          env=dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1"))
    out = proc.stdout + proc.stderr
    recap = {m.group(1): (int(m.group(3)), int(m.group(4)) + int(m.group(5))) for m in RECAP.finditer(out)}
    return proc.returncode, out, recap


def addresses(lab, host):
    """{ifname: {cidr}} without IPv6 link-local addresses (the kernel's own)."""
    out = {}
    with lab.ipr(host) as ipr:
        names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
        for msg in ipr.get_addr():
            addr = msg.get_attr("IFA_ADDRESS")
            if msg["family"] == socket.AF_INET6 and addr.startswith("fe80:"):
                continue
            out.setdefault(names[msg["index"]], set()).add("%s/%d" % (addr, msg["prefixlen"]))
    return out


def routes(lab, host, table):
    """{(family, dst, gateway, dev, scope, proto)} of one table."""
    out = set()
    with lab.ipr(host) as ipr:
        names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
        for family, af in FAMILIES.items():
            for r in ipr.get_routes(family=af, table=table):
                dst = r.get_attr("RTA_DST") or ("0.0.0.0" if family == 4 else "::")
                out.add((family, "%s/%d" % (dst, r["dst_len"]), r.get_attr("RTA_GATEWAY"),
                         names.get(r.get_attr("RTA_OIF")), r["scope"], r["proto"]))
    return out


def rules(lab, host):
    """{(family, priority, from, table, proto)} of every rule."""
    out = set()
    with lab.ipr(host) as ipr:
        for family, af in FAMILIES.items():
            for r in ipr.get_rules(family=af):
                src = r.get_attr("FRA_SRC")
                out.add((family, r.get_attr("FRA_PRIORITY") or 0, "%s/%d" % (src, r["src_len"]) if src else "all",
                         r.get_attr("FRA_TABLE") or r["table"], r.get_attr("FRA_PROTOCOL") or 0))
    return out


def links(lab, host):
    with lab.ipr(host) as ipr:
        return {link.get_attr("IFLA_IFNAME"): (link.get_attr("IFLA_MTU"), bool(link["flags"] & 1)) for link in ipr.get_links()}


def sysctls(lab, host):
    """Every readable net.ipv4/ipv6 conf sysctl of the plane NICs, all and default."""
    def read():
        out = {}
        for family in ("ipv4", "ipv6"):
            for dev in NICS + ("all", "default"):
                base = Path("/proc/sys/net", family, "conf", dev)
                for entry in sorted(base.iterdir()) if base.is_dir() else []:
                    try:
                        out["net.%s.conf.%s.%s" % (family, dev, entry.name)] = entry.read_text().strip()
                    except OSError:  # write-only or unset (stable_secret)
                        continue
        return out
    return netns.run_in(lab.netns(host), read)


def snapshot(lab, host):
    """Everything multihome may touch on a host, and the main table."""
    return {
        "addresses": addresses(lab, host),
        "routes": {t: routes(lab, host, t) for t in TABLES},
        "rules": rules(lab, host),
        "links": links(lab, host),
        "sysctls": sysctls(lab, host),
    }
