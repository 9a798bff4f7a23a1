# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Remove what the agent and the drains put in the kernel and no module's state=absent removes.

The agent (agent/routekeeper.py) and a drain (planes/drain_routes.py) share three rules per
family at priority-1 .. priority+1 (held table, main without its default route, backup table)
and two tables; the peer table keeps managed neighbour entries. None has a record of its own
but the peer table's neighbours: the rules and routes are edgeft's by their priority and
protocol 237 (constants.ROUTE_PROTO), which every route and rule edgeft adds carries. Anything
else found there (another protocol) is kept and reported.
"""

from __future__ import annotations

import os
import socket

from ansible_collections.edgeft.failover.plugins.module_utils import constants, jsonrecord, netlink
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import iproute
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.host.records import PeerTableRecord
from ansible_collections.edgeft.failover.plugins.module_utils.peers import neighbour_limits

AF = {4: socket.AF_INET, 6: socket.AF_INET6}
MAIN_TABLE = 254
UNSET = (None, 0xFFFFFFFF)
RESERVED_TABLES = (0, 253, 254, 255)


class SteeringError(EdgeftError, RuntimeError):
    pass


def check_options(params) -> tuple:
    """(table, priority) as the agent's backup_routes setting names them; SteeringError names the option."""
    if os.geteuid() != 0:
        raise SteeringError("this module must run as root (rules, routes and neighbour entries need CAP_NET_ADMIN): "
                            "use become: true")
    jsonrecord.check_state_dir(params.get("state_dir"), SteeringError)
    table, priority = params.get("table"), params.get("priority")
    if isinstance(table, bool) or not isinstance(table, int) or not 1 <= table < 0xFFFFFFFF - 1 \
            or table in RESERVED_TABLES or table + 1 in RESERVED_TABLES:
        raise SteeringError("table: %r must be the agent's backup table (default %d), a table number whose next one is "
                            "its held table, neither reserved (253-255)" % (table, constants.BACKUP_TABLE))
    if isinstance(priority, bool) or not isinstance(priority, int) or not 2 <= priority <= 32764:
        raise SteeringError("priority: %r must be the agent's backup rule priority (default %d), 2..32764"
                            % (priority, constants.BACKUP_RULE_PRIORITY))
    return table, priority


def rule_text(rule) -> str:
    what = "lookup main suppress_prefixlength %d" % rule["suppress"] if rule.get("suppress") is not None \
        else "lookup %d" % rule["table"]
    return "IPv%d %d: %s proto %d" % (rule["family"], rule["priority"], what, rule["proto"])


def route_text(route) -> str:
    return "IPv%d %s table %d proto %d" % (route["family"], route["dst"], route["table"], route["proto"])


def plan(rules, routes, neighbours, recorded, table, priority) -> dict:
    """What to remove, from what the host has. Pure.

    rules: [{family, priority, table, proto, suppress (None or the prefix length)}]; routes:
    [{family, table, dst, proto}] of the two tables; neighbours: {(address, dev): {managed}};
    recorded: {(address, dev)} the peer table created. Returns {rules, routes, neighbors, kept}.
    """
    mine = {priority - 1: table + 1, priority: MAIN_TABLE, priority + 1: table}
    out = {"rules": [], "routes": [], "neighbors": [], "kept": []}
    for rule in rules:
        if mine.get(rule["priority"]) != rule["table"]:
            continue  # another priority, or another table at ours: not the agent's form
        if (rule["table"] == MAIN_TABLE) != (rule.get("suppress") is not None):
            continue
        if rule["proto"] == constants.ROUTE_PROTO:
            out["rules"].append(rule)
        else:
            out["kept"].append("rule %s: not added by edgeft (protocol %d)" % (rule_text(rule), rule["proto"]))
    for route in routes:
        if route["table"] == constants.LOCAL_TABLE:
            if route["proto"] == constants.ROUTE_PROTO:  # an address the agent kept local: ours
                out["routes"].append(route)
            continue  # the kernel's own local routes: not ours to list
        if route["table"] not in (table, table + 1):
            continue
        if route["proto"] == constants.ROUTE_PROTO:
            out["routes"].append(route)
        else:
            out["kept"].append("route %s: not added by edgeft" % route_text(route))
    # Only the entries the peer table created, and only while they are still managed ones: an
    # entry someone replaced by hand is theirs now.
    out["neighbors"] = sorted(n for n in recorded if neighbours.get(n, {}).get("managed"))
    # Routes before rules: the backup table answers for every peer address whatever lookup reaches
    # it, and with the main-table rule gone first it would be reached for connected peers too.
    # Emptied tables make the rules no-ops.
    out["rules"].sort(key=lambda r: (r["family"], r["priority"]))
    out["routes"].sort(key=lambda r: (r["family"], r["table"], r["dst"]))
    return out


