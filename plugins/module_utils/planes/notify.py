# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An ICMP echo request to the peers on a plane whose state changed: they learn or forget at once."""

from __future__ import annotations

import os
import socket

from ansible_collections.edgeft.failover.plugins.module_utils.fabric import icmp

NOTIFY_PAYLOAD = b"edgeft plane change"


def peer_targets(maps, index, peer_ids=None):
    """(peer id, family, address) of every peer (or each of peer_ids) on plane
    `index`: its IPv4 address there, else its IPv6 one; peers with neither are
    left out. One address is enough: a peer's steering state covers all of ours."""
    for peer_id in maps.peer_ids() if peer_ids is None else peer_ids:
        peer = maps.get_peer(peer_id)
        if peer is None:
            continue
        family, addr = (4, peer["v4"][index]) if peer["v4"][index] else (6, peer["v6"][index])
        if addr:
            yield peer_id, family, addr


def plane_ifname(maps, index):
    """The plane's NIC name, None when its ifindex does not exist here."""
    try:
        return socket.if_indextoname(maps.planes.get(index).ifindex)
    except OSError:
        return None


def echo_socket(family, ifname):
    """A raw ICMP socket bound to the plane's NIC: what it sends leaves through the plane's
    egress program, which steers it like any packet of ours."""
    af, proto = (socket.AF_INET, socket.IPPROTO_ICMP) if family == 4 else (socket.AF_INET6, socket.IPPROTO_ICMPV6)
    s = socket.socket(af, socket.SOCK_RAW | socket.SOCK_CLOEXEC, proto)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, ifname.encode())
    except OSError:
        s.close()
        raise
    return s


def notify_peers(maps, index, peer_ids=None):
    """One ICMP echo request to every peer's (or each of peer_ids') address on
    plane `index`, sent on its NIC.

    The egress program handles it like any packet: steered off a drained
    plane or a plane down for the peer (the peer learns at once), native after
    an undrain (the peer forgets). Peers that exchange no traffic with us move
    too. Returns (sent, warnings); failures never fail the task.
    """
    ifname = plane_ifname(maps, index)
    if ifname is None:
        return 0, ["notify_peers: plane %d's ifindex %d does not exist here; no peer notified"
                   % (index, maps.planes.get(index).ifindex)]
    socks, sent, errors = {}, 0, []
    try:
        for peer_id, family, addr in peer_targets(maps, index, peer_ids):
            try:
                if family not in socks:
                    socks[family] = echo_socket(family, ifname)
                socks[family].sendto(icmp.echo_request(family, os.getpid(), peer_id, NOTIFY_PAYLOAD), (addr, 0))
                sent += 1
            except OSError as e:
                errors.append("notify_peers: echo request to %s on %s failed: %s" % (addr, ifname, e))
    finally:
        for s in socks.values():
            s.close()
    return sent, errors[:5]
