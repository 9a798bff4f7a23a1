# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An ICMP echo request to the peers on a plane whose state changed: they learn or forget at once."""

from __future__ import annotations

import os
import socket

from ansible_collections.edgeft.failover.plugins.module_utils.fabric import icmp

NOTIFY_PAYLOAD = b"edgeft plane change"


def notify_peers(maps, index, peer_ids=None):
    """One ICMP echo request to every peer's (or each of peer_ids') address on
    plane `index`, sent on its NIC.

    The egress program handles it like any packet: steered off a drained
    plane or a plane down for the peer (the peer learns at once), native after
    an undrain (the peer forgets). Peers that exchange no traffic with us move
    too. Returns (sent, warnings); failures never fail the task.
    """
    plane = maps.planes.get(index)
    try:
        ifname = socket.if_indextoname(plane.ifindex)
    except OSError:
        return 0, ["notify_peers: plane %d's ifindex %d does not exist here; no peer notified" % (index, plane.ifindex)]
    socks, sent, errors = {}, 0, []
    try:
        for peer_id in maps.peer_ids() if peer_ids is None else peer_ids:
            peer = maps.get_peer(peer_id)
            if peer is None:
                continue
            family, addr = (4, peer["v4"][index]) if peer["v4"][index] else (6, peer["v6"][index])
            if not addr:
                continue
            try:
                if family not in socks:
                    af, proto = (socket.AF_INET, socket.IPPROTO_ICMP) if family == 4 else (socket.AF_INET6, socket.IPPROTO_ICMPV6)
                    s = socket.socket(af, socket.SOCK_RAW, proto)
                    socks[family] = s
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, ifname.encode())
                socks[family].sendto(icmp.echo_request(family, os.getpid(), peer_id, NOTIFY_PAYLOAD), (addr, 0))
                sent += 1
            except OSError as e:
                errors.append("notify_peers: echo request to %s on %s failed: %s" % (addr, ifname, e))
    finally:
        for s in socks.values():
            s.close()
    return sent, errors[:5]
