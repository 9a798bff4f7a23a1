# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start-up checks against the host: interfaces, addresses, pinned maps.

A problem found here stops the agent before it changes anything, with one
line naming the option (ConfigError, exit code 2).
"""

from __future__ import annotations

import ipaddress
import os
import socket

from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import ConfigError
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import iproute, layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import DatapathMaps


def interface_addresses(ifname: str) -> dict:
    """{4: [ip_interface], 6: [...]} of the NIC's global addresses."""
    out = {4: [], 6: []}
    for link in iproute.run(["addr", "show", "dev", ifname], json_out=True):
        for a in link.get("addr_info", []):
            if a.get("scope") != "global":
                continue
            iface = ipaddress.ip_interface("%s/%s" % (a["local"], a["prefixlen"]))
            out[iface.version].append(iface)
    return out


def interface_indexes(cfg) -> dict:
    """{plane index: ifindex}; refuses a plane whose NIC does not exist here."""
    out = {}
    for p in cfg.planes:
        try:
            out[p["index"]] = socket.if_nametoindex(p["interface"])
        except OSError:
            raise ConfigError("planes[%d].interface: no interface %r in this network namespace"
                              % (p["index"], p["interface"])) from None
    return out


def resolve_planes(cfg, log) -> list:
    """The configured planes with ifindex, own addresses and on-link prefixes.

    An address the config names must be the plane's; one it leaves out is
    taken from the NIC. A configured address missing from the NIC is only a
    warning: without keep_addr_on_down a NIC that is down has lost its IPv6
    addresses, and the agent must start while a link is down.
    """
    out = []
    indexes = interface_indexes(cfg)
    for p in cfg.planes:
        where = "planes[%d].interface" % p["index"]
        ifindex = indexes[p["index"]]
        try:
            have = interface_addresses(p["interface"])
        except DatapathError as e:
            raise ConfigError("%s: cannot read the addresses of %s: %s" % (where, p["interface"], e)) from None
        plane = dict(p, ifindex=ifindex, prefixes={})
        for family in (4, 6):
            mine = {str(i.ip): i for i in have[family]}
            if plane.get(family) is None and have[family]:
                plane[family] = str(have[family][0].ip)
            addr = plane.get(family)
            if addr is None:
                continue
            if addr in mine:
                plane["prefixes"][family] = mine[addr].network
            else:
                log.warning("planes[%d].ipv%d: %s is not (now) an address of %s; probing from it anyway",
                            p["index"], family, addr, p["interface"])
        if plane.get(4) is None and plane.get(6) is None:
            raise ConfigError("planes[%d]: no IPv4 or IPv6 address on %s to probe from (set ipv4/ipv6)" % (p["index"], p["interface"]))
        out.append(plane)
    return out


def open_maps(cfg) -> DatapathMaps:
    missing = [m.name for m in layout.REQUIRED_MAPS if not os.path.exists(os.path.join(cfg.pin_root, m.name))]
    if missing:
        raise ConfigError("pin_root: %s has no pinned edgeft maps (%s missing): attach the data path first "
                          "(role edgeft.failover.ebpf_failover)" % (cfg.pin_root, missing[0]))
    try:
        return DatapathMaps.open_pinned(cfg.pin_root)
    except (DatapathError, OSError) as e:
        raise ConfigError("pin_root: cannot open the maps pinned under %s: %s" % (cfg.pin_root, e)) from None


def check_plane_slots(planes, maps) -> None:
    """Each configured plane must be the data path's plane of the same index."""
    for p in planes:
        slot = maps.planes.get(p["index"])
        where = "planes[%d].interface" % p["index"]
        if not slot.ifindex:
            raise ConfigError("%s: the data path has no plane %d configured: fill the peer table first "
                              "(module edgeft.failover.peer_table)" % (where, p["index"]))
        if slot.ifindex != p["ifindex"]:
            raise ConfigError("%s: %s is ifindex %d, but the data path's plane %d is ifindex %d: the agent's planes "
                              "must be the peer table's, in the same order" % (where, p["interface"], p["ifindex"], p["index"], slot.ifindex))


def check_tcp(cfg) -> None:
    """With tcp enabled: the object is there, the cgroup is a cgroup v2 directory, and this kernel
    accepts the settings (its HZ bounds them). Attaching is still the agent's, at start: a failure
    there leaves it running without the program (tcp.py)."""
    tcp = cfg.tcp
    if not tcp["enabled"]:
        return
    from ansible_collections.edgeft.failover.plugins.module_utils.datapath import bpfsys, sockops

    if sockops.kernel_config("CONFIG_CGROUP_BPF").get("CONFIG_CGROUP_BPF", "y") != "y":
        raise ConfigError("tcp.enabled: this kernel was built without cgroup BPF programs (CONFIG_CGROUP_BPF): set it "
                          "false (role variable ebpf_failover_agent_tcp)")
    if not os.path.isfile(tcp["object"]):
        raise ConfigError("tcp.object: %s does not exist: the role installs it with the agent (object loader)" % tcp["object"])
    cgroup = sockops.resolve_cgroup(tcp["cgroup"])
    if cgroup is None or not os.path.isdir(cgroup) or not bpfsys.is_cgroup2(cgroup):
        raise ConfigError("tcp.cgroup: %s is not a directory of the cgroup v2 hierarchy (mounted at %s here)"
                          % (cgroup or tcp["cgroup"] or "the cgroup v2 root", sockops.cgroup2_root() or "nowhere"))
    settings = sockops.TcpSettings(tcp["rto_min_ms"] * 1000, tcp["delack_max_ms"] * 1000, 0)
    try:
        sockops.check_settings(settings, sockops.kernel_hz())
    except DatapathError as e:
        raise ConfigError(str(e)) from None
