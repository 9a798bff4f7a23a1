# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What of a normalised plan a renderer's configuration format cannot express (docs/persistence.md).

A gap means the boot configuration would restore less than the plan holds; the role
fails on gaps unless told to only warn. Each gap names the plan path and the reason.
"""

from __future__ import annotations

# systemd-networkd learned per-route RTO minimum (TCPRetransmissionTimeoutSec=) in 255.
NETWORKD_RTO_MIN_VERSION = 255
NETWORKD_ARP_VALIDATE = ("none", "active", "backup", "all")
NETWORKD_XMIT_HASH = ("layer2", "layer2+3", "layer3+4", "encap2+3", "encap3+4")


def _routes(plan):
    for i, iface in enumerate(plan["interfaces"]):
        for j, route in enumerate(iface["routes"]):
            yield "plan.interfaces[%d].routes[%d] (%s %s)" % (i, j, iface["name"], route["dst"]), iface, route


def _rules(plan):
    for i, iface in enumerate(plan["interfaces"]):
        for j, rule in enumerate(iface["rules"]):
            yield "plan.interfaces[%d].rules[%d] (%s)" % (i, j, iface["name"]), rule


def _bonds(plan):
    for i, iface in enumerate(plan["interfaces"]):
        if iface["bond"]:
            yield "plan.interfaces[%d].bond (%s)" % (i, iface["name"]), iface["bond"]


def _networkd_bond_gaps(plan, who):
    gaps = []
    for where, bond in _bonds(plan):
        if bond["arp_validate"] and bond["arp_validate"] not in NETWORKD_ARP_VALIDATE:
            gaps.append("%s: arp_validate %s: %s knows only %s" % (where, bond["arp_validate"], who, ", ".join(NETWORKD_ARP_VALIDATE)))
        if bond["xmit_hash_policy"] and bond["xmit_hash_policy"] not in NETWORKD_XMIT_HASH:
            gaps.append("%s: xmit_hash_policy %s: %s knows only %s" % (where, bond["xmit_hash_policy"], who, ", ".join(NETWORKD_XMIT_HASH)))
    return gaps


def networkd_gaps(plan, version):
    who = "systemd-networkd %s" % (version if version else "(version unknown)")
    gaps = []
    for where, _iface, route in _routes(plan):
        if route["rto_min"] and (not version or version < NETWORKD_RTO_MIN_VERSION):
            gaps.append("%s: rto_min %d ms: %s has no per-route RTO minimum (TCPRetransmissionTimeoutSec= needs systemd %d)"
                        % (where, route["rto_min"], who, NETWORKD_RTO_MIN_VERSION))
        for k, nh in enumerate(route["nexthops"]):
            if nh["gateway"] is None:
                gaps.append("%s: nexthops[%d]: MultiPathRoute= needs a gateway address, this next hop has only dev %s" % (where, k, nh["dev"]))
            if nh["onlink"]:
                gaps.append("%s: nexthops[%d]: MultiPathRoute= has no per-next-hop onlink flag" % (where, k))
    return gaps + _networkd_bond_gaps(plan, who)


def netplan_gaps(plan):
    gaps = []
    for where, _iface, route in _routes(plan):
        if route["rto_min"]:
            gaps.append("%s: rto_min %d ms: netplan has no per-route RTO minimum" % (where, route["rto_min"]))
        if route["nexthops"]:
            gaps.append("%s: netplan has no multipath routes (%d next hops)" % (where, len(route["nexthops"])))
    for where, rule in _rules(plan):
        if rule["from"] is None:
            gaps.append("%s: netplan routing-policy needs a from (or to) selector" % where)
    return gaps + _networkd_bond_gaps(plan, "netplan")


def _networkmanager_families(plan):
    """{(interface, family)} whose profile section must carry routes or rules (multipath parts included)."""
    needed = set()
    for iface in plan["interfaces"]:
        needed.update((iface["name"], route["family"]) for route in iface["routes"] if not route["nexthops"])
        needed.update((iface["name"], rule["family"]) for rule in iface["rules"])
        needed.update((nh["dev"], 4) for route in iface["routes"] if route["family"] == 4 for nh in route["nexthops"])
    return needed


def networkmanager_gaps(plan):
    names = {iface["name"] for iface in plan["interfaces"] if iface["kind"] != "bond-port"}
    gaps = []
    needed = _networkmanager_families(plan)
    for i, iface in enumerate(plan["interfaces"]):
        for family in (4, 6):
            has_address = any(a["family"] == family for a in iface["addresses"])
            # Without an address the section is method=disabled (IPv4) or link-local (IPv6), which configure no routes.
            if (iface["name"], family) in needed and not has_address and not (family == 6 and iface["accept_ra"]):
                gaps.append("plan.interfaces[%d] (%s): NetworkManager applies IPv%d routes and rules only to a profile with an"
                            " IPv%d address (ipv%d.method=manual)" % (i, iface["name"], family, family, family))
    for where, _iface, route in _routes(plan):
        if not route["nexthops"]:
            continue
        if route["family"] == 6:
            gaps.append("%s: NetworkManager merges only IPv4 routes into multipath (weight is IPv4 only)" % where)
            continue
        if len({nh["onlink"] for nh in route["nexthops"]}) > 1:
            gaps.append("%s: NetworkManager merges next hops into one multipath route only when all share the onlink flag" % where)
        for k, nh in enumerate(route["nexthops"]):
            if nh["dev"] not in names:
                gaps.append("%s: nexthops[%d]: dev %s has no connection profile in the plan to carry this next hop" % (where, k, nh["dev"]))
    return gaps


def gaps_for(plan, renderer, networkd_version=None):
    """Every plan item that `renderer` cannot persist, as messages."""
    if renderer == "networkd":
        return networkd_gaps(plan, networkd_version)
    if renderer == "netplan":
        return netplan_gaps(plan)
    if renderer == "networkmanager":
        return networkmanager_gaps(plan)
    return []
