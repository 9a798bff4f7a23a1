# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Backup routes: keep a peer's plane address routable while our plane NIC is down.

When a plane NIC goes admin-down (or disappears) the kernel deletes every
route through it, so packets to a peer's address on that plane fail with
ENETUNREACH before they reach any tc hook: the data path cannot steer what is
never sent. Carrier loss alone keeps the routes, but the kernel has flushed
the NIC's neighbour entries and queues packets on a new, unresolvable one:
they never reach tc either. So, per family, three rules:

    <priority-1>: lookup <table+1>                     (held: planes judged down, failed paths)
    <priority>:   lookup main suppress_prefixlength 0   (main, but not its default route)
    <priority+1>: lookup <table>                       (backup: every peer address)

Both tables hold, for a peer address on plane P, a route via the peer's
address on another plane Q, on-link through Q's NIC, with our P address as
source (sockets keep their identity). The backup table catches the first
packet after the kernel deleted P's connected route (admin-down) or skipped it
(ignore_routes_with_linkdown=1, set on the plane NICs: carrier loss), with no
agent on the path. The held table carries P's peer addresses from the moment
the agent judges plane P down until its failback: when P's link comes back,
the connected route returns at once, but its neighbour entries start empty and
packets would wait on ARP/ND (whose first request may be lost while the link
settles: a 1 s retry). It also carries a peer's P addresses while the path to
that peer on P is failed over with P's link up (a silent switch): the kernel
would otherwise go on resolving the peer on P, and once that neighbour entry
expires unanswered it drops the packets before tc could steer them. Probe
sockets are bound to P's NIC, so the held routes (through Q) never apply to
them: the probes resolve P's neighbours meanwhile.

On L2 planes the route goes via the peer's Q address, on-link on Q. On a
routed plane Q (the data path translates what leaves on it: bpf/edgeft_xlat.h)
it goes via Q's gateway: the packet leaves Q's NIC still addressed to the
peer's P address, and Q's egress program rewrites both addresses to their
failover addresses on Q. All changes of a call go through one `ip -batch`
process.
"""

from __future__ import annotations

import ipaddress
import subprocess

from ansible_collections.edgeft.failover.plugins.module_utils import constants, procsys
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import iproute

PROTO = str(constants.ROUTE_PROTO)  # as the ip command takes it


def desired(peers: dict, planes: list, prefixes: dict, routed=frozenset()) -> dict:
    """{(family, dst): (gateway, device, source, plane of dst)} for peers {id: get_peer()}.

    planes: config planes with own addresses (and gateways); prefixes:
    {(plane, family): ip_network} of our on-link prefix on each plane; routed:
    indexes of the planes the data path translates onto.
    """
    out = {}
    for peer in peers.values():
        for p in planes:
            for family, key in ((4, "v4"), (6, "v6")):
                dst = peer[key][p["index"]]
                source = p.get(family)
                if not dst or not source:
                    continue
                for q in planes:
                    if q is p:
                        continue
                    gateway = peer[key][q["index"]]
                    net = prefixes.get((q["index"], family))
                    if q["index"] in routed:
                        gateway = q.get("gateway", {}).get(family)
                    elif not gateway or net is None or ipaddress.ip_address(gateway) not in net:
                        continue
                    if not gateway:
                        continue
                    out[(family, dst)] = (gateway, q["interface"], source, p["index"])
                    break
    return out


LOCAL_TABLE = constants.LOCAL_TABLE
KEPT_LOCAL_METRIC = 1024  # below the kernel's own local route (metric 0), which returns with the NIC


def kept_local() -> set:
    """Our IPv6 addresses that edgeft keeps local through lo (keep_local)."""
    found = iproute.run(["-6", "route", "show", "table", str(LOCAL_TABLE), "proto", PROTO, "dev", "lo"], json_out=True)
    return {r["dst"] for r in found if r.get("type") == "local" and "dst" in r}


def keep_local(want: set) -> tuple:
    """Keep exactly the IPv6 addresses in `want` local through lo; (added, removed, errors).

    A NIC that loses its carrier keeps its IPv6 addresses (keep_addr_on_down) but the kernel
    deletes their local routes, so a peer's packets steered onto another plane, addressed to
    this plane's address, would find the address no longer local and be dropped (IPv4 keeps its
    local routes). A local route through lo keeps them delivered until the NIC is back."""
    have = kept_local()
    commands = [["-6", "route", "replace", "local", a, "dev", "lo", "table", str(LOCAL_TABLE), "metric",
                 str(KEPT_LOCAL_METRIC), "proto", PROTO] for a in sorted(want - have)]
    commands += [["-6", "route", "del", "local", a, "dev", "lo", "table", str(LOCAL_TABLE), "metric",
                  str(KEPT_LOCAL_METRIC)] for a in sorted(have - want)]
    return sorted(want - have), sorted(have - want), batch(commands)


def tentative_addresses() -> set:
    """Our IPv6 addresses that are tentative: a NIC that went down keeps its addresses
    (keep_addr_on_down) but marks them so, and the kernel refuses them as a route's source."""
    return {a["local"] for link in iproute.run(["-6", "addr", "show", "tentative"], json_out=True)
            for a in link.get("addr_info", []) if "local" in a}


