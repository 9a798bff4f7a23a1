# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate a host's plane declaration and turn it into the network plan.

The plan is the one description of the host's multihomed networking that every
consumer reads (the live apply here, the persistence renderers): its shape is
documented in docs/multihome.md. Pure functions: the host's links are passed in
as data, so everything here is tested without a kernel.
"""

from __future__ import annotations

import ipaddress

from ansible_collections.edgeft.failover.plugins.module_utils import constants
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError

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
MTU_MIN, MTU_MAX, MTU_MIN_IPV6 = 68, 65535, 1280
IFNAMSIZ = 15

# Per plane NIC: (family, sysctl, value). Why each: docs/multihome.md.
NIC_SYSCTLS = (
    ("ipv4", "rp_filter", "2"),
    ("ipv4", "arp_ignore", "1"),
    ("ipv4", "arp_announce", "2"),
    ("ipv4", "ignore_routes_with_linkdown", "1"),
    ("ipv6", "ignore_routes_with_linkdown", "1"),
)
FAMILIES = (("ipv4", 4, "gateway4"), ("ipv6", 6, "gateway6"))
# Routed planes: the per-plane failover address of each family (docs/multihome.md).
FAILOVER_KEYS = (("ipv4", 4, "failover4"), ("ipv6", 6, "failover6"))


class OptionError(EdgeftError, ValueError):
    """Bad input; the message starts with the option path (planes[1].ipv4: ...)."""


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


# ------------------------------------------------------------- validation
def _int(value, where, low, high):
    if isinstance(value, bool):
        raise OptionError("%s: %r is not an integer" % (where, value))
    try:
        number = int(str(value).strip(), 0) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise OptionError("%s: %r is not an integer" % (where, value)) from None
    if not low <= number <= high:
        raise OptionError("%s: %d is out of range (%d..%d)" % (where, number, low, high))
    return number


def as_bool(value, where, default=False):
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("yes", "true", "on", "1"):
        return True
    if text in ("no", "false", "off", "0"):
        return False
    raise OptionError("%s: %r is not a boolean" % (where, value))


def check_ifname(name, where):
    if not name or not isinstance(name, str):
        raise OptionError("%s: an interface name is required" % where)
    if len(name) > IFNAMSIZ or "/" in name or name in (".", "..") or any(c.isspace() or c == ":" for c in name):
        raise OptionError("%s: %r is not a valid interface name (at most %d characters, no '/', ':' or spaces)"
                          % (where, name, IFNAMSIZ))
    return name


def host_interface(value, where, version):
    """ip_interface of '198.18.1.11/16', checked usable as a host's own address."""
    text = str(value).strip()
    if "/" not in text:
        raise OptionError("%s: %r needs a prefix length (e.g. %s)" % (where, value,
                          "198.18.1.11/16" if version == 4 else "fd0e:d6ef:7a00:1::b/64"))
    try:
        iface = ipaddress.ip_interface(text)
    except ValueError:
        raise OptionError("%s: %r is not an address with prefix length" % (where, value)) from None
    ip, net = iface.ip, iface.network
    if ip.version != version:
        raise OptionError("%s: %s is not an IPv%d address" % (where, iface, version))
    if net.prefixlen == 0:
        raise OptionError("%s: %s: a /0 prefix is not a subnet" % (where, iface))
    if ip.is_unspecified or ip.is_loopback or ip.is_multicast:
        raise OptionError("%s: %s is not a unicast host address" % (where, ip))
    if version == 6 and (ip.is_link_local or ip.ipv4_mapped is not None):
        raise OptionError("%s: %s is %s; give a global or ULA address" % (
            where, ip, "link-local (the kernel assigns those)" if ip.is_link_local else "IPv4-mapped"))
    if net.prefixlen < ip.max_prefixlen - 1 and ip == net.network_address:
        raise OptionError("%s: %s is the network address of %s, not a host address" % (where, ip, net))
    if version == 4 and net.prefixlen < 31 and ip == net.broadcast_address:
        raise OptionError("%s: %s is the broadcast address of %s, not a host address" % (where, ip, net))
    return iface


