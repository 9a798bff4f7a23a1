# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The network plan (docs/persistence.md): checked and normalised before anything is rendered.

normalize_plan() returns the plan with every key present (None where the plan leaves a
value to the kernel), address families made explicit and bonds listing their ports, so
the templates need no defaults. Every error names the plan path at fault, for example
``plan.interfaces[1].routes[2].gateway``.

Values end up in configuration files and, for ifupdown, in shell command lines: names
must be plain interface names and addresses must parse, so nothing else can get through.
"""

from __future__ import annotations

import ipaddress
import re

from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError

KINDS = ("ethernet", "bond", "bond-port")
BOND_MODES = ("balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb", "balance-alb")
ARP_VALIDATE = ("none", "active", "backup", "all", "filter", "filter_active", "filter_backup")
ARP_ALL_TARGETS = ("any", "all")
LACP_RATES = ("slow", "fast")
XMIT_HASH_POLICIES = ("layer2", "layer2+3", "layer3+4", "encap2+3", "encap3+4", "vlan+srcmac")
ROUTE_SCOPES = ("global", "site", "link", "host")
# Linux interface names: at most 15 bytes; kept to characters that are safe in file names and shell words.
IFNAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$")
SYSCTL_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")
SYSCTL_VALUE = re.compile(r"^[^\n\r]*$")
UINT32_MAX = 4294967295

INTERFACE_KEYS = ("name", "kind", "mtu", "addresses", "accept_ra", "routes", "rules", "bond", "master")
ROUTE_KEYS = ("dst", "gateway", "table", "metric", "scope", "onlink", "src", "rto_min", "nexthops")
NEXTHOP_KEYS = ("gateway", "dev", "weight", "onlink")
RULE_KEYS = ("family", "from", "table", "priority")
# arp_all_targets is optional: the bond module adds it only when it is not the kernel's default (any).
BOND_KEYS = ("mode", "miimon", "arp_interval", "arp_ip_target", "arp_validate", "arp_all_targets", "lacp_rate", "primary",
             "updelay", "downdelay", "xmit_hash_policy")


class PlanError(EdgeftError, ValueError):
    """The plan is invalid; the message starts with the plan path at fault."""


def _fail(where, msg):
    raise PlanError("%s: %s" % (where, msg))


def _dict(value, where, keys):
    if not isinstance(value, dict):
        _fail(where, "must be a mapping, got %r" % (value,))
    unknown = sorted(set(value) - set(keys))
    if unknown:
        # A key no renderer knows would be dropped silently from the boot configuration.
        _fail(where, "unknown key(s) %s; the plan format knows %s" % (", ".join(map(str, unknown)), ", ".join(keys)))
    return value


def _list(value, where):
    if value is None:
        return []
    if not isinstance(value, list):
        _fail(where, "must be a list, got %r" % (value,))
    return value


def _int(value, where, low, high, allow_none=True):
    if value is None:
        if allow_none:
            return None
        _fail(where, "is required")
    if isinstance(value, bool):
        _fail(where, "must be an integer, got %r" % (value,))
    try:
        number = int(str(value), 10)
    except ValueError:
        _fail(where, "must be an integer, got %r" % (value,))
    if not low <= number <= high:
        _fail(where, "%d is out of range %d..%d" % (number, low, high))
    return number


def _bool(value, where, default):
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).lower()
    if text in ("yes", "true", "1", "on"):
        return True
    if text in ("no", "false", "0", "off"):
        return False
    _fail(where, "must be a boolean, got %r" % (value,))


def _choice(value, where, choices):
    if value is None:
        return None
    if str(value) not in choices:
        _fail(where, "%r is not one of %s" % (value, ", ".join(choices)))
    return str(value)


def _ifname(value, where):
    if not isinstance(value, str) or not IFNAME.match(value):
        _fail(where, "%r is not an interface name (1-15 of A-Z a-z 0-9 _ . -, not starting with . or -)" % (value,))
    return value


def _address(value, where, family=None):
    """A host address; returns (text, family)."""
    try:
        addr = ipaddress.ip_address(str(value))
    except ValueError:
        _fail(where, "%r is not an IP address" % (value,))
    if family is not None and addr.version != family:
        _fail(where, "%s is IPv%d, expected IPv%d like the destination" % (addr, addr.version, family))
    return str(addr), addr.version


def _prefix(value, where):
    """A network prefix with length (host bits must be zero); returns (text, family)."""
    try:
        net = ipaddress.ip_network(str(value), strict=True)
    except ValueError as exc:
        _fail(where, "%r is not an IP prefix with length (%s)" % (value, exc))
    return str(net), net.version


def _interface_address(value, where):
    """An interface address with prefix length, for example 198.18.1.11/16."""
    text = str(value)
    if "/" not in text:
        _fail(where, "%r needs a prefix length, for example 198.18.1.11/16" % (value,))
    try:
        iface = ipaddress.ip_interface(text)
    except ValueError:
        _fail(where, "%r is not an IP address with prefix length" % (value,))
    return str(iface), iface.version


def _nexthop(value, where, family):
    _dict(value, where, NEXTHOP_KEYS)
    gateway = value.get("gateway")
    out = {
        "gateway": _address(gateway, where + ".gateway", family)[0] if gateway is not None else None,
        "dev": _ifname(value["dev"], where + ".dev") if value.get("dev") is not None else None,
        "weight": _int(value.get("weight"), where + ".weight", 1, 256),
        "onlink": _bool(value.get("onlink"), where + ".onlink", False),
    }
    if out["gateway"] is None and out["dev"] is None:
        _fail(where, "a next hop needs a gateway, a dev or both")
    return out


def _route(value, where, owner):
    _dict(value, where, ROUTE_KEYS)
    if value.get("dst") is None:
        _fail(where + ".dst", "is required")
    dst, family = _prefix(value["dst"], where + ".dst")
    nexthops = [_nexthop(nh, "%s.nexthops[%d]" % (where, i), family) for i, nh in enumerate(_list(value.get("nexthops"), where + ".nexthops"))]
    gateway = value.get("gateway")
    route = {
        "dst": dst,
        "family": family,
        "gateway": _address(gateway, where + ".gateway", family)[0] if gateway is not None else None,
        "table": _int(value.get("table"), where + ".table", 1, UINT32_MAX),
        "metric": _int(value.get("metric"), where + ".metric", 0, UINT32_MAX),
        # The kernel keeps no scope for IPv6 routes: it is accepted and not rendered for them.
        "scope": _choice(value.get("scope"), where + ".scope", ROUTE_SCOPES),
        "onlink": _bool(value.get("onlink"), where + ".onlink", False),
        "src": _address(value["src"], where + ".src", family)[0] if value.get("src") is not None else None,
        "rto_min": _int(value.get("rto_min"), where + ".rto_min", 1, UINT32_MAX),
        "nexthops": nexthops,
    }
    if nexthops:
        if route["gateway"] is not None:
            _fail(where, "a multipath route has nexthops and no gateway of its own")
        if route["onlink"]:
            _fail(where + ".onlink", "set onlink per next hop of a multipath route")
        for nh in nexthops:
            if nh["dev"] is None:
                nh["dev"] = owner
    if route["onlink"] and route["gateway"] is None:
        _fail(where + ".onlink", "onlink needs a gateway")
    return route


def _rule(value, where):
    _dict(value, where, RULE_KEYS)
    family = _int(value.get("family"), where + ".family", 4, 6, allow_none=False)
    if family not in (4, 6):
        _fail(where + ".family", "must be 4 or 6, got %d" % family)
    source = None
    if value.get("from") is not None:
        source, from_family = _prefix(value["from"], where + ".from")
        if from_family != family:
            _fail(where + ".from", "%s is IPv%d but the rule's family is %d" % (source, from_family, family))
    return {
        "family": family,
        "from": source,
        "table": _int(value.get("table"), where + ".table", 1, UINT32_MAX, allow_none=False),
        "priority": _int(value.get("priority"), where + ".priority", 0, UINT32_MAX, allow_none=False),
    }


def _bond(value, where):
    _dict(value, where, BOND_KEYS)
    if value.get("mode") is None:
        _fail(where + ".mode", "is required (one of %s)" % ", ".join(BOND_MODES))
    targets = [_address(t, "%s.arp_ip_target[%d]" % (where, i), 4)[0]
               for i, t in enumerate(_list(value.get("arp_ip_target"), where + ".arp_ip_target"))]
    bond = {
        "mode": _choice(value.get("mode"), where + ".mode", BOND_MODES),
        "miimon": _int(value.get("miimon"), where + ".miimon", 0, 2 ** 31 - 1),
        "arp_interval": _int(value.get("arp_interval"), where + ".arp_interval", 0, 2 ** 31 - 1),
        "arp_ip_target": targets,
        "arp_validate": _choice(value.get("arp_validate"), where + ".arp_validate", ARP_VALIDATE),
        "arp_all_targets": _choice(value.get("arp_all_targets"), where + ".arp_all_targets", ARP_ALL_TARGETS),
        "lacp_rate": _choice(value.get("lacp_rate"), where + ".lacp_rate", LACP_RATES),
        "primary": _ifname(value["primary"], where + ".primary") if value.get("primary") is not None else None,
        "updelay": _int(value.get("updelay"), where + ".updelay", 0, 2 ** 31 - 1),
        "downdelay": _int(value.get("downdelay"), where + ".downdelay", 0, 2 ** 31 - 1),
        "xmit_hash_policy": _choice(value.get("xmit_hash_policy"), where + ".xmit_hash_policy", XMIT_HASH_POLICIES),
    }
    if bond["arp_interval"] and not targets:
        _fail(where + ".arp_ip_target", "ARP monitoring (arp_interval) needs at least one target")
    if bond["miimon"] and bond["arp_interval"]:
        _fail(where, "miimon and arp_interval exclude each other: the kernel ignores ARP monitoring when both are set")
    return bond


def _interface(value, where):
    _dict(value, where, INTERFACE_KEYS)
    name = _ifname(value.get("name"), where + ".name")
    kind = _choice(value.get("kind") or "ethernet", where + ".kind", KINDS)
    iface = {
        "name": name,
        "kind": kind,
        "mtu": _int(value.get("mtu"), where + ".mtu", 68, 65535),
        "addresses": [],
        "accept_ra": _bool(value.get("accept_ra"), where + ".accept_ra", False),
        "routes": [_route(r, "%s.routes[%d]" % (where, i), name) for i, r in enumerate(_list(value.get("routes"), where + ".routes"))],
        "rules": [_rule(r, "%s.rules[%d]" % (where, i)) for i, r in enumerate(_list(value.get("rules"), where + ".rules"))],
        "bond": None,
        "master": None,
        "ports": [],
    }
    for i, addr in enumerate(_list(value.get("addresses"), where + ".addresses")):
        text, family = _interface_address(addr, "%s.addresses[%d]" % (where, i))
        iface["addresses"].append({"address": text, "family": family})
    if kind == "bond":
        if value.get("bond") is None:
            _fail(where + ".bond", "a bond needs its bond settings (at least mode)")
        iface["bond"] = _bond(value["bond"], where + ".bond")
    elif value.get("bond") is not None:
        _fail(where + ".bond", "only an interface of kind bond has bond settings")
    if kind == "bond-port":
        iface["master"] = _ifname(value.get("master"), where + ".master")
        for key in ("addresses", "routes", "rules"):
            if iface[key]:
                _fail(where + "." + key, "a bond port carries no %s: put them on its bond %s" % (key, iface["master"]))
    elif value.get("master") is not None:
        _fail(where + ".master", "only an interface of kind bond-port has a master")
    return iface


def _sysctls(value, where):
    if value is None:
        return {}
    if not isinstance(value, dict):
        _fail(where, "must be a mapping of sysctl key to value, got %r" % (value,))
    out = {}
    for key, val in value.items():
        if not isinstance(key, str) or not SYSCTL_KEY.match(key):
            _fail("%s[%r]" % (where, key), "is not a sysctl key like net.ipv4.conf.fab0.rp_filter")
        if val is None or isinstance(val, (dict, list)) or not SYSCTL_VALUE.match(str(val)):
            _fail("%s[%r]" % (where, key), "value %r must be one line of text" % (val,))
        out[key] = str(val).lower() if isinstance(val, bool) else str(val)
    return out


def normalize_plan(plan, where="plan"):
    """Check a network plan and return it normalised (see the module docstring)."""
    if plan is None:
        plan = {}
    _dict(plan, where, ("interfaces", "sysctls"))
    interfaces = [_interface(i, "%s.interfaces[%d]" % (where, n)) for n, i in enumerate(_list(plan.get("interfaces"), where + ".interfaces"))]
    by_name = {}
    for n, iface in enumerate(interfaces):
        if iface["name"] in by_name:
            _fail("%s.interfaces[%d].name" % (where, n), "%s is declared twice (also interfaces[%d])" % (iface["name"], by_name[iface["name"]]))
        by_name[iface["name"]] = n
    for n, iface in enumerate(interfaces):
        if iface["kind"] != "bond-port":
            continue
        master = by_name.get(iface["master"])
        if master is None or interfaces[master]["kind"] != "bond":
            _fail("%s.interfaces[%d].master" % (where, n), "%s is not a bond of the plan" % iface["master"])
        interfaces[master]["ports"].append(iface["name"])
    for n, iface in enumerate(interfaces):
        for j, route in enumerate(iface["routes"]):
            for k, nexthop in enumerate(route["nexthops"]):
                other = by_name.get(nexthop["dev"])
                if other is not None and interfaces[other]["kind"] == "bond-port":
                    _fail("%s.interfaces[%d].routes[%d].nexthops[%d].dev" % (where, n, j, k),
                          "%s is a bond port; route through its bond %s" % (nexthop["dev"], interfaces[other]["master"]))
    for n, iface in enumerate(interfaces):
        primary = iface["bond"] and iface["bond"]["primary"]
        if primary and primary not in iface["ports"]:
            _fail("%s.interfaces[%d].bond.primary" % (where, n), "%s is not a port of %s (ports: %s)"
                  % (primary, iface["name"], ", ".join(iface["ports"]) or "none"))
    return {"interfaces": interfaces, "sysctls": _sysctls(plan.get("sysctls"), where + ".sysctls")}
