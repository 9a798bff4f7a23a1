# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The peer_table module's options, and the validation of the declared peers (pure)."""

from __future__ import annotations

import ipaddress

from ansible_collections.edgeft.failover.plugins.module_utils import constants
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import addresses, layout
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError


FAMILIES = (("ipv4", 4), ("ipv6", 6))


def host_address(value, where, family=None) -> str:
    """The host address of '198.18.1.12' or '198.18.1.12/16', checked usable as a peer key."""
    text = str(value).strip()
    try:
        iface = ipaddress.ip_interface(text)
    except ValueError:
        raise OptionError("%s: %r is not an IP address (with or without a /prefix)" % (where, value)) from None
    a = iface.ip
    if family is not None and a.version != family:
        raise OptionError("%s: %s is not an IPv%d address" % (where, a, family))
    if a.version == 6 and a.ipv4_mapped is not None:
        raise OptionError("%s: %s is IPv4-mapped; give the IPv4 address as ipv4" % (where, a))
    if "/" in text and iface.network.prefixlen < a.max_prefixlen - 1 and a == iface.network.network_address:
        raise OptionError("%s: %s is the network address of %s, not a host address" % (where, a, iface.network))
    try:
        addresses.parse_peer_address(str(a))
    except ValueError as e:
        raise OptionError("%s: %s" % (where, e)) from None
    return str(a)


def own_addresses(planes, links) -> dict:
    """address -> where this host has it: its plane declaration first, then every NIC (links as
    host/nics.links reads them)."""
    own = {}
    for plane in planes:
        for key, _family in FAMILIES:
            if plane.get(key) is not None:
                own.setdefault(str(plane[key].ip), "this host's own address, %s.%s" % (plane["where"], key))
    for ifname, link in sorted((links or {}).items()):
        for cidr in link.get("addresses", ()):
            own.setdefault(str(ipaddress.ip_interface(cidr).ip), "an address of this host, on %s" % ifname)
    return own


def normalize_peers(peers, planes, option="peers", own=None, host_name=None) -> list:
    """Validate the declared peers against the local planes; `own` (own_addresses()) and
    `host_name` (this host's inventory name) keep the host out of its own peers.

    Returns [{name, where, hops: {plane: {4: addr, 6: addr}}, keys: {addr: plane}, flags}].
    """
    if peers is None:
        peers = []
    if not isinstance(peers, list):
        raise OptionError("%s: expected a list of peers" % option)
    by_name = {p["name"]: p["index"] for p in planes}
    known = ", ".join(by_name)
    used, names, out = {}, {}, []

    def claim(addr, where):
        if addr in (own or {}):
            raise OptionError("%s: %s is %s; a host is not its own peer: leave it out of the peers"
                              % (where, addr, own[addr]))
        if addr in used:
            raise OptionError("%s: %s is already declared at %s" % (where, addr, used[addr]))
        used[addr] = where

    for i, peer in enumerate(peers):
        where = "%s[%d]" % (option, i)
        if not isinstance(peer, dict):
            raise OptionError("%s: expected a dict with name and planes, got %r" % (where, peer))
        name = peer.get("name")
        if not name:
            raise OptionError("%s.name: a peer name is required" % where)
        name = str(name)
        if host_name and name == str(host_name):
            raise OptionError("%s.name: %r is this host (host_name); a host is not its own peer: leave it out of the "
                              "peers" % (where, name))
        if name in names:
            raise OptionError("%s.name: peer %r is already declared at %s" % (where, name, names[name]))
        names[name] = where
        hops, keys, seen_planes = {}, {}, {}
        for j, plane in enumerate(peer.get("planes") or []):
            pwhere = "%s.planes[%d]" % (where, j)
            if not isinstance(plane, dict):
                raise OptionError("%s: expected a dict with name, ipv4 and ipv6, got %r" % (pwhere, plane))
            pname = plane.get("name")
            if pname not in by_name:
                raise OptionError("%s.name: %r is not one of this host's planes (%s); a peer's planes must match "
                                  "the planes option" % (pwhere, pname, known))
            if pname in seen_planes:
                raise OptionError("%s.name: plane %r is already listed at %s" % (pwhere, pname, seen_planes[pname]))
            seen_planes[pname] = pwhere
            index = by_name[pname]
            for key, family in FAMILIES:
                if plane.get(key) in (None, ""):
                    continue
                awhere = "%s.%s" % (pwhere, key)
                addr = host_address(plane[key], awhere, family)
                claim(addr, awhere)
                hops.setdefault(index, {})[family] = addr
                keys[addr] = index
        if not hops:
            raise OptionError("%s.planes: peer %r has no address on any plane (the next hop of steering)" % (where, name))
        for j, value in enumerate(peer.get("identity") or []):
            iwhere = "%s.identity[%d]" % (where, j)
            addr = host_address(value, iwhere)
            claim(addr, iwhere)
            keys[addr] = layout.PLANE_NONE
        learn = peer.get("learn", True)
        out.append({
            "name": name,
            "where": where,
            "hops": hops,
            "keys": keys,
            "flags": 0 if learn in (None, True) else layout.PEER_NO_LEARN,
        })
    return out


# The module's argument spec, here so that restore.py fills the same defaults.
ARGUMENT_SPEC = dict(
    pin_root=dict(type='path', required=True),
    planes=dict(type='list', elements='dict', required=True, options=dict(
        name=dict(type='str', required=True),
        interface=dict(type='str', required=True),
        ipv4=dict(type='str'),
        ipv6=dict(type='str'),
        failover4=dict(type='str'),
        failover6=dict(type='str'),
    )),
    peers=dict(type='list', elements='dict', required=True, options=dict(
        name=dict(type='str', required=True),
        planes=dict(type='list', elements='dict', required=True, options=dict(
            name=dict(type='str', required=True),
            ipv4=dict(type='str'),
            ipv6=dict(type='str'),
            failover4=dict(type='str'),
            failover6=dict(type='str'),
        )),
        identity=dict(type='list', elements='str', default=[]),
        learn=dict(type='bool', default=True),
    )),
    neighbors=dict(type='bool', default=True),
    neighbor_limits=dict(type='str', choices=['grow', 'keep'], default='grow'),
    max_peers=dict(type='int'),
    host_name=dict(type='str'),
    state_dir=dict(type='path', default=constants.STATE_DIR),
)
