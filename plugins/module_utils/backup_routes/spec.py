# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate and normalise the backup_routes declaration. Pure: no kernel access.

A declared route becomes one or more kernel routes, each a dict:

    {"family": 4, "dst": "198.18.2.11/32", "metric": 100, "dev": "fab0", "gateway": None,
     "nexthops": None, "src": None, "rto_min_ms": 50, "where": "routes[0].via[0]"}

mode metric gives one such route per via (dev and gateway set, nexthops None);
mode multipath gives one route whose nexthops are [{"dev", "gateway", "weight"}]
(dev and gateway None). A kernel route is identified by (family, dst, metric)
in the main table, as the kernel itself identifies it.
"""

from __future__ import annotations

import ipaddress

from ansible_collections.edgeft.failover.plugins.module_utils import module_options
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError

MODES = ("metric", "multipath")
METRIC_STEP = 100  # default metrics: 100, 200, 300... in via order
MULTIPATH_METRIC = 100
METRIC_MAX = 2 ** 32 - 1
WEIGHT_MAX = 256  # rtnh_hops is a byte holding weight - 1
RTO_MIN_MAX_MS = 120000  # TCP_RTO_MAX: a larger minimum is not a minimum
IFNAMSIZ = 15
ROUTE_KEYS = ("dst", "via", "mode", "weights", "metric", "src", "rto_min_ms")
VIA_KEYS = ("interface", "gateway", "metric")


class OptionError(EdgeftError, ValueError):
    """Bad input; the message starts with the option path (routes[2].via[1].gateway: ...)."""


def route_key(route) -> tuple:
    """How the kernel identifies a route of the main table: (family, dst, metric)."""
    return (route["family"], route["dst"], route["metric"])


def _int(value, where, low, high):
    return module_options.int_in_range(value, where, low, high, OptionError)


def _dst(value, where):
    text = str(value or "").strip()
    if not text:
        raise OptionError("%s: a destination prefix is required (e.g. 198.18.2.11/32)" % where)
    try:
        return ipaddress.ip_network(text, strict=True)
    except ValueError as e:
        try:
            loose = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise OptionError("%s: %r is not a CIDR prefix (e.g. 198.18.2.11/32 or fd0e:d6ef:7a00:2::b/128): %s"
                              % (where, value, e)) from None
        raise OptionError("%s: %s has host bits set; the prefix is %s (for one host use /%d)"
                          % (where, text, loose, loose.max_prefixlen)) from None


def _gateway(value, family, where):
    text = str(value).strip()
    try:
        gw = ipaddress.ip_address(text)
    except ValueError:
        raise OptionError("%s: %r is not an IP address (no prefix length)" % (where, value)) from None
    if gw.version != family:
        raise OptionError("%s: %s is IPv%d but the destination is IPv%d; a route's gateway must be of the "
                          "destination's family" % (where, gw, gw.version, family))
    if gw.is_multicast or gw.is_unspecified or gw.is_loopback:
        raise OptionError("%s: %s cannot be a next hop" % (where, gw))
    return str(gw)


def _source(value, family, where):
    text = str(value).strip()
    try:
        src = ipaddress.ip_address(text)
    except ValueError:
        raise OptionError("%s: %r is not an IP address (no prefix length)" % (where, value)) from None
    if src.version != family:
        raise OptionError("%s: %s is IPv%d but the destination is IPv%d" % (where, src, src.version, family))
    return str(src)


def _interface(value, where):
    name = str(value or "").strip()
    if not name:
        raise OptionError("%s: the interface name is required" % where)
    if len(name) > IFNAMSIZ or "/" in name or " " in name:
        raise OptionError("%s: %r is not a valid interface name (at most 15 characters, no '/' or spaces)" % (where, name))
    return name


def _unknown(entry, allowed, where):
    extra = sorted(set(entry) - set(allowed))
    if extra:
        raise OptionError("%s: unknown option %s (allowed: %s)" % (where, ", ".join(extra), ", ".join(allowed)))


def _vias(route, family, where):
    vias = route.get("via")
    if not isinstance(vias, list) or not vias:
        raise OptionError("%s.via: at least one next hop is required, e.g. [{interface: fab0}, {interface: fab1}]" % where)
    out, seen = [], {}
    for j, via in enumerate(vias):
        vwhere = "%s.via[%d]" % (where, j)
        if not isinstance(via, dict):
            raise OptionError("%s: expected a dict with interface, gateway and metric, got %r" % (vwhere, via))
        _unknown({k for k, v in via.items() if v is not None}, VIA_KEYS, vwhere)
        dev = _interface(via.get("interface"), vwhere + ".interface")
        gateway = None if via.get("gateway") in (None, "") else _gateway(via["gateway"], family, vwhere + ".gateway")
        hop = (dev, gateway)
        if hop in seen:
            raise OptionError("%s: %s is already a next hop at %s" % (vwhere, _hop_text(dev, gateway), seen[hop]))
        seen[hop] = vwhere
        metric = None if via.get("metric") is None else _int(via["metric"], vwhere + ".metric", 1, METRIC_MAX)
        out.append({"dev": dev, "gateway": gateway, "metric": metric, "where": vwhere})
    return out


def _hop_text(dev, gateway):
    return "dev %s" % dev if gateway is None else "via %s dev %s" % (gateway, dev)


def _metric_routes(base, vias, where):
    """One route per via; metrics increase in via order (the first via is preferred)."""
    out, previous = [], None
    for j, via in enumerate(vias):
        metric = via["metric"] if via["metric"] is not None else METRIC_STEP * (j + 1)
        if previous is not None and metric <= previous[0]:
            what = "collides with" if metric == previous[0] else "is lower than"
            raise OptionError("%s.metric: %d %s the metric of %s (%d); the next hops are tried in via order, so "
                              "each metric must be higher than the one before (give explicit increasing metrics)"
                              % (via["where"], metric, what, previous[1], previous[0]))
        previous = (metric, via["where"])
        out.append(dict(base, metric=metric, dev=via["dev"], gateway=via["gateway"], nexthops=None, where=via["where"]))
    return out


def _multipath_route(base, route, vias, where):
    if len(vias) < 2:
        raise OptionError("%s.via: mode multipath needs at least two next hops" % where)
    for via in vias:
        if via["metric"] is not None:
            raise OptionError("%s.metric: per-via metrics apply to mode metric only; a multipath route has one "
                              "metric (%s.metric)" % (via["where"], where))
        if base["family"] == 6 and via["gateway"] is None:
            raise OptionError("%s.gateway: an IPv6 multipath next hop needs a gateway (the kernel forms IPv6 "
                              "multipath routes only from gateway routes)" % via["where"])
    weights = route.get("weights")
    if weights is None:
        weights = [1] * len(vias)
    if not isinstance(weights, list) or len(weights) != len(vias):
        raise OptionError("%s.weights: give one weight per via (%d), got %r" % (where, len(vias), weights))
    weights = [_int(w, "%s.weights[%d]" % (where, k), 1, WEIGHT_MAX) for k, w in enumerate(weights)]
    metric = MULTIPATH_METRIC if route.get("metric") is None else _int(route["metric"], where + ".metric", 1, METRIC_MAX)
    nexthops = [{"dev": v["dev"], "gateway": v["gateway"], "weight": w} for v, w in zip(vias, weights)]
    return [dict(base, metric=metric, dev=None, gateway=None, nexthops=nexthops, where=where)]


def normalize_route(route, where):
    """One declared route -> its kernel routes (see the module docstring)."""
    if not isinstance(route, dict):
        raise OptionError("%s: expected a dict with dst and via, got %r" % (where, route))
    _unknown({k for k, v in route.items() if v is not None}, ROUTE_KEYS, where)
    net = _dst(route.get("dst"), where + ".dst")
    mode = route.get("mode") or "metric"
    if mode not in MODES:
        raise OptionError("%s.mode: %r is not one of %s" % (where, mode, ", ".join(MODES)))
    rto = route.get("rto_min_ms")
    rto = None if rto is None else _int(rto, where + ".rto_min_ms", 1, RTO_MIN_MAX_MS)
    src = None if route.get("src") in (None, "") else _source(route["src"], net.version, where + ".src")
    vias = _vias(route, net.version, where)
    base = {"family": net.version, "dst": str(net), "src": src, "rto_min_ms": rto}
    if mode == "metric":
        if route.get("weights") is not None:
            raise OptionError("%s.weights: weights apply to mode multipath only (this route has mode metric)" % where)
        if route.get("metric") is not None:
            raise OptionError("%s.metric: with mode metric each via has its own metric (%s.via[N].metric)" % (where, where))
        return _metric_routes(base, vias, where)
    return _multipath_route(base, route, vias, where)


def normalize_routes(routes, option="routes"):
    """The declared routes -> kernel routes; every error names its option.

    Rejects a destination declared twice (also written differently, e.g.
    198.18.2.11 and 198.18.2.11/32), so each destination has one owner.
    """
    if routes is None:
        routes = []
    if not isinstance(routes, list):
        raise OptionError("%s: expected a list of routes" % option)
    out, dsts = [], {}
    for i, route in enumerate(routes):
        where = "%s[%d]" % (option, i)
        expanded = normalize_route(route, where)
        dst = (expanded[0]["family"], expanded[0]["dst"])
        if dst in dsts:
            raise OptionError("%s.dst: %s is already declared at %s; list all next hops of a destination in one "
                              "route's via" % (where, dst[1], dsts[dst]))
        dsts[dst] = where + ".dst"
        out.extend(expanded)
    return out


def normalize_destinations(routes, option="routes"):
    """For state=absent: only each route's dst matters. Returns {(family, dst)}."""
    if routes is None:
        routes = []
    if not isinstance(routes, list):
        raise OptionError("%s: expected a list of routes" % option)
    out = set()
    for i, route in enumerate(routes):
        if not isinstance(route, dict):
            raise OptionError("%s[%d]: expected a dict with dst, got %r" % (option, i, route))
        net = _dst(route.get("dst"), "%s[%d].dst" % (option, i))
        out.add((net.version, str(net)))
    return out


def route_text(route) -> str:
    """One line in `ip route` style, for diffs and results."""
    parts = [route["dst"]]
    if route.get("nexthops"):
        for hop in route["nexthops"]:
            parts.append("nexthop " + _hop_text(hop["dev"], hop["gateway"]) + " weight %d" % hop["weight"])
    else:
        parts.append(_hop_text(route["dev"], route["gateway"]))
    if route.get("src"):
        parts.append("src %s" % route["src"])
    parts.append("metric %d" % route["metric"])
    if route.get("rto_min_ms"):
        parts.append("rto_min %dms" % route["rto_min_ms"])
    return " ".join(parts)


def devices(route) -> list:
    """The interfaces a route sends through."""
    if route.get("nexthops"):
        return [h["dev"] for h in route["nexthops"]]
    return [route["dev"]]


def stored(route) -> dict:
    """The route without its option path, as the record keeps it."""
    return {k: v for k, v in route.items() if k != "where"}
