"""Kernel backup routes: what a plain dual-homed Linux host can do without edgeft.

A baseline for the failover benchmark. On each host, for every other host's address on the
primary plane (IPv4 /32, IPv6 /128):

    198.18.2.11 dev fab0 proto 239 metric 100                                       # primary
    198.18.2.11 via 198.19.2.11 dev fab1 proto 239 metric 200 onlink src 198.18.1.11  # backup

plus `ignore_routes_with_linkdown=1` on both plane NICs, so the kernel skips the primary
route while fab0 has no carrier and takes the backup one, with no daemon involved. The
backup route goes via the peer's address on the backup plane, as the agent's do: the peer
answers ARP on fab1 for its fab0 address (arp_ignore 0), but Linux answers an IPv6 neighbour
solicitation only for addresses of the interface it arrived on, so an on-link route straight
to the peer's plane-a address would never resolve over IPv6. The peer accepts a packet for its
plane-a address arriving on fab1 (weak host model) as long as rp_filter is not strict; where
it is, the NIC's is made loose (2).

No carrier is all the kernel sees: a silent switch, a failure at the far end or on the peer's
side leaves the primary route in place and the traffic lost.
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Iterable

from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl.rtmsg import RTNH_F_ONLINK

from . import netns
from .errors import LabError
from .lab import Lab

PROTO = 239  # marks the routes this module installs (the agent's are 237)
PRIMARY_METRIC = 100
BACKUP_METRIC = 200
CHECK_PORT = 7599
CHECK_TIMEOUT = 3.0


class BackupRoutes:
    """Backup routes between `hosts` (default: every host of the lab) from plane `primary` to `backup`.

    install() is idempotent: run again after a repair it restores the routes the kernel removed
    with a NIC that went admin-down, as a server's network configuration would.
    """

    def __init__(self, lab: Lab, hosts: Iterable[str] | None = None, primary: str | None = None, backup: str | None = None):
        planes = [p.name for p in lab.topology.planes]
        self.lab = lab
        self.hosts = list(hosts or [h.name for h in lab.plan.hosts])
        self.primary = primary or planes[0]
        self.backup = backup or planes[1]
        self.saved: dict[str, dict[str, str]] = {}  # host -> sysctl -> value before install()

    def _port(self, host: str, plane: str):
        return self.lab.plan.host(host).port(plane)

    def _sysctls(self, host: str) -> dict[str, str]:
        """The sysctls install() wants on host: linkdown routes ignored, rp_filter not strict."""
        ns = self.lab.netns(host)
        wanted = {}
        for plane in (self.primary, self.backup):
            nic = self._port(host, plane).ifname
            wanted["net.ipv4.conf.%s.ignore_routes_with_linkdown" % nic] = "1"
            wanted["net.ipv6.conf.%s.ignore_routes_with_linkdown" % nic] = "1"
            # The effective rp_filter is the larger of "all" and the NIC's: 1 (strict) would drop
            # a packet for our plane-a address arriving on fab1.
            mode = max(int(netns.read_sysctl(ns, "net.ipv4.conf.all.rp_filter")),
                       int(netns.read_sysctl(ns, "net.ipv4.conf.%s.rp_filter" % nic)))
            if mode == 1:
                wanted["net.ipv4.conf.%s.rp_filter" % nic] = "2"
        return wanted

    def routes(self, host: str) -> list[dict]:
        """The routes of `host`, as pyroute2 route arguments."""
        out = []
        for peer in self.hosts:
            if peer == host:
                continue
            for family in (4, 6):
                out.extend(self._pair(host, peer, family))
        return out

    def _pair(self, host: str, peer: str, family: int) -> list[dict]:
        attr = "ipv4" if family == 4 else "ipv6"
        own = getattr(self._port(host, self.primary), attr).ip
        target = getattr(self._port(peer, self.primary), attr).ip
        via = getattr(self._port(peer, self.backup), attr).ip
        common = {"family": socket.AF_INET if family == 4 else socket.AF_INET6, "dst": str(target),
                  "dst_len": target.max_prefixlen, "proto": PROTO}
        return [
            dict(common, oif=self._port(host, self.primary).ifname, priority=PRIMARY_METRIC),
            dict(common, oif=self._port(host, self.backup).ifname, priority=BACKUP_METRIC, gateway=str(via),
                 flags=RTNH_F_ONLINK, prefsrc=str(own)),
        ]

    def install(self) -> None:
        for host in self.hosts:
            ns = self.lab.netns(host)
            wanted = self._sysctls(host)
            saved = self.saved.setdefault(host, {})
            for key in wanted:
                saved.setdefault(key, netns.read_sysctl(ns, key))
            netns.write_sysctls(ns, wanted)
            with self.lab.ipr(host) as ipr:
                for route in self.routes(host):
                    spec = dict(route, oif=ipr.link_lookup(ifname=route["oif"])[0])
                    ipr.route("replace", **spec)

    def remove(self) -> None:
        """Delete every route of this module (proto 239) and put the sysctls back."""
        for host in self.hosts:
            ns = self.lab.netns(host)
            with self.lab.ipr(host) as ipr:
                for family in (socket.AF_INET, socket.AF_INET6):
                    for route in ipr.get_routes(family=family, proto=PROTO):
                        try:
                            ipr.route("del", family=family, dst=route.get_attr("RTA_DST"), dst_len=route["dst_len"],
                                      oif=route.get_attr("RTA_OIF"), priority=route.get_attr("RTA_PRIORITY"), proto=PROTO)
                        except NetlinkError as e:
                            if e.code != errno.ESRCH:
                                raise
            if self.saved.get(host):
                netns.write_sysctls(ns, self.saved.pop(host))

    def check(self, family: int = 4) -> None:
        """Send one datagram from each host over the backup NIC to every other host's primary address.

        Proves the backup routes carry traffic end to end (neighbour resolution, the peer accepting
        its primary address on the backup NIC) before anything is measured; LabError if not.
        """
        for host in self.hosts:
            for peer in self.hosts:
                if peer != host:
                    self._check_one(host, peer, family)

    def _check_one(self, host: str, peer: str, family: int) -> None:
        af = socket.AF_INET if family == 4 else socket.AF_INET6
        target = str(getattr(self._port(peer, self.primary), "ipv4" if family == 4 else "ipv6").ip)
        nic = self._port(host, self.backup).ifname
        rx = self.lab.socket(peer, af, socket.SOCK_DGRAM)
        tx = self.lab.socket(host, af, socket.SOCK_DGRAM)
        try:
            rx.bind((target, CHECK_PORT))
            rx.settimeout(0.2)
            # Bound to the backup NIC, the sender can only use the backup route.
            tx.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, nic.encode())
            deadline = time.monotonic() + CHECK_TIMEOUT
            while time.monotonic() < deadline:
                tx.sendto(b"edgeft-lab backup route check", (target, CHECK_PORT))
                try:
                    rx.recvfrom(64)
                    return
                except socket.timeout:
                    continue
        finally:
            rx.close()
            tx.close()
        raise LabError("backup route %s -> %s over %s (IPv%d) carries nothing within %.0f s"
                       % (host, target, nic, family, CHECK_TIMEOUT))


def install(lab: Lab, hosts: Iterable[str] | None = None, primary: str | None = None, backup: str | None = None) -> BackupRoutes:
    """Install backup routes (see the module's docstring); returns the handle remove() takes."""
    routes = BackupRoutes(lab, hosts, primary, backup)
    routes.install()
    return routes


def remove(routes: BackupRoutes) -> None:
    routes.remove()
