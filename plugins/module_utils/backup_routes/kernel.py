# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Routes of the main table and per-interface sysctls, read and written in the
caller's network namespace (pyroute2 and /proc/sys).

Kernel routes are read into the shape of spec.py's routes, plus "proto",
"scope" and "restore" (the pyroute2 arguments that recreate the route as it
was, for rollback).
"""

from __future__ import annotations

import errno
import socket

from ansible_collections.edgeft.failover.plugins.module_utils import constants, netlink, procsys
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.host import nics

PROTO = constants.ROUTE_PROTO
RT_TABLE_MAIN = 254
RTN_UNICAST = 1
RT_SCOPE_UNIVERSE = 0
RT_SCOPE_LINK = 253
RT_SCOPE_NOWHERE = 255  # in a delete request: match a route of any scope
RTNH_F_ONLINK = 4
RTAX_RTO_MIN = 13
RTAX_RTO_MIN_LOCK = 1 << RTAX_RTO_MIN  # TCP honours a route's rto_min only when it is locked
# Routes the kernel or router advertisements own; never replaced.
KERNEL_PROTOS = {1: "redirect", 2: "kernel", 9: "ra"}
FAMILIES = {4: socket.AF_INET, 6: socket.AF_INET6}
SYSCTL = "ignore_routes_with_linkdown"


class KernelError(EdgeftError, RuntimeError):
    """A netlink or /proc/sys operation failed; the message says which."""


NetlinkError = netlink.NetlinkError
netns_id = netlink.netns_id


def open_ipr():
    return netlink.open_ipr(KernelError)


# ------------------------------------------------------------------ links
def links(ipr) -> dict:
    """ifname -> {ifindex, kind, master, up, mtu, addresses, info_data}: host/nics.py's links()."""
    return nics.links(ipr)


# ----------------------------------------------------------------- routes
def _rto_min(msg):
    metrics = msg.get_attr("RTA_METRICS")
    if metrics is None:
        return None
    lock = metrics.get_attr("RTAX_LOCK") or 0
    value = metrics.get_attr("RTAX_RTO_MIN")
    return value if value and lock & RTAX_RTO_MIN_LOCK else None


def _metrics(msg):
    metrics = msg.get_attr("RTA_METRICS")
    if metrics is None:
        return None
    return dict(metrics["attrs"]) or None


def _parse(msg, names):
    family = 4 if msg["family"] == socket.AF_INET else 6
    dst = msg.get_attr("RTA_DST") or ("0.0.0.0" if family == 4 else "::")
    metric = msg.get_attr("RTA_PRIORITY") or 0
    route = {
        "family": family,
        "dst": "%s/%d" % (dst, msg["dst_len"]),
        "metric": metric,
        "dev": None,
        "gateway": None,
        "nexthops": None,
        "src": msg.get_attr("RTA_PREFSRC"),
        "rto_min_ms": _rto_min(msg),
        "proto": msg["proto"],
        "scope": msg["scope"],
    }
    restore = {
        "family": msg["family"], "dst": route["dst"], "table": RT_TABLE_MAIN, "priority": metric,
        "proto": msg["proto"], "scope": msg["scope"], "type": msg["type"], "flags": msg["flags"] & RTNH_F_ONLINK,
    }
    for attr in ("RTA_PREFSRC", "RTA_GATEWAY", "RTA_OIF"):
        value = msg.get_attr(attr)
        if value is not None:
            restore[attr[4:].lower()] = value
    metrics = _metrics(msg)
    if metrics:
        restore["metrics"] = metrics
    multipath = msg.get_attr("RTA_MULTIPATH")
    if multipath:
        route["nexthops"], restore["multipath"] = [], []
        for hop in multipath:
            gateway = hop.get_attr("RTA_GATEWAY")
            route["nexthops"].append({"dev": names.get(hop["oif"], "#%d" % hop["oif"]), "gateway": gateway,
                                      "weight": hop["hops"] + 1})
            spec = {"oif": hop["oif"], "hops": hop["hops"], "flags": hop["flags"] & RTNH_F_ONLINK}
            if gateway:
                spec["gateway"] = gateway
            restore["multipath"].append(spec)
    else:
        oif = msg.get_attr("RTA_OIF")
        route["dev"] = names.get(oif, "#%s" % oif) if oif else None
        route["gateway"] = msg.get_attr("RTA_GATEWAY")
    route["restore"] = restore
    return route


