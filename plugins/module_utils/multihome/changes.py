# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""From plan + live state + record to the ordered steps that make the host match the plan.

Pure functions over plain data (the live state as host.Host reads it), so the
diff is tested without a kernel. Exact set over what edgeft owns: a declared
item already present is adopted (recorded, not touched); a recorded item no
longer declared is removed (sysctls, MTU, link state: put back as they were);
everything else on the host is left alone. The only things removed without a
record are those in the way of a declared item: the declared address's IP on
the same NIC with another prefix length, or another route in the same slot
(family, table, destination, metric) of an edgeft plane table.

Step order: settings first (sysctls before the NIC comes up, so no router
advertisement is accepted in between), then additions, then removals, so
connectivity over a plane never depends on a gap; undone in reverse on failure.
"""

from __future__ import annotations

import copy
import ipaddress

from ansible_collections.edgeft.failover.plugins.module_utils.multihome import record as rec
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.host import default_metric, route_text, rule_text
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.spec import OptionError

ARP_IGNORE_ALL = "net.ipv4.conf.all.arp_ignore"


# ------------------------------------------------------------- identities
def _metric(route):
    metric = route.get("metric")
    return default_metric(route["family"]) if metric is None else metric


def route_id(route) -> tuple:
    family = route["family"]
    return (family, route["table"], route["dst"], route.get("gateway") or None, route.get("dev"),
            route.get("scope") if family == 4 else None, _metric(route), route.get("other"))


def route_slot(route) -> tuple:
    """Routes the kernel refuses to hold side by side."""
    return (route["family"], route["table"], route["dst"], _metric(route))


def rule_id(rule) -> tuple:
    return (rule["family"], rule["from"], rule["table"], rule["priority"], rule.get("other"))


def _ip(cidr):
    return ipaddress.ip_interface(cidr).ip


def sysctl_nic(key):
    """fab0 of net.ipv4.conf.fab0.rp_filter (None for conf.all/default or other sysctls)."""
    parts = key.split(".")
    if len(parts) == 5 and parts[0] == "net" and parts[2] == "conf" and parts[3] not in ("all", "default"):
        return parts[3].replace("/", ".")
    return None


# ------------------------------------------------------------ declaration
def desired(plan, failover=None) -> dict:
    """The plan as sets of host items: {nics, mtu, addresses, failover, routes, rules, sysctls}.

    failover ({nic: [cidr]}, spec.failover_addresses) joins the NIC's addresses, so it is
    recorded and removed like them; the set out["failover"] marks the ones installed as
    failover addresses (IPv6: nodad, never preferred as a source)."""
    failover = failover or {}
    out = {"nics": [], "mtu": {}, "addresses": {}, "failover": set(), "routes": [], "rules": [],
           "sysctls": dict(plan.get("sysctls") or {})}
    for iface in plan.get("interfaces") or []:
        nic = iface["name"]
        out["nics"].append(nic)
        out["mtu"][nic] = iface.get("mtu")
        out["addresses"][nic] = [str(ipaddress.ip_interface(a)) for a in iface.get("addresses") or []]
        for cidr in failover.get(nic) or []:
            cidr = str(ipaddress.ip_interface(cidr))
            out["addresses"][nic].append(cidr)
            out["failover"].add((nic, cidr))
        for r in iface.get("routes") or []:
            if r.get("table") is None:  # main-table routes (backup routes) belong to another module
                continue
            family = ipaddress.ip_network(r["dst"]).version
            out["routes"].append({
                "family": family, "table": r["table"], "dst": str(ipaddress.ip_network(r["dst"])),
                "gateway": r.get("gateway"), "dev": nic, "scope": r.get("scope") if family == 4 else None,
                "metric": r.get("metric") if r.get("metric") is not None else default_metric(family),
            })
        for r in iface.get("rules") or []:
            out["rules"].append({"family": r["family"], "from": str(ipaddress.ip_network(r["from"])), "table": r["table"],
                                 "priority": r["priority"], "dev": nic})
    return out


def tables_of(nic, want, record) -> set:
    tables = {r["table"] for r in want["routes"] + want["rules"] if r["dev"] == nic}
    tables |= {r["table"] for r in record["routes"] + record["rules"] if r.get("dev") == nic}
    return tables


def tables_of_interest(plan, record) -> set:
    want = desired(plan)
    return {r["table"] for r in want["routes"] + want["rules"] + record["routes"] + record["rules"]}


def sysctls_of_interest(plan, record) -> set:
    return set(plan.get("sysctls") or {}) | set(record["sysctls"]) | {ARP_IGNORE_ALL}


# ------------------------------------------------------------------ plan
class Changes:
    def __init__(self):
        self.steps = []
        self.record = rec.empty()
        self.warnings = []
        self.before = {}
        self.after = {}

    @property
    def changed(self) -> bool:
        return bool(self.steps)

    def summary(self):
        """(added, removed, sysctls_changed, links_changed) for the module's result."""
        added = {"addresses": [], "routes": [], "rules": []}
        removed = {"addresses": [], "routes": [], "rules": []}
        sysctls, links = {}, {}
        for s in self.steps:
            op = s["op"]
            if op in ("addr_add", "addr_del"):
                (added if op == "addr_add" else removed)["addresses"].append("%s dev %s" % (s["cidr"], s["dev"]))
            elif op in ("route_add", "route_del"):
                (added if op == "route_add" else removed)["routes"].append(route_text(s["route"]))
            elif op in ("rule_add", "rule_del"):
                (added if op == "rule_add" else removed)["rules"].append(rule_text(s["rule"]))
            elif op == "sysctl":
                sysctls[s["key"]] = {"before": s["old"], "after": s["new"]}
            elif op == "mtu":
                links.setdefault(s["dev"], {})["mtu"] = {"before": s["old"], "after": s["new"]}
            elif op == "link":
                links.setdefault(s["dev"], {})["up"] = {"before": not s["up"], "after": s["up"]}
        return added, removed, sysctls, links

    def intent_record(self, old) -> dict:
        """Old and new ownership together: saved before the first write, so an
        interrupted run still knows everything it may have added or changed."""
        out = copy.deepcopy(self.record)
        for nic, entry in old["interfaces"].items():
            mine = out["interfaces"].setdefault(nic, {"addresses": [], "mtu_before": None, "down_before": False})
            mine["addresses"] = sorted(set(mine["addresses"]) | set(entry.get("addresses") or []))
            if entry.get("mtu_before") is not None:
                mine["mtu_before"] = entry["mtu_before"]
            mine["down_before"] = bool(mine.get("down_before") or entry.get("down_before"))
        for key, entry_id in (("routes", route_id), ("rules", rule_id)):
            seen = {entry_id(r) for r in out[key]}
            out[key] += [r for r in old[key] if entry_id(r) not in seen]
        out["sysctls"].update(old["sysctls"])
        return out


