# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A plane NIC as the kernel shows it, read with pyroute2 in the caller's namespace."""

from __future__ import annotations

import ipaddress
import socket

from ansible_collections.edgeft.failover.plugins.module_utils import netlink
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError

IFF_UP = 0x1
COUNTERS = ("rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "rx_dropped", "tx_dropped", "rx_errors", "tx_errors")
RT_SCOPE_UNIVERSE = 0
# Not usable as a source: still in duplicate address detection, or failed it.
IFA_F_DADFAILED, IFA_F_DEPRECATED, IFA_F_TENTATIVE = 0x08, 0x20, 0x40


def addresses(ifindex, error) -> dict:
    """{4: [ip_interface], 6: [...]}: the NIC's global addresses usable as a source, the
    widest prefix first: a routed plane's failover address (IPv4 /32, IPv6 /128 and
    deprecated) stands for another plane's address and is never a plane's own source.

    error: the caller's error class, raised with "plane: ..." when netlink fails.
    """
    netlink.require(error)
    try:
        with netlink.IPRoute() as ipr:
            msgs = list(ipr.get_addr(index=ifindex))
    except (netlink.NetlinkError, OSError) as e:
        raise error("plane: cannot read the addresses of ifindex %d: %s" % (ifindex, e)) from None
    out = {4: [], 6: []}
    for msg in msgs:
        if msg["scope"] != RT_SCOPE_UNIVERSE:
            continue
        flags = msg.get_attr("IFA_FLAGS")
        flags = msg["flags"] if flags is None else flags
        if flags & (IFA_F_TENTATIVE | IFA_F_DADFAILED | IFA_F_DEPRECATED):
            continue
        if msg["family"] == socket.AF_INET:
            addr, family = msg.get_attr("IFA_LOCAL") or msg.get_attr("IFA_ADDRESS"), 4
        elif msg["family"] == socket.AF_INET6:
            addr, family = msg.get_attr("IFA_ADDRESS"), 6
        else:
            continue
        if addr:
            out[family].append(ipaddress.ip_interface("%s/%d" % (addr, msg["prefixlen"])))
    for found in out.values():
        found.sort(key=lambda iface: iface.network.prefixlen)
    return out


def stats(ifindexes, warnings=None) -> dict:
    """ifindex -> the NIC's kernel counters (IFLA_STATS64) and carrier, or None when it is gone.

    Without pyroute2 or netlink every NIC is None (and warnings, if given, says why).
    """
    wanted = [i for i in ifindexes if i]
    out = dict.fromkeys(ifindexes)
    if not wanted:
        return out
    if not netlink.HAS_PYROUTE2:
        if warnings is not None:
            warnings.append("pyroute2 is missing on the target (%s): the planes' nic counters are not reported; "
                            "install python3-pyroute2" % netlink.PYROUTE2_IMPORT_ERROR)
        return out
    try:
        ipr = netlink.IPRoute()
    except OSError as e:
        if warnings is not None:
            warnings.append("cannot open a netlink socket (%s): the planes' nic counters are not reported" % e)
        return out
    with ipr:
        for ifindex in wanted:
            try:
                (msg,) = ipr.get_links(ifindex)
            except (netlink.NetlinkError, ValueError):
                continue  # ENODEV: the NIC is gone
            counters = msg.get_attr("IFLA_STATS64") or msg.get_attr("IFLA_STATS")
            nic = {k: (counters[k] if counters is not None else None) for k in COUNTERS}
            carrier = msg.get_attr("IFLA_CARRIER")
            nic["carrier"] = bool(carrier) if carrier is not None else msg.get_attr("IFLA_OPERSTATE") == "UP"
            out[ifindex] = nic
    return out


def links(ipr) -> dict:
    """The host's links, the one reading of them every core uses: ifname -> {ifindex, kind,
    master (ifname or None), up (admin), carrier, operstate, mac, mtu, min_mtu, max_mtu,
    addresses (ip_interface strings, IPv6 link-local included), info_data (a bond's
    IFLA_INFO_DATA attributes, else None)}."""
    by_index, out = {}, {}
    for msg in ipr.get_links():
        name = msg.get_attr("IFLA_IFNAME")
        info = msg.get_attr("IFLA_LINKINFO")
        kind = info.get_attr("IFLA_INFO_KIND") if info is not None else None
        data = info.get_attr("IFLA_INFO_DATA") if info is not None else None
        by_index[msg["index"]] = name
        out[name] = {
            "ifindex": msg["index"], "kind": kind, "master": msg.get_attr("IFLA_MASTER"),
            "up": bool(msg["flags"] & IFF_UP), "carrier": bool(msg.get_attr("IFLA_CARRIER")),
            "operstate": msg.get_attr("IFLA_OPERSTATE"), "mac": msg.get_attr("IFLA_ADDRESS"),
            "mtu": msg.get_attr("IFLA_MTU"), "min_mtu": msg.get_attr("IFLA_MIN_MTU"),
            "max_mtu": msg.get_attr("IFLA_MAX_MTU"), "addresses": [],
            "info_data": dict(data["attrs"]) if data is not None and kind == "bond" else None,
        }
    for entry in out.values():
        entry["master"] = by_index.get(entry["master"]) if entry["master"] else None
    for msg in ipr.get_addr():
        name = by_index.get(msg["index"])
        # IPv4: IFA_LOCAL is the host's own address (IFA_ADDRESS is the far end on a point-to-point link).
        addr = msg.get_attr("IFA_LOCAL") if msg["family"] == socket.AF_INET else None
        addr = addr or msg.get_attr("IFA_ADDRESS")
        if name in out and addr:
            out[name]["addresses"].append("%s/%d" % (addr, msg["prefixlen"]))
    return out


class HostReadError(EdgeftError, RuntimeError):
    """The host's links cannot be read (no pyroute2, no netlink)."""


def read_links(error=HostReadError) -> dict:
    """links() on a netlink socket of its own; `error` (the caller's class) when it cannot be read."""
    try:
        with netlink.open_ipr(error) as ipr:
            return links(ipr)
    except (netlink.NetlinkError, OSError) as e:
        raise error("cannot read the host's links over netlink: %s" % e) from None
