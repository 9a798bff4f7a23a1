# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What to change, from the declaration, the kernel and the record; and the
network plan the persistence renderers consume. Pure functions.
"""

from __future__ import annotations

import ipaddress

from ansible_collections.edgeft.failover.plugins.module_utils.backup_routes import spec
from ansible_collections.edgeft.failover.plugins.module_utils.backup_routes.kernel import KERNEL_PROTOS, PROTO, sysctl_key
from ansible_collections.edgeft.failover.plugins.module_utils.backup_routes.spec import OptionError

COMPARED = ("dev", "gateway", "nexthops", "src", "rto_min_ms")


class RouteChanges:
    def __init__(self):
        self.add = []  # declared routes the kernel lacks
        self.update = []  # (declared route, kernel route it replaces)
        self.keep = []  # declared routes already in place
        self.remove = []  # kernel routes (ours) no longer declared
        self.forget = []  # recorded routes to drop from the record without touching the kernel
        self.warnings = []

    @property
    def changed(self) -> bool:
        return bool(self.add or self.update or self.remove)


def same_route(declared, current) -> bool:
    """Whether the kernel route does what the declared one says (ownership aside)."""
    def nexthops(route):
        hops = route.get("nexthops")
        return None if not hops else sorted((h["dev"], h["gateway"] or "", h["weight"]) for h in hops)

    if nexthops(declared) != nexthops(current):
        return False
    if not declared.get("nexthops"):
        if (declared["dev"], declared["gateway"]) != (current["dev"], current["gateway"]):
            return False
    return declared.get("src") == current.get("src") and declared.get("rto_min_ms") == current.get("rto_min_ms")


def route_changes(desired, current, removable, owned) -> RouteChanges:
    """desired: declared routes; current: kernel routes by key; removable: recorded
    routes that are no longer declared; owned: keys this module recorded."""
    out = RouteChanges()
    for route in desired:
        key = spec.route_key(route)
        cur = current.get(key)
        if cur is None:
            out.add.append(route)
        elif same_route(route, cur):
            out.keep.append(route)
        elif cur["proto"] in KERNEL_PROTOS:
            raise OptionError("%s: the kernel's own route %s (proto %s) has this destination and metric; choose "
                              "another metric" % (route["where"], spec.route_text(cur), KERNEL_PROTOS[cur["proto"]]))
        else:
            if cur["proto"] != PROTO and key not in owned:
                out.warnings.append("%s: replacing %s (proto %d), which edgeft did not install, with the declared route"
                                    % (route["where"], spec.route_text(cur), cur["proto"]))
            out.update.append((route, cur))
    for route in removable:
        cur = current.get(spec.route_key(route))
        if cur is None:
            out.forget.append(route)
        elif cur["proto"] == PROTO:
            out.remove.append(cur)
        else:
            out.forget.append(route)
            out.warnings.append("not removing %s: it is no longer edgeft's (proto %d); it was replaced outside this module"
                                % (spec.route_text(cur), cur["proto"]))
    return out


# ----------------------------------------------------------------- sysctls
def needed_sysctls(routes) -> dict:
    """sysctl key -> (family, dev, option path) for every interface a route sends through."""
    out = {}
    for route in routes:
        hops = route["nexthops"] or [{"dev": route["dev"]}]
        for k, hop in enumerate(hops):
            where = route.get("where", route["dst"])
            if route["nexthops"] and "where" in route:
                where = "%s.via[%d]" % (route["where"], k)
            key = sysctl_key(route["family"], hop["dev"])
            out.setdefault(key, (route["family"], hop["dev"], where + ".interface"))
    return out


def sysctl_changes(needed, values, recorded, manage):
    """What to write so that every needed sysctl is in effect, and what to put back.

    values: key -> (own value, effective value) as read now (None: no such
    interface). Returns (writes [(family, dev, new, old)], restores [(family, dev,
    value)], the record's sysctls afterwards). Without manage, a needed sysctl
    that is off is an OptionError naming the interface option.
    """
    writes, restores, after = [], [], dict(recorded)
    for key, (family, dev, where) in sorted(needed.items()):
        own, effective = values.get(key, (None, None))
        if own is None or effective == "1":
            continue  # a missing interface is reported on its own
        if not manage:
            raise OptionError("%s: %s is %s on this host; the kernel would keep using a route through %s after it loses "
                              "carrier. Set it to 1 (edgeft.failover.multihome does) or let this module set it "
                              "(set_ignore_linkdown: true)" % (where, key, own, dev))
        writes.append((family, dev, "1", own))
        after.setdefault(key, own)
    for key, previous in sorted(recorded.items()):
        if key in needed:
            continue
        after.pop(key, None)
        family, dev = split_key(key)
        own = values.get(key, (None, None))[0]
        if own == "1" and previous != "1":  # still what we set: put the old value back
            restores.append((family, dev, previous))
    return writes, restores, after


def split_key(key):
    # net.ipv4.conf.<dev, dots as '/'>.ignore_routes_with_linkdown
    parts = key.split(".")
    return int(parts[1][3:]), ".".join(parts[3:-1]).replace("/", ".")


# ---------------------------------------------------------- host checks
def host_problems(routes, links, check_mode):
    """(errors, warnings) about the declaration against this host's interfaces."""
    errors, warnings = [], []
    local = {str(ipaddress.ip_interface(a).ip) for entry in links.values() for a in entry["addresses"]}
    for route in routes:
        hops = route["nexthops"] or [{"dev": route["dev"], "gateway": route["gateway"]}]
        for k, hop in enumerate(hops):
            where = "%s.via[%d]" % (route["where"], k) if route["nexthops"] else route["where"]
            if hop["dev"] not in links:
                msg = "%s.interface: there is no interface %r on this host" % (where, hop["dev"])
                if check_mode:
                    warnings.append(msg + " (a real run fails unless it is created first)")
                else:
                    errors.append(msg)
                continue
            master = links[hop["dev"]].get("master")
            if master and links.get(master, {}).get("kind") == "bond":
                errors.append("%s.interface: %s is a port of bond %s; route through %s" % (where, hop["dev"], master, master))
                continue
            if route["family"] == 6 and hop["gateway"] is None and not _covered(route["dst"], links[hop["dev"]]):
                warnings.append("%s: %s is not on-link on %s (no prefix of %s covers it), and a Linux peer answers a "
                                "neighbour solicitation only for addresses of the interface it arrives on: give the "
                                "peer's address on %s as gateway" % (where, route["dst"], hop["dev"], hop["dev"], hop["dev"]))
        src = route.get("src")
        if src and src not in local:
            where = route["where"].split(".via[")[0]
            errors.append("%s.src: %s is not an address of this host (the kernel only sends from local addresses)"
                          % (where, src))
    return sorted(set(errors), key=errors.index), sorted(set(warnings), key=warnings.index)


def _covered(dst, link):
    net = ipaddress.ip_network(dst)
    for addr in link["addresses"]:
        iface = ipaddress.ip_interface(addr)
        if iface.version == net.version and not iface.ip.is_link_local and net.subnet_of(iface.network):
            return True
    return False


# -------------------------------------------------------------------- plan
def plan_route(route) -> dict:
    """A route in the shared plan shape (docs/backup_routes.md, "Plan")."""
    out = {"dst": route["dst"]}
    if route.get("nexthops"):
        out["nexthops"] = [{"dev": h["dev"], "gateway": h["gateway"], "weight": h["weight"]} for h in route["nexthops"]]
    else:
        out["gateway"] = route["gateway"]
        out["scope"] = "link" if route["gateway"] is None and route["family"] == 4 else None
    # rto_min in ms: the key plugins/module_utils/persist/plan.py reads.
    out.update({"metric": route["metric"], "table": None, "src": route.get("src"), "rto_min": route.get("rto_min_ms")})
    return out


def build_plan(routes, links) -> dict:
    """{interfaces: [...], sysctls: {...}}: each route under the interface it leaves by
    (a multipath route under its first next hop's), plus the sysctls they need."""
    interfaces = {}
    for route in sorted(routes, key=lambda r: (spec.devices(r)[0], r["family"], r["dst"], r["metric"])):
        dev = spec.devices(route)[0]
        if dev not in interfaces:
            # Fields this module does not manage are null or empty: this plan is merged by interface
            # name into the plan of the module that manages the interface (multihome, bond).
            kind = "bond" if links.get(dev, {}).get("kind") == "bond" else "ethernet"
            interfaces[dev] = {"name": dev, "kind": kind, "mtu": None, "addresses": [], "accept_ra": None,
                               "routes": [], "rules": [], "bond": None, "master": None}
        interfaces[dev]["routes"].append(plan_route(route))
    sysctls = {key: "1" for key in sorted(needed_sysctls(routes))}
    return {"interfaces": list(interfaces.values()), "sysctls": sysctls}
