# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validate a bond declaration across its fields and normalise it. Pure.

The normalised bond:

    {"name": "bond0", "ports": ["fab0", "fab1"], "mtu": None, "addresses": None,
     "options": {"mode": "active-backup", "miimon": 100, "arp_interval": None,
                 "arp_ip_target": [], "arp_validate": None, "arp_all_targets": None,
                 "lacp_rate": None, "primary": "fab0", "updelay": 0, "downdelay": 0,
                 "xmit_hash_policy": None}}

Options that do not apply to the bond's mode or link monitor are None (and
arp_ip_target []), options that apply but were not given carry the kernel's
default, so a declaration and a bond read back from the kernel compare equal.
"""

from __future__ import annotations

import ipaddress

from ansible_collections.edgeft.failover.plugins.module_utils import module_options
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError

MODES = ("balance-rr", "active-backup", "balance-xor", "broadcast", "802.3ad", "balance-tlb", "balance-alb")
# The kernel refuses these options in other modes (bond_options.c, unsuppmodes).
ARP_MONITOR_MODES = ("balance-rr", "active-backup", "balance-xor", "broadcast")
PRIMARY_MODES = ("active-backup", "balance-tlb", "balance-alb")
LACP_MODES = ("802.3ad",)
# Modes that hash flows onto ports; the kernel accepts the policy in any mode but uses it only here.
HASH_MODES = ("balance-xor", "802.3ad", "balance-tlb")
ARP_VALIDATE = ("none", "active", "backup", "all", "filter", "filter_active", "filter_backup")
ARP_ALL_TARGETS = ("any", "all")
LACP_RATES = ("slow", "fast")
XMIT_HASH_POLICIES = ("layer2", "layer2+3", "layer3+4", "encap2+3", "encap3+4", "vlan+srcmac")
DEFAULT_MIIMON = 100  # the kernel's default when neither monitor is given
MAX_ARP_TARGETS = 16  # BOND_MAX_ARP_TARGETS
INT_MAX = 2 ** 31 - 1
IFNAMSIZ = 15
OPTION_NAMES = ("mode", "miimon", "arp_interval", "arp_ip_target", "arp_validate", "arp_all_targets", "lacp_rate",
                "primary", "updelay", "downdelay", "xmit_hash_policy")


class OptionError(EdgeftError, ValueError):
    """Bad input; the message starts with the option it is about (primary: ...)."""


def interface_name(value, where):
    name = str(value or "").strip()
    if not name:
        raise OptionError("%s: an interface name is required" % where)
    if len(name) > IFNAMSIZ or "/" in name or ":" in name or any(c.isspace() for c in name) or name in (".", ".."):
        raise OptionError("%s: %r is not a valid interface name (at most 15 characters, no '/', ':' or spaces)"
                          % (where, name))
    return name


def _int(value, where, low=0, high=INT_MAX):
    return None if value is None else module_options.int_in_range(value, where, low, high, OptionError)


def _choice(value, where, choices):
    if value is None:
        return None
    if value not in choices:
        raise OptionError("%s: %r is not one of %s" % (where, value, ", ".join(choices)))
    return value


def _targets(value):
    if value is None:
        return []
    if not isinstance(value, list):
        raise OptionError("arp_ip_target: expected a list of IPv4 addresses")
    out = []
    for i, text in enumerate(value):
        where = "arp_ip_target[%d]" % i
        try:
            addr = ipaddress.ip_address(str(text).strip())
        except ValueError:
            raise OptionError("%s: %r is not an IPv4 address" % (where, text)) from None
        if addr.version != 4:
            raise OptionError("%s: %s is not IPv4; the bonding ARP monitor probes IPv4 targets only" % (where, addr))
        if addr.is_multicast or addr.is_unspecified or addr == ipaddress.ip_address("255.255.255.255"):
            raise OptionError("%s: %s cannot be an ARP target (a unicast address answers ARP)" % (where, addr))
        if str(addr) in out:
            raise OptionError("%s: %s is listed twice" % (where, addr))
        out.append(str(addr))
    if len(out) > MAX_ARP_TARGETS:
        raise OptionError("arp_ip_target: %d targets, the kernel holds at most %d" % (len(out), MAX_ARP_TARGETS))
    return out


def _ports(value, name):
    if not isinstance(value, list) or not value:
        raise OptionError("ports: a bond needs at least one port, e.g. [fab0, fab1]")
    out = []
    for i, port in enumerate(value):
        where = "ports[%d]" % i
        port = interface_name(port, where)
        if port == name:
            raise OptionError("%s: %s is the bond itself" % (where, port))
        if port in out:
            raise OptionError("%s: %s is listed twice" % (where, port))
        out.append(port)
    return out


def _addresses(value):
    if value is None:
        return None
    if not isinstance(value, list):
        raise OptionError("addresses: expected a list of addresses with prefix length")
    out = []
    for i, text in enumerate(value):
        where = "addresses[%d]" % i
        if "/" not in str(text):
            raise OptionError("%s: %r needs a prefix length, e.g. 198.18.1.11/16" % (where, text))
        try:
            iface = ipaddress.ip_interface(str(text).strip())
        except ValueError:
            raise OptionError("%s: %r is not an address with prefix length" % (where, text)) from None
        if str(iface) in out:
            raise OptionError("%s: %s is listed twice" % (where, iface))
        out.append(str(iface))
    return out


def _monitor(p, mode):
    """(miimon, arp_interval) after the link monitor rules; raises naming the option."""
    miimon = _int(p.get("miimon"), "miimon")
    arp_interval = _int(p.get("arp_interval"), "arp_interval")
    if arp_interval:
        if mode not in ARP_MONITOR_MODES:
            raise OptionError("arp_interval: the ARP monitor is not available in mode %s (only %s); use miimon"
                              % (mode, ", ".join(ARP_MONITOR_MODES)))
        if miimon:
            raise OptionError("miimon: the ARP monitor (arp_interval %d) and the MII monitor exclude each other; "
                              "drop miimon or set arp_interval to 0" % arp_interval)
        return None, arp_interval
    if miimon is None:
        return DEFAULT_MIIMON, None
    if miimon == 0:
        raise OptionError("miimon: 0 with no ARP monitor leaves the bond without a link monitor, so it never notices "
                          "a failed port; set miimon (e.g. 100) or arp_interval with arp_ip_target")
    return miimon, None


def _arp_options(p, arp_interval):
    targets = _targets(p.get("arp_ip_target"))
    validate = _choice(p.get("arp_validate"), "arp_validate", ARP_VALIDATE)
    all_targets = _choice(p.get("arp_all_targets"), "arp_all_targets", ARP_ALL_TARGETS)
    if arp_interval:
        if not targets:
            raise OptionError("arp_ip_target: the ARP monitor (arp_interval) needs at least one target to probe, "
                              "e.g. the gateway of the bond's subnet")
        return targets, validate or "none", all_targets or "any"
    for option, value in (("arp_ip_target", targets), ("arp_validate", validate), ("arp_all_targets", all_targets)):
        if value:
            raise OptionError("%s: only used by the ARP monitor; set arp_interval (and drop miimon) or remove %s"
                              % (option, option))
    return [], None, None


def _delays(p, miimon):
    out = []
    for option in ("updelay", "downdelay"):
        value = _int(p.get(option), option) or 0
        if value:
            if not miimon:
                raise OptionError("%s: needs the MII monitor (miimon); the ARP monitor has no %s" % (option, option))
            if value % miimon:
                raise OptionError("%s: %d is not a multiple of miimon (%d); the kernel would round it down to %d"
                                  % (option, value, miimon, value // miimon * miimon))
        out.append(value)
    return out


def normalize_bond(params) -> dict:
    """A present bond's declaration -> the normalised bond (module docstring)."""
    name = interface_name(params.get("name"), "name")
    mode = _choice(params.get("mode") or "active-backup", "mode", MODES)
    ports = _ports(params.get("ports"), name)
    miimon, arp_interval = _monitor(params, mode)
    targets, validate, all_targets = _arp_options(params, arp_interval)
    updelay, downdelay = _delays(params, miimon)
    lacp_rate = _choice(params.get("lacp_rate"), "lacp_rate", LACP_RATES)
    if mode in LACP_MODES:
        lacp_rate = lacp_rate or "slow"
    elif lacp_rate:
        raise OptionError("lacp_rate: only used in mode 802.3ad (LACP); this bond has mode %s" % mode)
    primary = params.get("primary") or None
    if primary:
        primary = interface_name(primary, "primary")
        if mode not in PRIMARY_MODES:
            raise OptionError("primary: only used in modes %s; this bond has mode %s" % (", ".join(PRIMARY_MODES), mode))
        if primary not in ports:
            raise OptionError("primary: %s is not one of the bond's ports (%s)" % (primary, ", ".join(ports)))
    policy = _choice(params.get("xmit_hash_policy"), "xmit_hash_policy", XMIT_HASH_POLICIES)
    if mode in HASH_MODES:
        policy = policy or "layer2"
    elif policy:
        raise OptionError("xmit_hash_policy: only used in modes %s, which hash flows onto ports; this bond has mode %s"
                          % (", ".join(HASH_MODES), mode))
    return {
        "name": name,
        "ports": ports,
        "mtu": _int(params.get("mtu"), "mtu", 68, 65535),
        "addresses": _addresses(params.get("addresses")),
        "options": {
            "mode": mode, "miimon": miimon, "arp_interval": arp_interval, "arp_ip_target": targets,
            "arp_validate": validate, "arp_all_targets": all_targets, "lacp_rate": lacp_rate, "primary": primary,
            "updelay": updelay, "downdelay": downdelay, "xmit_hash_policy": policy,
        },
    }