def main_routes(ipr, families=(4, 6)) -> dict:
    """(family, dst, metric) -> route, for the unicast routes of the main table."""
    names = {msg["index"]: msg.get_attr("IFLA_IFNAME") for msg in ipr.get_links()}
    out = {}
    for family in families:
        for msg in ipr.get_routes(family=FAMILIES[family]):
            table = msg.get_attr("RTA_TABLE") or msg["table"]
            if table != RT_TABLE_MAIN or msg["type"] != RTN_UNICAST:
                continue
            route = _parse(msg, names)
            out[(family, route["dst"], route["metric"])] = route
    return out


def route_args(route, ifindex) -> dict:
    """pyroute2 arguments installing a spec.py route (ifindex: ifname -> index)."""
    args = {"family": FAMILIES[route["family"]], "dst": route["dst"], "table": RT_TABLE_MAIN,
            "priority": route["metric"], "proto": PROTO, "type": "unicast"}
    if route.get("nexthops"):
        args["multipath"] = []
        for hop in route["nexthops"]:
            spec = {"oif": ifindex[hop["dev"]], "hops": hop["weight"] - 1}
            if hop["gateway"]:
                spec["gateway"] = hop["gateway"]
            args["multipath"].append(spec)
    else:
        args["oif"] = ifindex[route["dev"]]
        if route["gateway"]:
            args["gateway"] = route["gateway"]
        elif route["family"] == 4:
            args["scope"] = RT_SCOPE_LINK  # as `ip route add PREFIX dev NIC` does
    if route.get("src"):
        args["prefsrc"] = route["src"]
    if route.get("rto_min_ms"):
        args["metrics"] = {"RTAX_LOCK": RTAX_RTO_MIN_LOCK, "RTAX_RTO_MIN": route["rto_min_ms"]}
    return args


def replace_route(ipr, args):
    ipr.route("replace", **args)


def delete_route(ipr, family, dst, metric, proto=PROTO) -> bool:
    """Delete one route of the main table (only with that proto); False if it was gone."""
    try:
        ipr.route("del", family=FAMILIES[family], dst=dst, table=RT_TABLE_MAIN, priority=metric, proto=proto,
                  scope=RT_SCOPE_NOWHERE)
    except NetlinkError as e:
        if e.code == errno.ESRCH:
            return False
        raise
    return True


def restore_route(ipr, restore):
    """Put back a route exactly as main_routes() read it."""
    ipr.route("replace", **restore)


# ---------------------------------------------------------------- sysctls
def sysctl_key(family, dev) -> str:
    """sysctl(8) notation; a dot inside an interface name is written as '/'."""
    return "net.ipv%d.conf.%s.%s" % (family, dev.replace(".", "/"), SYSCTL)


def _path(family, dev):
    return "/proc/sys/net/ipv%d/conf/%s/%s" % (family, dev, SYSCTL)


def read_sysctl(family, dev):
    """The interface's own value as text, or None when it has none (gone, IPv6 disabled)."""
    try:
        with open(_path(family, dev)) as f:
            return f.read().strip()
    except OSError:
        return None


def effective_sysctl(family, dev):
    """What the kernel applies: for IPv4 the larger of 'all' and the interface's value."""
    own = read_sysctl(family, dev)
    if own is None or family == 6:
        return own
    return str(max(int(own), int(read_sysctl(4, "all") or 0)))


def write_sysctl(family, dev, value):
    try:
        procsys.write_value(_path(family, dev), value)
    except OSError as e:
        raise KernelError("cannot set %s to %s: %s" % (sysctl_key(family, dev), value, e)) from None
