# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plane declaration of a host: names, NICs, addresses, gateways and failover addresses,
validated in one place.

Every module that reads planes (multihome, peer_table, plane_state, plane_check,
plane_info) goes through normalize_planes, so an inventory one of them refuses
is refused by all with the same message. Pure: the host's links are passed in.
"""

from __future__ import annotations

import ipaddress

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError


MTU_MIN, MTU_MAX, MTU_MIN_IPV6 = 68, 65535, 1280
IFNAMSIZ = 15
FAMILIES = (("ipv4", 4, "gateway4"), ("ipv6", 6, "gateway6"))
# Routed planes: the per-plane failover address of each family (docs/multihome.md).
FAILOVER_KEYS = (("ipv4", 4, "failover4"), ("ipv6", 6, "failover6"))


class OptionError(EdgeftError, ValueError):
    """Bad input; the message starts with the option path (peers[3].planes[1].ipv4: ...)."""


def int_option(value, where, low, high):
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


def host_interface(value, where, version, prefix_required=True):
    """ip_interface of '198.18.1.11/16', checked usable as a host's own address; without
    prefix_required a bare address stands for its host prefix (/32, /128)."""
    text = str(value).strip()
    if "/" not in text:
        if prefix_required:
            raise OptionError("%s: %r needs a prefix length (e.g. %s)" % (where, value,
                              "198.18.1.11/16" if version == 4 else "fd0e:d6ef:7a00:1::b/64"))
        text += "/128" if ":" in text else "/32"
    try:
        iface = ipaddress.ip_interface(text)
    except ValueError:
        raise OptionError("%s: %r is not an address with prefix length" % (where, value)) from None
    ip, net = iface.ip, iface.network
    if ip.version != version:
        raise OptionError("%s: %s is not an IPv%d address" % (where, str(value).strip(), version))
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


def normalize_planes(planes, links=None, option="planes", require_address=False, prefix_required=True) -> list:
    """Validate the declaration; [{name, interface, index, where, ifindex, ipv4, ipv6, gateway4, gateway6, mtu,
    accept_ra, failover4, failover6}] (None or False for what a plane does not give).

    links: then on_host() too, after the declaration's own checks; None skips the host checks.
    require_address: a plane must give ipv4, ipv6 or both (the multihome module configures them).
    prefix_required=False: ipv4/ipv6 may be bare addresses (peer_table needs only the address).
    """
    if not isinstance(planes, list) or not planes:
        raise OptionError("%s: at least one plane is required (a list of dicts with name, interface, ipv4/ipv6)" % option)
    if len(planes) > layout.PLANE_SLOTS:
        raise OptionError("%s: %d planes, the data path has %d plane slots" % (option, len(planes), layout.PLANE_SLOTS))
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
        entry = {"name": name, "interface": nic, "index": index, "where": where, "ifindex": None}
        for key, version, gw_key in FAMILIES:
            value = plane.get(key)
            entry[key] = None if value in (None, "") else host_interface(value, "%s.%s" % (where, key), version, prefix_required)
            gw = plane.get(gw_key)
            entry[gw_key] = None if gw in (None, "") else gateway_address(
                gw, "%s.%s" % (where, gw_key), entry[key], "%s.%s" % (where, key))
        if require_address and entry["ipv4"] is None and entry["ipv6"] is None:
            raise OptionError("%s: plane %r declares no address: give ipv4, ipv6 or both" % (where, name))
        for key, _version, failover_key in FAILOVER_KEYS:
            value = plane.get(failover_key)
            entry[failover_key] = None if value in (None, "") else failover_address(
                value, "%s.%s" % (where, failover_key), entry[key], "%s.%s" % (where, key))
        mtu = plane.get("mtu")
        entry["mtu"] = None if mtu in (None, "") else int_option(mtu, where + ".mtu", MTU_MIN, MTU_MAX)
        if entry["mtu"] is not None and entry["ipv6"] is not None and entry["mtu"] < MTU_MIN_IPV6:
            raise OptionError("%s.mtu: %d is below %d, the IPv6 minimum (the kernel disables IPv6 on the NIC), and "
                              "the plane declares ipv6" % (where, entry["mtu"], MTU_MIN_IPV6))
        entry["accept_ra"] = as_bool(plane.get("accept_ra"), where + ".accept_ra")
        out.append(entry)
    _check_overlaps(out)
    _check_failover(out)
    if links is not None:
        on_host(out, links)
    return out


def on_host(planes, links) -> list:
    """Check normalised planes against the host's links and fill in each ifindex.

    links: {ifname: {ifindex (or index), min_mtu, max_mtu, ...}}; every NIC must exist, and a
    declared MTU must fit it.
    """
    for entry in planes:
        where, nic = entry["where"], entry["interface"]
        link = links.get(nic)
        if link is None:
            known = ", ".join(sorted(links)) or "none"
            raise OptionError("%s.interface: no interface %r on this host (it has: %s)" % (where, nic, known))
        entry["ifindex"] = link.get("ifindex", link.get("index"))
        mtu = entry["mtu"]
        if mtu is not None:
            low, high = link.get("min_mtu"), link.get("max_mtu")
            if low and mtu < low or high and mtu > high:
                raise OptionError("%s.mtu: %d is outside what %s supports (%s..%s)"
                                  % (where, mtu, nic, low or "?", high or "?"))
    return planes


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


def plane_names(declared, record=None):
    """(names by index, how many are declared): the declaration, else what
    peer_table recorded, else the index as text."""
    names = [p["name"] for p in declared or (record.planes if record else [])]
    return names + [str(i) for i in range(len(names), layout.PLANE_SLOTS)], len(names)


def resolve_plane(value, names, named, option="plane") -> int:
    """Plane index from a name, or from an index given as a number."""
    text = str(value)
    if text in names[:named]:
        return names.index(text)
    if text.isdigit() and int(text) < layout.PLANE_SLOTS:
        return int(text)
    known = ", ".join(names[:named]) or "none declared or recorded"
    raise OptionError("%s: %r is neither a plane name of this host (%s) nor a plane index 0..%d"
                      % (option, value, known, layout.PLANE_SLOTS - 1))