def gateway_address(value, where, iface, addr_where):
    """The first hop of a routed plane: inside the plane's prefix (IPv6: or link-local)."""
    if iface is None:
        raise OptionError("%s: a gateway needs the plane's address of that family (%s)" % (where, addr_where))
    text = str(value).strip()
    try:
        gw = ipaddress.ip_address(text)
    except ValueError:
        raise OptionError("%s: %r is not an IP address (no prefix length)" % (where, value)) from None
    if gw.version != iface.version:
        raise OptionError("%s: %s is not an IPv%d address" % (where, gw, iface.version))
    if gw == iface.ip:
        raise OptionError("%s: %s is this host's own address (%s)" % (where, gw, addr_where))
    if gw.is_multicast or gw.is_unspecified or gw.is_loopback:
        raise OptionError("%s: %s is not a unicast address" % (where, gw))
    if gw.version == 6 and gw.is_link_local:
        return gw
    net = iface.network
    if gw not in net:
        raise OptionError("%s: %s is outside the plane's prefix %s (%s): a first hop must be on-link"
                          % (where, gw, net, addr_where))
    if net.prefixlen < gw.max_prefixlen - 1:
        if gw == net.network_address or gw.version == 4 and gw == net.broadcast_address:
            raise OptionError("%s: %s is the network or broadcast address of %s" % (where, gw, net))
    return gw


def failover_address(value, where, plane_iface, addr_where):
    """A routed plane's failover address: a plain unicast address of the plane's family."""
    text = str(value).strip()
    version = 4 if where.endswith("4") else 6
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        hint = " (give it without a prefix length)" if "/" in text else ""
        raise OptionError("%s: %r is not an IP address%s" % (where, value, hint)) from None
    if ip.version != version:
        raise OptionError("%s: %s is not an IPv%d address" % (where, ip, version))
    if ip.is_unspecified or ip.is_loopback or ip.is_multicast or version == 6 and (
            ip.is_link_local or ip.ipv4_mapped is not None):
        raise OptionError("%s: %s is not a global unicast address" % (where, ip))
    if plane_iface is None:
        raise OptionError("%s: a failover address needs the plane's own address of that family (%s): its source "
                          "rule looks up the plane's table" % (where, addr_where))
    return ip


def normalize_planes(planes, links=None, option="planes") -> list:
    """Validate the declaration; [{name, interface, index, where, ipv4, ipv6, gateway4, gateway6, mtu, accept_ra,
    failover4, failover6}].

    links ({ifname: {mtu, min_mtu, max_mtu, ...}} from host.Host.links) checks that each
    NIC exists and the MTU fits it; None skips the host checks.
    """
    if not isinstance(planes, list) or not planes:
        raise OptionError("%s: at least one plane is required (a list of dicts with name, interface, ipv4/ipv6)" % option)
    out, names, nics = [], {}, {}
    for index, plane in enumerate(planes):
        where = "%s[%d]" % (option, index)
        if not isinstance(plane, dict):
            raise OptionError("%s: expected a dict with name, interface and ipv4/ipv6, got %r" % (where, plane))
        name = plane.get("name")
        if name in (None, ""):
            raise OptionError("%s.name: a plane name is required" % where)
        name = str(name)
        if name in names:
            raise OptionError("%s.name: plane %r is already declared at %s" % (where, name, names[name]))
        nic = check_ifname(plane.get("interface"), where + ".interface")
        if nic in nics:
            raise OptionError("%s.interface: %r already carries plane %r (%s)" % (where, nic, nics[nic][0], nics[nic][1]))
        names[name], nics[nic] = where, (name, where)
        entry = {"name": name, "interface": nic, "index": index, "where": where}
        for key, version, gw_key in FAMILIES:
            value = plane.get(key)
            entry[key] = None if value in (None, "") else host_interface(value, "%s.%s" % (where, key), version)
            gw = plane.get(gw_key)
            entry[gw_key] = None if gw in (None, "") else gateway_address(
                gw, "%s.%s" % (where, gw_key), entry[key], "%s.%s" % (where, key))
        if entry["ipv4"] is None and entry["ipv6"] is None:
            raise OptionError("%s: plane %r declares no address: give ipv4, ipv6 or both" % (where, name))
        for key, _version, failover_key in FAILOVER_KEYS:
            value = plane.get(failover_key)
            entry[failover_key] = None if value in (None, "") else failover_address(
                value, "%s.%s" % (where, failover_key), entry[key], "%s.%s" % (where, key))
        mtu = plane.get("mtu")
        entry["mtu"] = None if mtu in (None, "") else _int(mtu, where + ".mtu", MTU_MIN, MTU_MAX)
        if entry["mtu"] is not None and entry["ipv6"] is not None and entry["mtu"] < MTU_MIN_IPV6:
            raise OptionError("%s.mtu: %d is below %d, the IPv6 minimum (the kernel disables IPv6 on the NIC), and "
                              "the plane declares ipv6" % (where, entry["mtu"], MTU_MIN_IPV6))
        entry["accept_ra"] = as_bool(plane.get("accept_ra"), where + ".accept_ra")
        if links is not None:
            _check_on_host(entry, links)
        out.append(entry)
    _check_overlaps(out)
    _check_failover(out)
    return out