def read_rules(ipr) -> list:
    out = []
    for family, af in sorted(AF.items()):
        for msg in ipr.get_rules(family=af):
            suppress = msg.get_attr("FRA_SUPPRESS_PREFIXLEN")
            out.append({"family": family, "priority": msg.get_attr("FRA_PRIORITY") or 0,
                        "table": msg.get_attr("FRA_TABLE") or msg["table"], "proto": msg.get_attr("FRA_PROTOCOL") or 0,
                        "suppress": None if suppress in UNSET else suppress})
    return out


def read_routes(ipr, tables) -> list:
    out = []
    for table in tables:
        for family, af in sorted(AF.items()):
            for msg in ipr.get_routes(family=af, table=table):
                dst = msg.get_attr("RTA_DST") or ("0.0.0.0" if family == 4 else "::")
                out.append({"family": family, "table": table, "dst": "%s/%d" % (dst, msg["dst_len"]),
                            "proto": msg["proto"], "msg": msg})
    return out


def _delete_rule(ipr, rule):
    kwargs = {"family": AF[rule["family"]], "priority": rule["priority"], "table": rule["table"], "protocol": rule["proto"]}
    if rule.get("suppress") is not None:
        kwargs["suppress_prefixlength"] = rule["suppress"]
    ipr.rule("del", **kwargs)


def _delete_route(ipr, route):
    msg = route["msg"]
    kwargs = {"family": AF[route["family"]], "table": route["table"], "dst": route["dst"], "proto": route["proto"]}
    for attr, key in (("RTA_OIF", "oif"), ("RTA_GATEWAY", "gateway"), ("RTA_PRIORITY", "priority")):
        if msg.get_attr(attr) is not None:
            kwargs[key] = msg.get_attr(attr)
    if route["family"] == 4:
        kwargs["scope"] = msg["scope"]  # the kernel matches an IPv4 route's scope on delete
    if route["table"] == constants.LOCAL_TABLE:
        kwargs["type"] = msg["type"]
    ipr.route("del", **kwargs)


def _view(found) -> list:
    return [route_text(r) for r in found["routes"]] + [rule_text(r) for r in found["rules"]] \
        + ["neighbour %s dev %s (managed)" % n for n in found["neighbors"]]


def limits_to_restore(state_dir, proc_sys=neighbour_limits.PROC_SYS) -> dict:
    """{sysctl: {before, after}} putting back the neighbour table thresholds peer_table found before
    raising them (peers/neighbour_limits.py); {} where none were raised or this namespace cannot
    see them."""
    original = neighbour_limits.LimitsRecord(state_dir).original
    current = {}
    for family, values in neighbour_limits.read_limits(proc_sys).items():
        for level, value in enumerate(values, start=1):
            current[neighbour_limits.sysctl_name(family, level)] = value
    return {name: {"before": current[name], "after": value} for name, value in sorted(original.items())
            if name in current and current[name] != value}


def restore_limits(changes, proc_sys=neighbour_limits.PROC_SYS) -> None:
    """Lower gc_thresh2 before gc_thresh3, so that 2 <= 3 holds throughout."""
    for name in sorted(changes):
        neighbour_limits.procsys.write_value(os.path.join(proc_sys, *name.split(".")), changes[name]["after"])


def steering_cleanup(params, check_mode=False):
    """The steering_cleanup module: (result, warnings). Validates first, then removes."""
    table, priority = check_options(params)
    recorded = PeerTableRecord(params["state_dir"], params["pin_root"]).neighbors if params.get("pin_root") else set()
    with netlink.open_ipr(SteeringError) as ipr:
        found = plan(read_rules(ipr), read_routes(ipr, (table, table + 1, constants.LOCAL_TABLE)), iproute.neighbours() if recorded else {},
                     recorded, table, priority)
        limits = limits_to_restore(params["state_dir"])
        step = None
        if not check_mode:
            try:
                for route in found["routes"]:
                    step = "deleting route %s" % route_text(route)
                    _delete_route(ipr, route)
                for rule in found["rules"]:
                    step = "deleting rule %s" % rule_text(rule)
                    _delete_rule(ipr, rule)
                for address, dev in found["neighbors"]:
                    step = "deleting neighbour %s dev %s" % (address, dev)
                    iproute.neigh_delete(address, dev)
                step = "restoring the neighbour table limits"
                restore_limits(limits)
            except (OSError, EdgeftError) as e:
                # Nothing to roll back to: each deletion only removes what steers nothing any more.
                raise SteeringError("%s failed: %s; run the task again to finish" % (step, e)) from None
    removed = _view(found) + ["%s = %d (was %d)" % (name, c["after"], c["before"]) for name, c in limits.items()]
    result = {
        "changed": bool(removed),
        "neighbor_limits": limits,
        "rules": [rule_text(r) for r in found["rules"]],
        "routes": [route_text(r) for r in found["routes"]],
        "neighbors": ["%s dev %s" % n for n in found["neighbors"]],
        "kept": found["kept"],
        "diff": {"before": {"steering": removed}, "after": {"steering": []}},
    }
    return result, found["kept"]
