"""Build and tear down a fabric plan with pyroute2 (no `ip` output parsing).

Each veth pair is created by a socket in the first end's namespace with its peer placed
directly in the other end's namespace, so no lab interface ever exists, even transiently,
in the machine's root namespace.
"""

from __future__ import annotations

from collections.abc import Callable
from ipaddress import IPv4Interface, IPv6Interface

from pyroute2 import IPRoute

from . import netns
from .plan import FabricPlan, Host, Route, Switch

# Addresses usable at once (no DAD), no autoconfiguration from stray RAs.
BASE_SYSCTLS = {
    "net.ipv6.conf.all.accept_dad": "0",
    "net.ipv6.conf.default.accept_dad": "0",
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
    finally:
        for sock in sockets.values():
            sock.close()


class _FabricWriter:
    def __init__(self, plan: FabricPlan, sockets: dict[str, IPRoute]) -> None:
        self.plan = plan
        self.sockets = sockets
        self.mtu = plan.topology.mtu

    def write(self) -> None:
        for link in self.plan.links:
            self.sockets[link.a.netns].link(
                "add", ifname=link.a.ifname, kind="veth", peer={"ifname": link.b.ifname, "net_ns_fd": link.b.netns}
            )
        for switch in self.plan.switches:
            self._switch(switch)
        for host in self.plan.hosts:
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
        for route in routes:
            self.sockets[ns].route(
                "add", dst=str(route.dst), gateway=str(route.via), oif=self._index(ns, route.dev)
            )

    def _switch(self, switch: Switch) -> None:
        ns, sock = switch.netns, self.sockets[switch.netns]
        for bridge in switch.bridges:
            # STP off (the fabric is a tree) so ports forward at once; no multicast snooping so
            # IPv6 neighbour discovery is flooded like on the simple switches this models.
            sock.link("add", ifname=bridge.name, kind="bridge", br_stp_state=0, br_mcast_snooping=0)
            bridge_index = self._index(ns, bridge.name)
            for port in bridge.ports:
                sock.link("set", index=self._index(ns, port), master=bridge_index)
            for address in bridge.addresses:
                self._address(ns, bridge.name, address)
            self._up(ns, bridge.name)
        for port, addresses in switch.port_addresses:
            for address in addresses:
                self._address(ns, port, address)
        for port in switch.ports:
            self._up(ns, port)
        self._routes(ns, switch.routes)

    def _host(self, host: Host) -> None:
        for port in host.ports:
            self._address(host.netns, port.ifname, port.ipv4)
            self._address(host.netns, port.ifname, port.ipv6)
            self._up(host.netns, port.ifname)
        self._routes(host.netns, host.routes)


def teardown_namespaces(namespaces: list[str]) -> None:
    """Remove namespaces (newest first), deleting their links first so that nothing survives
    even if some process still holds a reference to a namespace."""
    for ns in reversed(namespaces):
        if not netns.exists(ns):
            continue
        try:
            with netns.ipr(ns) as sock:
                for link in sock.get_links():
                    if link.get_attr("IFLA_IFNAME") != "lo":
                        try:
                            sock.link("del", index=link["index"])
                        except Exception:
                            pass  # its veth peer went first, taking it along
        except Exception:
            pass  # an unusable namespace is still unmounted below
        netns.remove(ns)