def ignore_linkdown(nics) -> list:
    """Set ignore_routes_with_linkdown on each NIC, both families; returns what changed."""
    changed = []
    for nic in nics:
        for family in ("ipv4", "ipv6"):
            path = "/proc/sys/net/%s/conf/%s/ignore_routes_with_linkdown" % (family, nic)
            try:
                with open(path) as f:
                    if f.read().strip() == "1":
                        continue
                procsys.write_value(path, 1)
                changed.append("%s %s" % (family, nic))
            except OSError:
                continue  # IPv6 disabled on the NIC, or the NIC is gone: nothing to route there anyway
    return changed


def batch(commands: list) -> list:
    """Run `ip` commands (argument lists starting with -4 or -6) in one `ip -force -batch -`
    per family (a batch line takes no options); the error lines."""
    errors = []
    for family in ("-4", "-6"):
        lines = "".join(" ".join(c[1:]) + "\n" for c in commands if c[0] == family)
        if not lines:
            continue
        proc = subprocess.run([iproute.ip_binary(), family, "-force", "-batch", "-"], input=lines, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, check=False)
        errors.extend(line for line in proc.stderr.splitlines() if line.strip())
    return errors


def ensure_rules(table: int, priority: int) -> list:
    """Add our three rules per family where missing; returns what was added."""
    want = [
        (priority - 1, ["table", str(table + 1)], lambda r: str(r.get("table")) == str(table + 1)),
        (priority, ["table", "main", "suppress_prefixlength", "0"], lambda r: r.get("table") == "main" and "suppress_prefixlen" in r),
        (priority + 1, ["table", str(table)], lambda r: str(r.get("table")) == str(table)),
    ]
    commands, added = [], []
    for family in (4, 6):
        have = iproute.run(["-%d" % family, "rule", "show"], json_out=True)
        for prio, args, match in want:
            if not any(r.get("priority") == prio and match(r) for r in have):
                commands.append(["-%d" % family, "rule", "add", "priority", str(prio)] + args + ["protocol", PROTO])
                added.append("IPv%d rule %d %s" % (family, prio, " ".join(args)))
    errors = batch(commands)
    if errors:
        raise iproute.IpCommandError("adding the backup route rules failed: %s" % errors[0])
    return added


def current(table: int) -> dict:
    out = {}
    for family in (4, 6):
        try:
            found = iproute.run(["-%d" % family, "route", "show", "table", str(table)], json_out=True)
        except iproute.IpCommandError as e:
            if "does not exist" not in str(e):  # a table springs into being with its first route
                raise
            found = []
        for r in found:
            if "dst" in r:
                out[(family, r["dst"])] = (r.get("gateway"), r.get("dev"), r.get("prefsrc"))
    return out


def reconcile(table: int, want: dict) -> tuple:
    """Make <table> hold exactly `want` {(family, dst): (gateway, dev, source, ...)}; (added, removed, errors)."""
    have = current(table)
    commands, added, removed = [], [], []
    for (family, dst), hop in sorted(want.items()):
        gateway, dev, source = hop[:3]
        if have.get((family, dst)) in ((gateway, dev, source), (gateway, dev, None)):
            continue
        commands.append(["-%d" % family, "route", "replace", dst, "via", gateway, "dev", dev, "onlink",
                         "src", source, "table", str(table), "proto", PROTO])
        added.append(dst)
    for family, dst in sorted(set(have) - set(want)):
        commands.append(["-%d" % family, "route", "del", dst, "table", str(table)])
        removed.append(dst)
    # Errors (e.g. the backup NIC is down: its routes come back at its next link-up) are reported, not fatal.
    return added, removed, batch(commands)