def _check_on_host(entry, links):
    where, nic = entry["where"], entry["interface"]
    link = links.get(nic)
    if link is None:
        known = ", ".join(sorted(links)) or "none"
        raise OptionError("%s.interface: no interface %r on this host (it has: %s)" % (where, nic, known))
    mtu = entry["mtu"]
    if mtu is not None:
        low, high = link.get("min_mtu"), link.get("max_mtu")
        if low and mtu < low or high and mtu > high:
            raise OptionError("%s.mtu: %d is outside what %s supports (%s..%s)" % (where, mtu, nic, low or "?", high or "?"))


def _check_overlaps(planes):
    for i, second in enumerate(planes):
        for first in planes[:i]:
            for key, _version, _gw in FAMILIES:
                a, b = first[key], second[key]
                if a is not None and b is not None and a.network.overlaps(b.network):
                    raise OptionError("%s.%s: %s overlaps %s.%s %s; planes must use disjoint subnets"
                                      % (second["where"], key, b.network, first["where"], key, a.network))


def _check_failover(planes):
    """Failover addresses stay out of every native subnet: inside one, the subnet's source rule,
    connected route and neighbours would claim it. Each is unique on the host."""
    seen = {}
    for plane in planes:
        for key, _version, failover_key in FAILOVER_KEYS:
            ip = plane[failover_key]
            if ip is None:
                continue
            where = "%s.%s" % (plane["where"], failover_key)
            for other in planes:
                native = other[key]
                if native is not None and ip in native.network:
                    what = "this host's own address" if ip == native.ip else "inside the native subnet %s" % native.network
                    raise OptionError("%s: %s is %s (%s.%s); give an address outside every plane's native subnets, "
                                      "from the plane's failover prefix" % (where, ip, what, other["where"], key))
            if ip in seen:
                raise OptionError("%s: %s is also %s; every plane needs its own failover address" % (where, ip, seen[ip]))
            seen[ip] = where


def failover_cidr(ip) -> str:
    """A failover address as installed: a host route (/32, /128), never a connected prefix."""
    return "%s/%d" % (ip, ip.max_prefixlen)


def check_numbers(table_base, priority_base, count):
    """(table_base, priority_base) as ints, with every plane's table and rule priority clear of others'."""
    table_base = _int(DEFAULT_TABLE_BASE if table_base is None else table_base, "table_base", 1, MAX_TABLE)
    priority_base = _int(DEFAULT_PRIORITY_BASE if priority_base is None else priority_base, "rule_priority_base", 1, PRIORITY_LIMIT)
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