def host_problems(bond, links):
    """(errors, warnings) for a normalised bond against this host's interfaces.

    links: ifname -> {kind, master (ifname), addresses}, as kernel.links() reads them.
    """
    errors, warnings = [], []
    existing = links.get(bond["name"])
    if existing is not None and existing["kind"] != "bond":
        errors.append("name: %s exists and is a %s, not a bond; choose another name"
                      % (bond["name"], existing["kind"] or "physical interface"))
    for i, port in enumerate(bond["ports"]):
        where = "ports[%d]" % i
        link = links.get(port)
        if link is None:
            errors.append("%s: there is no interface %r on this host" % (where, port))
            continue
        if port == "lo" or link["kind"] in ("bond", "bridge", "vrf"):
            errors.append("%s: %s is a %s and cannot be a bond port" % (where, port, link["kind"] or "loopback"))
        elif link["master"] and link["master"] != bond["name"]:
            errors.append("%s: %s is already a port of %s; remove it there first" % (where, port, link["master"]))
        routable = [a for a in link["addresses"] if not ipaddress.ip_interface(a).ip.is_link_local]
        if routable and link["master"] != bond["name"]:
            warnings.append("%s: %s carries %s, which stop working once it is a bond port; move them to the bond "
                            "(addresses)" % (where, port, ", ".join(routable)))
    return errors, warnings
