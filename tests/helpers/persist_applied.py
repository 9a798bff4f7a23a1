"""Check that the kernel state a network configuration tool set up is exactly what the plan says.

Used on the state that real systemd-networkd (from the networkd and netplan files) and real
ifup (from the ifupdown files) produced in a sandbox (persist_sandbox.py). Every address, MTU, route
(table, gateway, metric, scope, source, onlink, rto_min, next hops with weights) and rule of the
given interfaces must be there, as `ip -j` reports it.
"""

from __future__ import annotations

import ipaddress


def _dst(text: str, family: int) -> str:
    """A route's destination as `ip -j` prints it (default, host routes without /32 or /128)."""
    net = ipaddress.ip_network(text)
    if net.prefixlen == 0:
        return "default"
    if net.prefixlen == net.max_prefixlen:
        return str(net.network_address)
    return str(net)


def _table(route_or_rule) -> str:
    return str(route_or_rule["table"]) if route_or_rule.get("table") else "main"


def _find_route(kernel_routes, route, family, dev):
    dst, table = _dst(route["dst"], family), _table(route)
    found = [r for r in kernel_routes if r.get("dst") == dst and r.get("table", "main") == table and r.get("type") == "unicast"
             and (route["nexthops"] or r.get("dev") == dev)
             and (route["metric"] is None or r.get("metric", 0) == route["metric"])]
    assert len(found) == 1, "route %s table %s dev %s: expected once, kernel has %s" % (route["dst"], table, dev, found)
    return found[0]


def _rto_min(kernel_route):
    for metric in kernel_route.get("metrics", []):
        if isinstance(metric, dict) and "rto_min" in metric:
            return metric["rto_min"]
    return None


def assert_route(kernel_routes, route, dev, rto_min=True):
    family = route["family"]
    got = _find_route(kernel_routes, route, family, dev)
    where = "route %s (table %s) on %s" % (route["dst"], _table(route), dev)
    assert got.get("gateway") == route["gateway"], "%s: gateway %s, plan %s" % (where, got.get("gateway"), route["gateway"])
    assert got.get("prefsrc") == route["src"], "%s: src %s, plan %s" % (where, got.get("prefsrc"), route["src"])
    assert ("onlink" in got.get("flags", [])) == route["onlink"], "%s: flags %s, plan onlink %s" % (where, got.get("flags"), route["onlink"])
    if family == 4 and route["scope"]:
        assert got.get("scope") == route["scope"], "%s: scope %s, plan %s" % (where, got.get("scope"), route["scope"])
    if rto_min:
        # ip prints rto_min in milliseconds when it is a whole number of them.
        assert _rto_min(got) == route["rto_min"], "%s: rto_min %s, plan %s" % (where, _rto_min(got), route["rto_min"])
    want_hops = [(nh["gateway"], nh["dev"], nh["weight"] or 1, nh["onlink"]) for nh in route["nexthops"]]
    got_hops = [(nh.get("gateway"), nh.get("dev"), nh.get("weight", 1), "onlink" in nh.get("flags", [])) for nh in got.get("nexthops", [])]
    assert got_hops == want_hops, "%s: next hops %s, plan %s" % (where, got_hops, want_hops)


def assert_rule(kernel_rules, rule):
    # ip prints a full-length source without its length, and "all" for no source.
    src, srclen = "all", None
    if rule["from"]:
        net = ipaddress.ip_network(rule["from"])
        src = str(net.network_address)
        srclen = None if net.prefixlen == net.max_prefixlen else net.prefixlen
    found = [r for r in kernel_rules if r.get("priority") == rule["priority"] and r.get("src") == src
             and r.get("srclen") == srclen and _table(r) == str(rule["table"])]
    assert len(found) == 1, "rule %s: expected once, kernel has %s" % (rule, kernel_rules)


def assert_applied(plan: dict, state: dict, interfaces, rto_min=True, multipath=True):
    """Everything the plan holds for `interfaces` is in `state` (sandbox.state()).

    rto_min=False / multipath=False leave out what the renderer cannot express (its gaps).
    """
    links = {link["ifname"]: link for link in state["addr"]}
    by_name = {iface["name"]: iface for iface in plan["interfaces"]}
    for name in interfaces:
        iface = by_name[name]
        assert name in links, "%s does not exist in the sandbox" % name
        link = links[name]
        if iface["mtu"]:
            assert link["mtu"] == iface["mtu"], "%s: mtu %s, plan %s" % (name, link["mtu"], iface["mtu"])
        have = {"%s/%s" % (a["local"], a["prefixlen"]) for a in link.get("addr_info", [])}
        for addr in iface["addresses"]:
            assert addr["address"] in have, "%s: address %s missing (has %s)" % (name, addr["address"], sorted(have))
        for route in iface["routes"]:
            if route["nexthops"] and not multipath:
                continue
            assert_route(state["route%d" % route["family"]], route, name, rto_min=rto_min)
        for rule in iface["rules"]:
            assert_rule(state["rule%d" % rule["family"]], rule)
