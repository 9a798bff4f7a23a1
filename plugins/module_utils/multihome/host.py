# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The live state multihome manages, read and written through netlink (pyroute2) and /proc/sys.

Works with pyroute2 0.7.2 (Debian 12's python3-pyroute2, what targets run) and
later. Everything runs in the caller's network namespace; /proc/sys/net too
resolves to the namespace of the thread that opens it.

Routes and rules are plain dicts, the same in the record and in the diff:
  route: {family, table, dst, gateway, dev, scope, metric, proto}
  rule:  {family, from, table, priority}
"""

from __future__ import annotations

import ipaddress
import socket

from ansible_collections.edgeft.failover.plugins.module_utils import procsys
from ansible_collections.edgeft.failover.plugins.module_utils.netlink import NetlinkError, open_ipr
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.host import nics
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.spec import PROTO, sysctl_path

AF = {4: socket.AF_INET, 6: socket.AF_INET6}
RT_SCOPE_UNIVERSE, RT_SCOPE_LINK, RT_SCOPE_HOST = 0, 253, 254
SCOPE_NAMES = {RT_SCOPE_UNIVERSE: None, RT_SCOPE_LINK: "link", RT_SCOPE_HOST: "host"}
SCOPE_NUMBERS = {None: RT_SCOPE_UNIVERSE, "link": RT_SCOPE_LINK, "host": RT_SCOPE_HOST}
RTN_UNICAST = 1
IFA_F_NODAD = 0x02
IFA_F_DEPRECATED = 0x20
INFINITY_LIFE_TIME = 0xFFFFFFFF
FR_ACT_TO_TBL = 1
FIB_RULE_INVERT = 0x2
UNSET = (None, 0xFFFFFFFF)  # how the kernel reports an unset suppress_* selector
IPV6_DEFAULT_METRIC = 1024  # what the kernel stores for an IPv6 route added without a metric


def default_metric(family) -> int:
    return IPV6_DEFAULT_METRIC if family == 6 else 0


class HostError(EdgeftError, RuntimeError):
    """A kernel call failed; the message says which and why."""


def _attr(msg, name, default=None):
    value = msg.get_attr(name)
    return default if value is None else value


def route_text(route) -> str:
    """`ip route` style: '198.18.0.0/16 dev fab0 table 60901 scope link'."""
    dst = route["dst"]
    parts = ["default" if dst in ("0.0.0.0/0", "::/0") else dst]
    if route.get("gateway"):
        parts += ["via", route["gateway"]]
    if route.get("dev"):
        parts += ["dev", route["dev"]]
    parts += ["table", str(route["table"])]
    if route.get("scope") and route["family"] == 4:
        parts += ["scope", route["scope"]]
    metric = route.get("metric")
    if metric not in (None, default_metric(route["family"])):
        parts += ["metric", str(metric)]
    if route.get("other"):
        parts.append("(%s)" % route["other"])
    return " ".join(parts)


def rule_text(rule) -> str:
    """'32700: from 198.18.1.11/32 lookup 60901' (rules of another shape carry a note)."""
    text = "%d: from %s lookup %s" % (rule["priority"], rule["from"], rule["table"])
    if rule.get("other"):
        text += " (%s)" % rule["other"]
    return text


class Host:
    """An rtnetlink socket in the current network namespace, with the reads and writes multihome needs."""

    def __init__(self):
        self.ipr = open_ipr(HostError)
        self._names = {}

    def close(self):
        self.ipr.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------ reads
    def links(self) -> dict:
        """ifname -> the link as host/nics.py reads it (ifindex, mtu, min_mtu, max_mtu, up, addresses...)."""
        self._links = nics.links(self.ipr)
        self._names = {v["ifindex"]: k for k, v in self._links.items()}
        return self._links

    def addresses(self) -> dict:
        """ifname -> [cidr], every address but IPv6 link-local ones (the kernel's own)."""
        out = {}
        for name, link in self.links().items():
            found = [a for a in link["addresses"] if not ipaddress.ip_interface(a).is_link_local]
            if found:
                out[name] = found
        return out

    def failover_ready(self) -> set:
        """{(ifname, cidr)} of IPv6 addresses installed as failover addresses: without
        duplicate address detection and deprecated (preferred lifetime 0) for good."""
        if not self._names:
            self.links()
        out = set()
        for msg in self.ipr.get_addr(family=socket.AF_INET6):
            flags = _attr(msg, "IFA_FLAGS", msg["flags"])
            cacheinfo = msg.get_attr("IFA_CACHEINFO") or {}
            if flags & IFA_F_NODAD and flags & IFA_F_DEPRECATED and cacheinfo.get("ifa_preferred") == 0 \
                    and cacheinfo.get("ifa_valid") == INFINITY_LIFE_TIME:
                name = self._names.get(msg["index"], "#%d" % msg["index"])
                out.add((name, str(ipaddress.ip_interface("%s/%d" % (msg.get_attr("IFA_ADDRESS"), msg["prefixlen"])))))
        return out

    def routes(self, tables) -> list:
        """Every route of the given tables, both families."""
        if not self._names:
            self.links()
        out = []
        for table in sorted(set(tables)):
            for family, af in sorted(AF.items()):
                for msg in self.ipr.get_routes(family=af, table=table):
                    out.append(self._route(msg, family, table))
        return out

    def _route(self, msg, family, table):
        dst = msg.get_attr("RTA_DST")
        route = {
            "family": family,
            "table": table,
            "dst": "%s/%d" % (dst or ("0.0.0.0" if family == 4 else "::"), msg["dst_len"]),
            "gateway": msg.get_attr("RTA_GATEWAY"),
            "dev": self._names.get(msg.get_attr("RTA_OIF")) if msg.get_attr("RTA_OIF") else None,
            "scope": SCOPE_NAMES.get(msg["scope"], str(msg["scope"])) if family == 4 else None,
            "metric": _attr(msg, "RTA_PRIORITY", 0),
            "proto": msg["proto"],
        }
        route["dst"] = str(ipaddress.ip_network(route["dst"], strict=False))
        notes = []
        if msg["type"] != RTN_UNICAST:
            notes.append("type %d" % msg["type"])
        if msg.get_attr("RTA_MULTIPATH"):
            notes.append("multipath")
        if msg.get_attr("RTA_PREFSRC"):
            notes.append("src %s" % msg.get_attr("RTA_PREFSRC"))
        if notes:
            route["other"] = ", ".join(notes)
        return route

    def rules(self) -> list:
        """Every rule that looks up a table, both families; rules with selectors
        beyond a source prefix carry 'other' (never ours)."""
        out = []
        for family, af in sorted(AF.items()):
            for msg in self.ipr.get_rules(family=af):
                if msg["action"] != FR_ACT_TO_TBL:
                    continue
                src = msg.get_attr("FRA_SRC")
                rule = {
                    "family": family,
                    "from": "%s/%d" % (src, msg["src_len"]) if src else "all",
                    "table": _attr(msg, "FRA_TABLE", msg["table"]),
                    "priority": _attr(msg, "FRA_PRIORITY", 0),
                    "proto": _attr(msg, "FRA_PROTOCOL", 0),
                }
                other = [name for name in ("FRA_DST", "FRA_IIFNAME", "FRA_OIFNAME", "FRA_GOTO", "FRA_L3MDEV",
                                           "FRA_UID_RANGE", "FRA_IP_PROTO", "FRA_SPORT_RANGE", "FRA_DPORT_RANGE",
                                           "FRA_TUN_ID") if msg.get_attr(name)]
                if msg.get_attr("FRA_FWMARK"):
                    other.append("FRA_FWMARK")
                if msg.get_attr("FRA_SUPPRESS_PREFIXLEN") not in UNSET:
                    other.append("FRA_SUPPRESS_PREFIXLEN")
                if msg.get_attr("FRA_SUPPRESS_IFGROUP") not in UNSET:
                    other.append("FRA_SUPPRESS_IFGROUP")
                if msg["flags"] & FIB_RULE_INVERT:
                    other.append("not")
                if msg["tos"]:
                    other.append("tos")
                if other:
                    rule["other"] = " ".join(other)
                out.append(rule)
        return out

    @staticmethod
    def sysctl(key):
        """The value of a net.* sysctl of this namespace, or None where it does not exist."""
        try:
            with open(sysctl_path(key)) as f:
                return f.read().strip()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise HostError("reading %s: %s" % (key, e.strerror or e)) from None

    # ----------------------------------------------------------- writes
    def _call(self, what, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except NetlinkError as e:
            raise HostError("%s: %s" % (what, e.args[1] if len(e.args) > 1 else e)) from None
        except OSError as e:
            raise HostError("%s: %s" % (what, e.strerror or e)) from None

    def index(self, ifname):
        found = self.ipr.link_lookup(ifname=ifname)
        if not found:
            raise HostError("interface %s: no longer exists" % ifname)
        return found[0]

    def set_sysctl(self, key, value):
        self._call("setting %s = %s" % (key, value), procsys.write_value, sysctl_path(key), value)

    def set_mtu(self, ifname, mtu):
        self._call("setting the MTU of %s to %d" % (ifname, mtu), self.ipr.link, "set", index=self.index(ifname), mtu=mtu)

    def set_up(self, ifname, up):
        self._call("setting %s %s" % (ifname, "up" if up else "down"), self.ipr.link, "set",
                   index=self.index(ifname), state="up" if up else "down")

    def address(self, op, ifname, cidr, failover=False):
        """failover: an IPv6 address goes in with nodad (no DAD delay, it is unique by allocation) and
        a preferred lifetime of 0, so source address selection never picks it (RFC 6724 rule 3); IPv4
        source selection has no such rule and takes the NIC's first primary address, the native one."""
        iface = ipaddress.ip_interface(cidr)
        kwargs = {}
        if failover and op == "add" and iface.version == 6:
            kwargs["flags"] = IFA_F_NODAD
            # cacheinfo as a dict: pyroute2 0.7 drops the preferred_lft keyword (it sends forever).
            kwargs["cacheinfo"] = {"preferred": 0, "valid": INFINITY_LIFE_TIME}
        self._call("%s address %s on %s" % ("adding" if op == "add" else "deleting", cidr, ifname), self.ipr.addr, op,
                   index=self.index(ifname), address=str(iface.ip), prefixlen=iface.network.prefixlen,
                   family=AF[iface.version], **kwargs)

    def route(self, op, route):
        family = route["family"]
        kwargs = {"family": AF[family], "dst": route["dst"], "table": route["table"]}
        if route.get("dev"):
            kwargs["oif"] = self.index(route["dev"])
        if route.get("gateway"):
            kwargs["gateway"] = route["gateway"]
        if family == 4:  # also on delete: the kernel matches the scope of an IPv4 route
            kwargs["scope"] = SCOPE_NUMBERS.get(route.get("scope"), RT_SCOPE_UNIVERSE)
        if op == "add":
            kwargs["proto"] = route.get("proto", PROTO)
        if route.get("metric") not in (None, 0):
            kwargs["priority"] = route["metric"]
        self._call("%s route %s" % ("adding" if op == "add" else "deleting", route_text(route)), self.ipr.route, op, **kwargs)

    def rule(self, op, rule):
        net = ipaddress.ip_network(rule["from"])
        kwargs = {"family": AF[rule["family"]], "src": str(net.network_address), "src_len": net.prefixlen,
                  "table": rule["table"], "priority": rule["priority"]}
        if op == "add":
            kwargs["protocol"] = rule.get("proto", PROTO)
        self._call("%s rule %s" % ("adding" if op == "add" else "deleting", rule_text(rule)), self.ipr.rule, op, **kwargs)
