# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Routes of a drained plane: the peers' addresses on it, via another plane.

A drained plane must carry nothing, also when its switch is then powered
off. Steering in tc egress is not enough for that: at carrier loss the kernel
skips the plane's connected route (ignore_routes_with_linkdown) and sockets
get ENETUNREACH before any tc hook; at carrier return the neighbour entries
start empty and packets queue for ARP/ND. So a drain also puts every peer's
address on the plane into the agent's held table (fabric/routes.py: the same
table, rules and route form the agent uses for a plane it judges down), and
the undrain takes them out again - unless the agent judges the plane down
(its UP flag is clear), when they are the agent's to remove at its failback.
"""

from __future__ import annotations

import socket

from ansible_collections.edgeft.failover.plugins.module_utils import constants
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import iproute, layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.iproute import IpCommandError
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.fabric import routes
from ansible_collections.edgeft.failover.plugins.module_utils.host import nics

# The agent's defaults (agent/config.py): a drain uses the tables and rules the agent uses.
TABLE = constants.BACKUP_TABLE
PRIORITY = constants.BACKUP_RULE_PRIORITY


class DrainRoutesError(EdgeftError, RuntimeError):
    pass


def plane_specs(planes) -> list:
    """The configured planes (maps' plane values by index) with NIC name, own addresses and prefixes."""
    out = []
    for index, p in enumerate(planes):
        if not p.ifindex:
            continue
        try:
            ifname = socket.if_indextoname(p.ifindex)
            have = nics.addresses(p.ifindex, DrainRoutesError)
        except (OSError, DrainRoutesError):
            continue  # a NIC that is gone carries nothing and routes nothing
        spec = {"index": index, "interface": ifname, "prefixes": {}, "gateway": {}}
        for family in (4, 6):
            if have[family]:
                spec[family] = str(have[family][0].ip)
                spec["prefixes"][family] = have[family][0].network
            if p.flags & layout.PLANE_ROUTED:
                spec["gateway"][family] = default_gateway(ifname, family)
        out.append(spec)
    return out


def default_gateway(ifname, family):
    """A routed plane's first hop: the gateway of a default route through its NIC, in any
    table (the multihome role puts one in the plane's own); None without one."""
    try:
        found = iproute.run(["-%d" % family, "route", "show", "default", "dev", ifname, "table", "all"], json_out=True)
    except IpCommandError:
        return None
    return next((r["gateway"] for r in found if r.get("gateway")), None)


def wanted(maps, planes, index) -> dict:
    """{(family, dst): (gateway, device, source, plane)} for every peer address on plane `index`."""
    specs = plane_specs(planes)
    usable = [s for s in specs if s["index"] == index or (planes[s["index"]].flags & (layout.PLANE_UP | layout.PLANE_DRAINED))
              == layout.PLANE_UP]
    peers = {pid: maps.get_peer(pid) for pid in maps.peer_ids()}
    prefixes = {(s["index"], f): net for s in usable for f, net in s["prefixes"].items()}
    routed = {s["index"] for s in usable if planes[s["index"]].flags & layout.PLANE_ROUTED}
    return {k: v for k, v in routes.desired({k: p for k, p in peers.items() if p}, usable, prefixes, routed).items()
            if v[3] == index}


def hold(want: dict, table=TABLE, priority=PRIORITY) -> list:
    """Put the routes into the held table (rules added where missing); the error lines."""
    if not want:
        return []
    try:
        routes.ensure_rules(table, priority)
    except IpCommandError as e:
        raise DrainRoutesError(str(e)) from None
    commands = []
    for (family, dst), (gateway, dev, source, _plane) in sorted(want.items()):
        # The drained plane's own address as source, also for IPv6 (the agent cannot set it when
        # the NIC is down; at a drain it is up): new connections keep the host's identity there.
        commands.append(["-%d" % family, "route", "replace", dst, "via", gateway, "dev", dev, "onlink", "src", source,
                         "table", str(table + 1), "proto", routes.PROTO])
    return routes.batch(commands)


def release(want: dict, table=TABLE) -> list:
    """Take the routes out of the held table; the error lines (a route already gone is fine)."""
    commands = [["-%d" % family, "route", "del", dst, "table", str(table + 1)] for family, dst in sorted(want)]
    return [e for e in routes.batch(commands) if "No such process" not in e]
