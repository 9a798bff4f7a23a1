# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Failover addresses of routed planes: allocation and validation.

On routed fabrics each plane carries only its own prefixes, so traffic moved
off a failed plane is translated to per-plane failover addresses (stateless
1:1 NAT). Every host has one failover address per plane and family; on plane t
it stands for the host's native address on the other plane.

Shared by the multihome role (through the failover_addresses filter), the lab
and the peer table, so all of them derive the same addresses from the same
inventory. Free of Ansible imports; every error names the option to fix.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.host import planes as host_planes

PREFIXES_OPTION = "edgeft_failover_prefixes"
FAMILIES = (("ipv4", 4, "failover4"), ("ipv6", 6, "failover6"))


class FailoverAddressError(EdgeftError, ValueError):
    """Bad failover prefix or address; the message names the option and the fix."""


def _network(prefix, option):
    if not isinstance(prefix, str):
        raise FailoverAddressError("%s: %r is not a CIDR string such as '198.19.255.0/24'" % (option, prefix))
    try:
        return ipaddress.ip_network(prefix.strip(), strict=True)
    except ValueError as e:
        if "host bits set" in str(e):
            fixed = ipaddress.ip_network(prefix.strip(), strict=False)
            raise FailoverAddressError("%s: %s has host bits set; write the network, %s" % (option, prefix, fixed)) from None
        raise FailoverAddressError("%s: %r is not a network in CIDR notation (%s)" % (option, prefix, e)) from None


def _native_networks(native, option):
    """Networks of the plane's native interface addresses ('198.19.1.11/24' -> 198.19.1.0/24)."""
    out = []
    for item in native:
        try:
            out.append(ipaddress.ip_interface(str(item).strip()).network)
        except ValueError:
            raise FailoverAddressError("%s: native address %r is not an address with prefix length" % (option, item)) from None
    return out


def _usable_range(network):
    """(first, last) integer addresses a host may get, as ipaddress' hosts() defines them:
    IPv4 below /31 skips network and broadcast, IPv6 below /127 skips the subnet-router
    anycast address; point-to-point and single-address prefixes hand out every address."""
    first, last = int(network.network_address), int(network.broadcast_address)
    if network.num_addresses <= 2:
        return first, last
    if network.version == 4:
        return first + 1, last - 1
    return first + 1, last


def _check_given(given, version, native_networks, name_of):
    """Parse and validate addresses given in inventory; returns host -> ip_address."""
    parsed, owner = {}, {}
    for host in sorted(given):
        text = given[host]
        option = name_of(host)
        if not isinstance(text, str):
            raise FailoverAddressError("%s: %r is not an address string" % (option, text))
        try:
            address = ipaddress.ip_address(text.strip())
        except ValueError:
            hint = " (write it without a prefix length)" if "/" in text else ""
            raise FailoverAddressError("%s: %r is not an IP address%s" % (option, text, hint)) from None
        if address.version != version:
            raise FailoverAddressError("%s: %s is an IPv%d address; give an IPv%d address"
                                       % (option, address, address.version, version))
        for network in native_networks:
            if network.version == version and address in network:
                raise FailoverAddressError("%s: %s lies in the native subnet %s; give an address outside "
                                           "the native subnets" % (option, address, network))
        if address in owner:
            raise FailoverAddressError("%s: %s is also given for host %r; every host needs its own failover address"
                                       % (option, address, owner[address]))
        owner[address] = host
        parsed[host] = address
    return parsed


def _allocate(prefix, hosts, given, native, option, name_of):
    network = _network(prefix, option)
    native_networks = [n for n in _native_networks(native, option) if n.version == network.version]
    for native_network in native_networks:
        if network.overlaps(native_network):
            raise FailoverAddressError("%s: %s overlaps the native subnet %s; pick a prefix outside the plane's "
                                       "native subnets" % (option, network, native_network))
    fixed = _check_given(dict(given or {}), network.version, native_networks, name_of)
    taken = {int(address) for address in fixed.values()}
    wanting = [host for host in sorted(set(hosts)) if host not in fixed]
    first, last = _usable_range(network)
    usable = last - first + 1
    free = usable - sum(1 for value in taken if first <= value <= last)
    if len(wanting) > free:
        raise FailoverAddressError(
            "%s: %s has %d usable addresses (%d of them given in inventory) but %d hosts need one; "
            "pick a larger prefix" % (option, network, usable, usable - free, len(wanting)))
    wanted = set(hosts)
    result = {host: str(address) for host, address in fixed.items() if host in wanted}
    candidate = first
    for host in wanting:
        while candidate in taken:
            candidate += 1
        result[host] = str(ipaddress.ip_address(candidate) if network.version == 4
                           else ipaddress.IPv6Address(candidate))
        candidate += 1
    return {host: result[host] for host in sorted(result)}


