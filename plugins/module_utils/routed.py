# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Routed planes in the peer table: which failover address stands for which
native address (edgeft_fo_v1 / edgeft_xlat_v1, bpf/edgeft_xlat.h).

A plane on which this host has a failover address is routed: traffic steered
onto it is translated. With two planes, a host's failover address on plane t
stands for its native address of the same family on the other plane; the
data path needs both ends' (ours and the peer's) to translate a packet.
"""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError

FAILOVER_KEYS = (("failover4", "ipv4", 4), ("failover6", "ipv6", 6))


def _other(index: int) -> int:
    return 1 - index


def desired_failovers(plane_params, planes, peer_params, desired, host_address) -> tuple:
    """(routed plane indexes, {(native address, plane index): (failover address, local)}).

    plane_params / peer_params: the module's planes and peers options as given;
    planes / desired: their normalized forms (same order). host_address: the
    peer table's address check, (value, where, family) -> address text.
    """
    want, owners = {}, {}

    def claim(failover, where):
        if failover in owners:
            raise OptionError("%s: failover address %s is already declared at %s" % (where, failover, owners[failover]))
        owners[failover] = where

    routed = set()
    for plane, given in zip(planes, plane_params or []):
        if any(given.get(key) for key, _native, _family in FAILOVER_KEYS):
            routed.add(plane["index"])
    if not routed:
        for i, peer in enumerate(peer_params or []):
            for j, pplane in enumerate(peer.get("planes") or []):
                if any(pplane.get(key) for key, _native, _family in FAILOVER_KEYS):
                    raise OptionError("peers[%d].planes[%d]: the peer has failover addresses but no plane of this host "
                                      "has one: give this host's failover4/failover6 on its routed planes too"
                                      % (i, j))
        return routed, want
    if len(planes) != 2:
        raise OptionError("planes: failover addresses (routed planes) need exactly two planes, %d are declared: a "
                          "failover address stands for the native address on the other plane" % len(planes))

    for plane, given in zip(planes, plane_params):
        index, where = plane["index"], plane["where"]
        native_params = plane_params[_other(index)]
        for key, native_key, family in FAILOVER_KEYS:
            if not given.get(key):
                continue
            failover = host_address(given[key], "%s.%s" % (where, key), family)
            if not native_params.get(native_key):
                raise OptionError("%s.%s: this host's failover address on plane %s stands for its %s address on "
                                  "plane %s, which planes[%d].%s does not give" % (
                                      where, key, plane["name"], native_key, planes[_other(index)]["name"],
                                      _other(index), native_key))
            native = host_address(native_params[native_key], "planes[%d].%s" % (_other(index), native_key), family)
            claim(failover, "%s.%s" % (where, key))
            want[(native, index)] = (failover, True)

    names = {p["name"]: p["index"] for p in planes}
    for peer, given in zip(desired, peer_params or []):
        for j, pplane in enumerate(given.get("planes") or []):
            index = names[pplane["name"]]
            pwhere = "%s.planes[%d]" % (peer["where"], j)
            for key, native_key, family in FAILOVER_KEYS:
                if not pplane.get(key):
                    continue
                awhere = "%s.%s" % (pwhere, key)
                failover = host_address(pplane[key], awhere, family)
                if index not in routed:
                    raise OptionError("%s: plane %s is not routed on this host (no failover4/failover6 of its own "
                                      "there): give this host's failover addresses on plane %s too" % (
                                          awhere, pplane["name"], pplane["name"]))
                native = peer["hops"].get(_other(index), {}).get(family)
                if native is None:
                    raise OptionError("%s: the peer's failover address on plane %s stands for its %s address on "
                                      "the other plane, which the peer does not declare" % (awhere, pplane["name"], native_key))
                claim(failover, awhere)
                want[(native, index)] = (failover, False)
    natives = {native for native, _plane in want} | {a for p in desired for a in p["keys"]}
    for failover, where in owners.items():
        if failover in natives:
            raise OptionError("%s: %s is also a native or identity address; a failover address must be an address "
                              "of its own" % (where, failover))
    return routed, want


def plan_failovers(current: dict, want: dict) -> tuple:
    """(puts [(native, plane, failover, local)], deletes [(native, plane)]) that make current match want."""
    puts = sorted((native, plane) + value for (native, plane), value in want.items() if current.get((native, plane)) != value)
    deletes = sorted(key for key in current if key not in want)
    return puts, deletes
