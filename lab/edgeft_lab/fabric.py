"""Build and tear down a fabric plan with pyroute2 (no `ip` output parsing).

Each veth pair is created by a socket in the first end's namespace with its peer placed
directly in the other end's namespace, so no lab interface ever exists, even transiently,
in the machine's root namespace.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from ipaddress import IPv4Interface, IPv6Interface

from pyroute2 import IPRoute
from pyroute2.netlink import NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl import RTM_NEWLINK
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg

from . import netns
from .plan import Endpoint, FabricPlan, Host, Link, Route, Switch, is_vm_cable

# Addresses usable at once (no DAD), no autoconfiguration from stray RAs, and IPv6
# addresses kept when a link fault sets an interface down (IPv4 keeps them anyway).
BASE_SYSCTLS = {
    "net.ipv6.conf.all.accept_dad": "0",
    "net.ipv6.conf.default.accept_dad": "0",
    "net.ipv6.conf.all.keep_addr_on_down": "1",
    "net.ipv6.conf.default.keep_addr_on_down": "1",
    "net.ipv6.conf.all.accept_ra": "0",
    "net.ipv6.conf.default.accept_ra": "0",
}
ROUTER_SYSCTLS = {
    **BASE_SYSCTLS,
    "net.ipv4.ip_forward": "1",
    "net.ipv6.conf.all.forwarding": "1",
}
# An L2 switch has no IP presence: no link-local addresses, no RS/MLD chatter on the wire.
BRIDGE_SYSCTLS = {
    "net.ipv6.conf.all.disable_ipv6": "1",
    "net.ipv6.conf.default.disable_ipv6": "1",
}


READY_TIMEOUT = 5.0
IFA_F_TENTATIVE = 0x40
FIRST_VETH_INDEX = 10  # above lo (1) and anything the kernel numbers itself early


def sysctls_for(plan: FabricPlan, ns: str) -> dict[str, str]:
    for switch in plan.switches:
        if switch.netns == ns:
            return ROUTER_SYSCTLS if switch.routed else BRIDGE_SYSCTLS
    return BASE_SYSCTLS


def build(plan: FabricPlan, intend_namespace: Callable[[str], None]) -> None:
    """Create the whole fabric. On error the caller tears down (everything is intent-logged)."""
    sockets: dict[str, IPRoute] = {}
    try:
        for ns in plan.namespaces:
            intend_namespace(ns)  # recorded before it exists
            netns.create(ns)
            netns.write_sysctls(ns, sysctls_for(plan, ns))
            sockets[ns] = netns.iproute(ns)
        _FabricWriter(plan, sockets).write()
        wait_ready(plan, sockets)
    finally:
        for sock in sockets.values():
            sock.close()


def wait_ready(plan: FabricPlan, sockets: dict[str, IPRoute], timeout: float = READY_TIMEOUT) -> None:
    """Return once the fabric is usable: host NICs and routed switch interfaces operationally
    UP, and no address still tentative (the kernel finishes address setup asynchronously)."""
    must_be_up = {h.netns: {p.ifname for p in h.ports} for h in plan.hosts if h.netns}
    for switch in plan.switches:
        if switch.routed:
            must_be_up[switch.netns] = set(switch.ports) | {b.name for b in switch.bridges}
    deadline = time.monotonic() + timeout
    while True:
        pending = []
        for ns, sock in sockets.items():
            states = {link.get_attr("IFLA_IFNAME"): link.get_attr("IFLA_OPERSTATE") for link in sock.get_links()}
            pending += [f"{ns}:{name}" for name in must_be_up.get(ns, ()) if states.get(name) != "UP"]
            pending += [f"{ns}:{a.get_attr('IFA_ADDRESS')}" for a in sock.get_addr() if a["flags"] & IFA_F_TENTATIVE]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"fabric not ready after {timeout:g} s: {', '.join(pending[:5])}")
        time.sleep(0.01)


class _FabricWriter:
    def __init__(self, plan: FabricPlan, sockets: dict[str, IPRoute]) -> None:
        self.plan = plan
        self.sockets = sockets
        self.mtu = plan.topology.mtu
        # A VM's cables are taps its qemu opens later (edgeft_lab.vm); the switch ports wait for them.
        self.vm_ports = {(link.b.netns, link.b.ifname) for link in plan.vm_links}

    def write(self) -> None:
        for number, link in enumerate(self.plan.links):
            if is_vm_cable(link):
                continue
            # Explicit, distinct ifindexes for the two ends: in fresh namespaces both would
            # often get the same index, and the kernel's linkwatch then treats the pair like a
            # physical NIC and batches its carrier events (up to 1 s late) instead of
            # reporting them at once.
            add_veth(
                self.sockets[link.a.netns], link.a.ifname, FIRST_VETH_INDEX + 2 * number,
                link.b.ifname, link.b.netns, FIRST_VETH_INDEX + 2 * number + 1,
            )
        for switch in self.plan.switches:
            self._switch(switch)
        for host in self.plan.hosts:
            if host.netns:
                self._host(host)
        for ns, sock in self.sockets.items():
            sock.link("set", index=self._index(ns, "lo"), state="up")

    def _index(self, ns: str, ifname: str) -> int:
        found = self.sockets[ns].link_lookup(ifname=ifname)
        if not found:
            raise RuntimeError(f"interface {ifname} missing in namespace {ns}")
        return found[0]

    def _up(self, ns: str, ifname: str, **extra: object) -> None:
        if self.mtu is not None:
            extra["mtu"] = self.mtu
        self.sockets[ns].link("set", index=self._index(ns, ifname), state="up", **extra)

    def _address(self, ns: str, ifname: str, address: IPv4Interface | IPv6Interface) -> None:
        self.sockets[ns].addr(
            "add", index=self._index(ns, ifname), address=str(address.ip), prefixlen=address.network.prefixlen
        )

    def _routes(self, ns: str, routes: tuple[Route, ...]) -> None:
        install_routes(self.sockets[ns], routes, "add")

    def _switch(self, switch: Switch) -> None:
        ns, sock = switch.netns, self.sockets[switch.netns]
        for bridge in switch.bridges:
            # STP off (the fabric is a tree) so ports forward at once; no multicast snooping so
            # IPv6 neighbour discovery is flooded like on the simple switches this models.
            sock.link("add", ifname=bridge.name, kind="bridge", br_stp_state=0, br_mcast_snooping=0)
            bridge_index = self._index(ns, bridge.name)
            for port in bridge.ports:
                if (ns, port) not in self.vm_ports:
                    sock.link("set", index=self._index(ns, port), master=bridge_index)
            for address in bridge.addresses:
                self._address(ns, bridge.name, address)
            self._up(ns, bridge.name)
        for port, addresses in switch.port_addresses:
            for address in addresses:
                self._address(ns, port, address)
        for port in switch.ports:
            if (ns, port) not in self.vm_ports:
                self._up(ns, port)
        self._routes(ns, switch.routes)

    def _host(self, host: Host) -> None:
        for port in host.ports:
            self._address(host.netns, port.ifname, port.ipv4)
            self._address(host.netns, port.ifname, port.ipv6)
            self._up(host.netns, port.ifname)
        self._routes(host.netns, host.routes)


def add_veth(sock: IPRoute, ifname: str, index: int, peer_ifname: str, peer_netns: str, peer_index: int) -> None:
    """A veth pair with its first end in `sock`'s namespace and its peer created directly in
    `peer_netns`. A raw request, because pyroute2's veth helper cannot set the peer's index."""
    fd = os.open(netns.path(peer_netns), os.O_RDONLY)
    try:
        peer = {"index": peer_index, "attrs": [("IFLA_IFNAME", peer_ifname), ("IFLA_NET_NS_FD", fd)]}
        msg = ifinfmsg()
        msg["index"] = index
        msg["attrs"] = [
            ("IFLA_IFNAME", ifname),
            ("IFLA_LINKINFO", {"attrs": [
                ("IFLA_INFO_KIND", "veth"),
                ("IFLA_INFO_DATA", {"attrs": [("VETH_INFO_PEER", peer)]}),
            ]}),
        ]
        sock.nlm_request(msg, msg_type=RTM_NEWLINK, msg_flags=NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL)
    finally:
        os.close(fd)


def install_routes(sock: IPRoute, routes: Iterable[Route], how: str = "replace", timeout: float = 1.0) -> None:
    """Static routes; "replace" re-installs the ones the kernel flushed when their interface
    was set down (a link fault), as a host's or switch's network config would on link up.
    Right after a link comes up its connected routes may lag a moment: retry briefly."""
    for route in routes:
        found = sock.link_lookup(ifname=route.dev)
        if not found:
            raise RuntimeError(f"interface {route.dev} missing for route {route.dst}")
        deadline = time.monotonic() + timeout
        while True:
            try:
                sock.route(how, dst=str(route.dst), gateway=str(route.via), oif=found[0])
                break
            except NetlinkError as exc:
                if exc.code not in (errno.ENETUNREACH, errno.EHOSTUNREACH) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)


def node_routes(plan: FabricPlan, node: str, dev: str) -> list[Route]:
    """The planned routes of `node` that leave through interface `dev`."""
    routes = plan.host(node).routes if node in {h.name for h in plan.hosts} else plan.switch(node).routes
    return [r for r in routes if r.dev == dev]


def teardown(namespaces: list[str], links: Iterable[Link]) -> None:
    """Delete the veth pairs, then the namespaces (newest first). Deleting the pairs first means
    no cable survives even if some process still holds a reference to a namespace; one end is
    enough, and deletions in parallel overlap the kernel's per-device grace periods."""

    def delete(end: Endpoint) -> None:
        if not netns.exists(end.netns):
            return
        try:
            with netns.ipr(end.netns) as sock:
                sock.link("del", ifname=end.ifname)
        except (NetlinkError, OSError):
            pass  # already gone (with its peer, or never made); the namespace goes next anyway

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(delete, [link.b if is_vm_cable(link) else link.a for link in links]))
    for ns in reversed(namespaces):
        if netns.exists(ns):
            netns.remove(ns)