def allocate(prefix, hosts, given=None, native=(), option="failover prefix"):
    """Failover address of every host in `hosts` from `prefix`: host -> address string.

    Deterministic: hosts sorted by name take the prefix's usable addresses in
    order, skipping those `given` in inventory. `native` are the plane's native
    interface addresses (or networks); the prefix and given addresses must stay
    out of their subnets. Errors name `option`.
    """
    return _allocate(prefix, hosts, given, native, option,
                     lambda host: "%s: failover address given for host %r" % (option, host))


def _entry_option(host, index, key=None):
    where = "host %s: edgeft_planes[%d]" % (host, index)
    return where + "." + key if key else where


def _planes_of(planes_by_host):
    """host -> {plane name: (index, entry)}, each host's declaration checked by the plane model
    (host/planes.py), so the filter refuses what every module refuses, with the same message
    after the host's name."""
    if not isinstance(planes_by_host, Mapping):
        raise FailoverAddressError("edgeft_planes by host: expected a mapping, got %s" % type(planes_by_host).__name__)
    out = {}
    for host in sorted(planes_by_host):
        entries = planes_by_host[host]
        entries = list(entries) if isinstance(entries, tuple) else entries
        try:
            checked = host_planes.normalize_planes(entries, option="host %s: edgeft_planes" % host)
        except host_planes.OptionError as e:
            raise FailoverAddressError(str(e)) from None
        out[host] = {plane["name"]: (plane["index"], entries[plane["index"]]) for plane in checked}
    return out


def _prefixes_by_plane(prefixes):
    if prefixes is None:
        return {}
    if not isinstance(prefixes, Mapping):
        raise FailoverAddressError("%s: expected a mapping of plane name to {ipv4: cidr, ipv6: cidr}, got %s"
                                   % (PREFIXES_OPTION, type(prefixes).__name__))
    out = {}
    for plane in sorted(prefixes, key=str):
        families = prefixes[plane]
        option = "%s.%s" % (PREFIXES_OPTION, plane)
        if families is None:
            families = {}
        if not isinstance(families, Mapping):
            raise FailoverAddressError("%s: expected a mapping with ipv4 and/or ipv6, got %s"
                                       % (option, type(families).__name__))
        unknown = sorted(str(key) for key in families if key not in ("ipv4", "ipv6"))
        if unknown:
            raise FailoverAddressError("%s: unknown key(s) %s; only ipv4 and ipv6 are allowed"
                                       % (option, ", ".join(unknown)))
        for family, value in families.items():
            if value is not None and not isinstance(value, str):
                raise FailoverAddressError("%s.%s: %r is not a CIDR string" % (option, family, value))
        out[str(plane)] = {family: value for family, value in families.items() if value}
    return out