def compute(plan, live, record, where=None, failover=None) -> Changes:
    """Ordered steps from live to plan, the record after them, and the diff views.

    live: {links: {nic: {mtu, up, ...}}, addresses: {nic: [cidr]}, routes: [...] (tables of
    interest), rules: [...], sysctls: {key: value or None}, and optionally failover_ready:
    {(nic, cidr)} of IPv6 addresses already nodad and deprecated}. where: {(nic, cidr): option}
    for messages. failover: {nic: [cidr]} of failover addresses (see desired).
    """
    where = where or {}
    want = desired(plan, failover)
    ch = Changes()
    links, addrs = live["links"], live["addresses"]
    recorded_nics = record["interfaces"]
    set_sysctls, restore_sysctls, set_links, restore_links = [], [], [], []
    early, add_addr, add_route, add_rule, del_rule, del_route, del_addr = [], [], [], [], [], [], []

    # -- sysctls
    values = live["sysctls"]
    for key, value in sorted(want["sysctls"].items()):
        cur = values.get(key)
        if cur is None:
            ch.warnings.append("%s: not available on this host (IPv6 disabled on the NIC?); left unset" % key)
            continue
        if key in record["sysctls"]:
            ch.record["sysctls"][key] = record["sysctls"][key]
        if cur != str(value):
            set_sysctls.append({"op": "sysctl", "key": key, "old": cur, "new": str(value)})
            ch.record["sysctls"].setdefault(key, cur)
    for key, old in sorted(record["sysctls"].items()):
        cur = values.get(key)
        if key in want["sysctls"] or cur is None:
            continue
        if cur != old:
            restore_sysctls.append({"op": "sysctl", "key": key, "old": cur, "new": old})
    if want["sysctls"] and (values.get(ARP_IGNORE_ALL) or "0").isdigit() and int(values.get(ARP_IGNORE_ALL) or 0) > 1:
        ch.warnings.append("%s is %s: the kernel uses the larger of it and a NIC's arp_ignore, so plane NICs answer "
                           "ARP more strictly than the 1 edgeft sets" % (ARP_IGNORE_ALL, values[ARP_IGNORE_ALL]))

    # -- links: MTU and administrative state
    for nic in want["nics"]:
        link, old = links[nic], recorded_nics.get(nic) or {}
        entry = {"addresses": list(want["addresses"][nic]), "mtu_before": old.get("mtu_before"),
                 "down_before": bool(old.get("down_before"))}
        mtu = want["mtu"][nic]
        if mtu is not None and link["mtu"] != mtu:
            set_links.append({"op": "mtu", "dev": nic, "old": link["mtu"], "new": mtu})
            if entry["mtu_before"] is None:
                entry["mtu_before"] = link["mtu"]
        elif mtu is None and entry["mtu_before"] is not None:  # no longer declared: put it back
            if link["mtu"] != entry["mtu_before"]:
                set_links.append({"op": "mtu", "dev": nic, "old": link["mtu"], "new": entry["mtu_before"]})
            entry["mtu_before"] = None
        if not link["up"]:
            set_links.append({"op": "link", "dev": nic, "up": True})
            entry["down_before"] = True
        ch.record["interfaces"][nic] = entry
    for nic, old in sorted(recorded_nics.items()):
        link = links.get(nic)
        if nic in want["nics"] or link is None:
            continue
        if old.get("down_before") and link["up"]:
            restore_links.append({"op": "link", "dev": nic, "up": False})
        if old.get("mtu_before") is not None and link["mtu"] != old["mtu_before"]:
            restore_links.insert(0, {"op": "mtu", "dev": nic, "old": link["mtu"], "new": old["mtu_before"]})

    # -- addresses
    removing = set()
    ready = live.get("failover_ready")
    for nic in want["nics"]:
        have = addrs.get(nic, [])
        for cidr in want["addresses"][nic]:
            is_failover = (nic, cidr) in want["failover"]
            if cidr in have:
                # An IPv6 failover address without its flags (added by hand, or before it was one)
                # could be picked as a source address: put it back with them.
                if is_failover and ready is not None and _ip(cidr).version == 6 and (nic, cidr) not in ready \
                        and (nic, cidr) not in removing:
                    early.append({"op": "addr_del", "dev": nic, "cidr": cidr})
                    add_addr.append({"op": "addr_add", "dev": nic, "cidr": cidr, "failover": True})
                    removing.add((nic, cidr))
                continue
            step = {"op": "addr_add", "dev": nic, "cidr": cidr}
            if is_failover:
                step["failover"] = True
            add_addr.append(step)
            ip = _ip(cidr)
            for other_nic, cidrs in sorted(addrs.items()):
                for other in cidrs:
                    if _ip(other) != ip or (other_nic, other) in removing:
                        continue
                    mine = other in (recorded_nics.get(other_nic) or {}).get("addresses", [])
                    if other_nic != nic and not mine:
                        raise OptionError("%s: %s is already on interface %s, which edgeft does not manage: remove it "
                                          "there first" % (where.get((nic, cidr), "planes"), ip, other_nic))
                    early.append({"op": "addr_del", "dev": other_nic, "cidr": other})
                    removing.add((other_nic, other))
    for nic, old in sorted(recorded_nics.items()):
        keep = want["addresses"].get(nic, [])
        for cidr in old.get("addresses") or []:
            if cidr not in keep and cidr in addrs.get(nic, []) and (nic, cidr) not in removing:
                del_addr.append({"op": "addr_del", "dev": nic, "cidr": cidr})
                removing.add((nic, cidr))

    # -- routes of the plane tables
    live_routes = {route_id(r): r for r in live["routes"]}
    want_ids = {route_id(r) for r in want["routes"]}
    in_the_way = set()
    for r in want["routes"]:
        if route_id(r) in live_routes:
            continue
        add_route.append({"op": "route_add", "route": r})
        for other in live["routes"]:
            if route_slot(other) == route_slot(r) and route_id(other) not in in_the_way:
                early.append({"op": "route_del", "route": other})
                in_the_way.add(route_id(other))
    for r in record["routes"]:
        rid = route_id(r)
        if rid not in want_ids and rid in live_routes and rid not in in_the_way:
            del_route.append({"op": "route_del", "route": live_routes[rid]})
            in_the_way.add(rid)
    del_route.sort(key=lambda s: not s["route"].get("gateway"))  # routes through a gateway before the prefix they use
    ch.record["routes"] = [rec.route_entry(r) for r in want["routes"]]

    # -- source rules
    live_rules = {rule_id(r) for r in live["rules"]}
    want_rule_ids = {rule_id(r) for r in want["rules"]}
    add_rule = [{"op": "rule_add", "rule": r} for r in want["rules"] if rule_id(r) not in live_rules]
    del_rule = [{"op": "rule_del", "rule": r} for r in record["rules"]
                if rule_id(r) not in want_rule_ids and rule_id(r) in live_rules]
    ch.record["rules"] = [rec.rule_entry(r) for r in want["rules"]]

    ch.steps = (set_sysctls + set_links + early + add_addr + add_route + add_rule
                + del_rule + del_route + del_addr + restore_links + restore_sysctls)
    nics = list(want["nics"]) + sorted(n for n in recorded_nics if n not in want["nics"])
    ch.before = view(nics, live, want, record)
    ch.after = view(nics, simulate(live, ch.steps), want, record)
    return ch


