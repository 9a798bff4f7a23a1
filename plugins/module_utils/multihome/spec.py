# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate a host's plane declaration and turn it into the network plan.

The plan is the one description of the host's multihomed networking that every
consumer reads (the live apply here, the persistence renderers): its shape is
documented in docs/multihome.md. Pure functions: the host's links are passed in
as data, so everything here is tested without a kernel.
"""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils import constants
from ansible_collections.edgeft.failover.plugins.module_utils.host import planes as model
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import (
    FAILOVER_KEYS,
    FAMILIES,
    OptionError,
    int_option,
)

PROTO = constants.ROUTE_PROTO
DEFAULT_TABLE_BASE = 60901
DEFAULT_PRIORITY_BASE = 32700
# Kept clear of: the kernel's reserved tables, the agent's backup/held tables
# and its rules (docs/agent.md), and the main/default rules.
RESERVED_TABLES = {0: "unspec", 253: "default", 254: "main", 255: "local", constants.BACKUP_TABLE: "the agent's backup routes",
                   constants.HELD_TABLE: "the agent's held routes"}
# The agent's rules (held table, main without default, backup table) sit at 32689-32691: the held
# table must be consulted before the source rules, or a plane's traffic returns to it before its
# failback. Source rules therefore live between them and the main table's rule at 32766.
PRIORITY_FIRST = 32692
PRIORITY_LIMIT = 32765
MAX_TABLE = 0xFFFFFFFF

# Per plane NIC: (family, sysctl, value). Why each: docs/multihome.md.
NIC_SYSCTLS = (
    ("ipv4", "rp_filter", "2"),
    ("ipv4", "arp_ignore", "1"),
    ("ipv4", "arp_announce", "2"),
    ("ipv4", "ignore_routes_with_linkdown", "1"),
    ("ipv6", "ignore_routes_with_linkdown", "1"),
)


def sysctl_key(family, ifname, name) -> str:
    """net.ipv4.conf.fab0.rp_filter; a dot in an interface name is written '/' (sysctl.d(5))."""
    return "net.%s.conf.%s.%s" % (family, ifname.replace(".", "/"), name)


def sysctl_path(key) -> str:
    """/proc/sys path of a dotted sysctl key ('/' inside a component stands for '.')."""
    return "/proc/sys/" + "/".join(part.replace("/", ".") for part in key.split("."))


def nic_sysctls(ifname, accept_ra=False) -> dict:
    out = {sysctl_key(fam, ifname, name): value for fam, name, value in NIC_SYSCTLS}
    out[sysctl_key("ipv6", ifname, "accept_ra")] = "1" if accept_ra else "0"
    return out


def normalize_planes(planes, links=None, option="planes") -> list:
    """The plane model's validation (host/planes.py), where every plane must give an address."""
    return model.normalize_planes(planes, links, option, require_address=True)


def failover_cidr(ip) -> str:
    """A failover address as installed: a host route (/32, /128), never a connected prefix."""
    return "%s/%d" % (ip, ip.max_prefixlen)


def check_numbers(table_base, priority_base, count):
    """(table_base, priority_base) as ints, with every plane's table and rule priority clear of others'."""
    table_base = int_option(DEFAULT_TABLE_BASE if table_base is None else table_base, "table_base", 1, MAX_TABLE)
    priority_base = int_option(DEFAULT_PRIORITY_BASE if priority_base is None else priority_base, "rule_priority_base", 1, PRIORITY_LIMIT)
    last_table = table_base + max(count, 1) - 1
    if last_table > MAX_TABLE:
        raise OptionError("table_base: %d planes need tables %d..%d, past the largest table id %d"
                          % (count, table_base, last_table, MAX_TABLE))
    for table, owner in sorted(RESERVED_TABLES.items()):
        if table_base <= table <= last_table:
            raise OptionError("table_base: the plane tables %d..%d would include table %d (%s); pick another base"
                              % (table_base, last_table, table, owner))
    last_priority = priority_base + max(count, 1) - 1
    if priority_base < PRIORITY_FIRST or last_priority > PRIORITY_LIMIT:
        raise OptionError("rule_priority_base: %d planes need rule priorities %d..%d; they must lie within %d..%d "
                          "(after the agent's rules at 32689-32691, before main at 32766)"
                          % (count, priority_base, last_priority, PRIORITY_FIRST, PRIORITY_LIMIT))
    return table_base, priority_base


# ------------------------------------------------------------------- plan
def plane_routes(plane, table) -> list:
    """The per-plane table: connected prefix(es) on-link, default route via each gateway."""
    routes = []
    for key, _version, _gw in FAMILIES:
        if plane[key] is not None:
            routes.append({"dst": str(plane[key].network), "table": table, "scope": "link"})
    for _key, version, gw_key in FAMILIES:
        if plane[gw_key] is not None:
            routes.append({"dst": "0.0.0.0/0" if version == 4 else "::/0", "gateway": str(plane[gw_key]), "table": table})
    return routes


def plane_rules(plane, table, priority) -> list:
    """A source rule per native address, then per failover address: traffic from either uses the plane."""
    rules = []
    for key, version, _gw in FAMILIES:
        if plane[key] is not None:
            ip = plane[key].ip
            rules.append({"family": version, "from": "%s/%d" % (ip, ip.max_prefixlen), "table": table, "priority": priority})
    for _key, version, failover_key in FAILOVER_KEYS:
        if plane.get(failover_key) is not None:
            rules.append({"family": version, "from": failover_cidr(plane[failover_key]), "table": table,
                          "priority": priority})
    return rules


def failover_addresses(planes) -> dict:
    """{nic: [cidr]} of the failover addresses to install. Kept out of the plan's addresses: the
    persistence formats cannot say 'nodad, never a source address', so they are live only."""
    out = {}
    for plane in planes:
        cidrs = [failover_cidr(plane[k]) for _f, _v, k in FAILOVER_KEYS if plane.get(k) is not None]
        if cidrs:
            out[plane["interface"]] = cidrs
    return out


def build_plan(planes, table_base=DEFAULT_TABLE_BASE, priority_base=DEFAULT_PRIORITY_BASE, sysctls=True) -> dict:
    """The network plan (docs/multihome.md) of normalised planes."""
    interfaces, all_sysctls = [], {}
    for plane in planes:
        table, priority = table_base + plane["index"], priority_base + plane["index"]
        interfaces.append({
            "name": plane["interface"],
            "kind": "ethernet",
            "mtu": plane["mtu"],
            "addresses": [str(plane[key]) for key, _v, _g in FAMILIES if plane[key] is not None],
            "accept_ra": plane["accept_ra"],
            "routes": plane_routes(plane, table),
            "rules": plane_rules(plane, table, priority),
            "bond": None,
            "master": None,
        })
        if sysctls:
            all_sysctls.update(nic_sysctls(plane["interface"], plane["accept_ra"]))
    return {"interfaces": interfaces, "sysctls": all_sysctls}


def empty_plan() -> dict:
    return {"interfaces": [], "sysctls": {}}