def plan(planes_by_host, prefixes):
    """Failover addresses of a fabric: {host: {plane: {"ipv4": addr, "ipv6": addr}}}.

    `planes_by_host` is each host's edgeft_planes list (given addresses in
    failover4/failover6); `prefixes` is edgeft_failover_prefixes. A host/plane/
    family appears when the family has a prefix or the host gives an address.
    """
    planes = _planes_of(planes_by_host)
    by_plane = _prefixes_by_plane(prefixes)
    known = {name for named in planes.values() for name in named}
    for plane in by_plane:
        if plane not in known:
            raise FailoverAddressError("%s.%s: no host has a plane named %r; fix the plane name (known: %s)"
                                       % (PREFIXES_OPTION, plane, plane, ", ".join(sorted(known)) or "none"))
    result = {}
    for family, version, key in FAMILIES:
        # Every plane's native subnets: a failover address in another plane's subnet
        # would be routed by that plane's source rules and fabric, not its own.
        all_native = {}
        for named in planes.values():
            for name, (_index, entry) in named.items():
                if entry.get(family):
                    all_native.setdefault(name, []).append(entry[family])
        allocated_networks = {}
        for plane in sorted(known):
            hosts = sorted(host for host, named in planes.items() if plane in named)
            given = {host: planes[host][plane][1][key] for host in hosts if planes[host][plane][1].get(key)}
            prefix = by_plane.get(plane, {}).get(family)
            if not prefix and not given:
                continue
            option = "%s.%s.%s" % (PREFIXES_OPTION, plane, family)

            def name_of(host, plane=plane, key=key):
                return _entry_option(host, planes[host][plane][0], key)

            others = [n for name, natives in all_native.items() if name != plane
                      for n in _native_networks(natives, option)]
            if prefix:
                network = _network(prefix, option)
                for other in others:
                    if network.overlaps(other):
                        raise FailoverAddressError("%s: %s overlaps %s, a native subnet of another plane; pick a "
                                                   "prefix outside every plane's native subnets" % (option, network, other))
                for other_plane, other_network in allocated_networks.items():
                    if network.overlaps(other_network):
                        raise FailoverAddressError("%s: %s overlaps the failover prefix %s of plane %r; give each "
                                                   "plane its own prefix" % (option, network, other_network, other_plane))
                allocated_networks[plane] = network
                _check_given(given, version, others, name_of)
                addresses = _allocate(prefix, hosts, given, all_native.get(plane, ()), option, name_of)
            else:
                natives = _native_networks(all_native.get(plane, ()), option)
                addresses = {host: str(address) for host, address in
                             _check_given(given, version, natives + others, name_of).items()}
            for host, address in addresses.items():
                result.setdefault(host, {}).setdefault(plane, {})[family] = address
        _check_unique_across_planes(result, family, planes)
    return result


def _check_unique_across_planes(result, family, planes):
    seen = {}
    for host in sorted(result):
        for plane in sorted(result[host]):
            address = result[host][plane].get(family)
            if address is None:
                continue
            if address in seen:
                other_host, other_plane = seen[address]
                key = dict((f, k) for f, _v, k in FAMILIES)[family]
                raise FailoverAddressError("%s: %s is also the failover address of host %s on plane %r; every "
                                           "host and plane needs its own" % (
                                               _entry_option(host, planes[host][plane][0], key), address,
                                               other_host, other_plane))
            seen[address] = (host, plane)


def routed(planes_by_host, prefixes) -> bool:
    """Whether the fabric has failover addresses: prefixes, or an address given in a plane entry."""
    return bool(prefixes) or any(isinstance(plane, Mapping) and (plane.get("failover4") or plane.get("failover6"))
                                 for planes in planes_by_host.values() for plane in planes or [])


def peer_entries(planes_by_host, failover_planes_by_host, prefixes) -> tuple:
    """({host: [plane entry]}, error) of every host with planes, as the peer table takes them: name,
    the native addresses declared, and the failover addresses allocated (None where there are none).

    The allocation runs over `failover_planes_by_host` (the failover group) and only on a routed
    fabric. It is group-wide, so one host's bad declaration fails it for all: then `error` says
    why (naming the host and option) and the entries carry no failover addresses, so that each
    host's own validation can still name its own mistakes first."""
    with_planes = {host: planes for host, planes in failover_planes_by_host.items() if planes}  # bond-only hosts have none
    allocated, error = {}, ""
    if routed(with_planes, prefixes):
        try:
            allocated = plan(with_planes, prefixes)
        except FailoverAddressError as e:
            error = str(e)
    table = {}
    for host, planes in sorted(planes_by_host.items()):
        entries = []
        for plane in planes or []:
            if not isinstance(plane, Mapping) or "name" not in plane:
                continue  # refused by the host's own validation, which names the entry
            entry = {"name": plane["name"]}
            entry.update({family: plane[family] for family in ("ipv4", "ipv6") if plane.get(family) is not None})
            found = allocated.get(host, {}).get(plane["name"], {})
            entry.update(failover4=found.get("ipv4"), failover6=found.get("ipv6"))
            entries.append(entry)
        if entries:
            table[host] = entries
    return table, error