# ------------------------------------------------------------------ views
def simulate(live, steps) -> dict:
    """The live state after the steps (for check mode and the diff)."""
    out = copy.deepcopy(live)
    for s in steps:
        op = s["op"]
        if op == "sysctl":
            out["sysctls"][s["key"]] = s["new"]
        elif op == "mtu":
            out["links"][s["dev"]]["mtu"] = s["new"]
        elif op == "link":
            out["links"][s["dev"]]["up"] = s["up"]
        elif op == "addr_add":
            out["addresses"].setdefault(s["dev"], []).append(s["cidr"])
            if s.get("failover") and out.get("failover_ready") is not None:
                out["failover_ready"].add((s["dev"], s["cidr"]))
        elif op == "addr_del":
            out["addresses"][s["dev"]] = [a for a in out["addresses"].get(s["dev"], []) if a != s["cidr"]]
        elif op == "route_add":
            out["routes"].append(dict(s["route"]))
        elif op == "route_del":
            out["routes"] = [r for r in out["routes"] if route_id(r) != route_id(s["route"])]
        elif op == "rule_add":
            out["rules"].append(dict(s["rule"]))
        elif op == "rule_del":
            out["rules"] = [r for r in out["rules"] if rule_id(r) != rule_id(s["rule"])]
    return out


def view(nics, live, want, record) -> dict:
    """Per NIC what multihome manages or shows: every address but link-local ones,
    MTU, up, the routes and rules of its plane tables, its sysctls."""
    out = {}
    for nic in nics:
        link = live["links"].get(nic)
        tables = tables_of(nic, want, record)
        keys = sorted(k for k in set(want["sysctls"]) | set(record["sysctls"]) if sysctl_nic(k) == nic)
        out[nic] = {
            "present": link is not None,
            "up": bool(link and link["up"]),
            "mtu": link["mtu"] if link else None,
            "addresses": sorted(live["addresses"].get(nic, []), key=_sort_key),
            "routes": sorted(route_text(r) for r in live["routes"] if r["table"] in tables and r.get("dev") in (nic, None)),
            "rules": sorted((rule_text(r) for r in live["rules"] if r["table"] in tables), key=lambda t: int(t.split(":")[0])),
            "sysctls": {k: live["sysctls"].get(k) for k in keys},
        }
    return out


def _sort_key(cidr):
    iface = ipaddress.ip_interface(cidr)
    return (iface.version, iface.ip, iface.network.prefixlen)
