"""Derive the concrete fabric (nodes, ports, links, addresses, routes) from a topology.

Pure data: fabric.py builds it, inventory.py and status.py describe it, faults.py targets it.
Naming: hosts r1h1, r1h2, ...; switches tor-r1-a, spine-a (leaf-spine) or sw-a (flat);
a switch's port towards node X is named X; a host's port on a plane is the plane's nic.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from ipaddress import IPv4Address, IPv4Interface, IPv4Network, IPv6Address, IPv6Interface, IPv6Network

from . import addressing
from .errors import LabError
from .names import flat_switch_name, host_name, spine_name, tor_name
from .topology import PlaneSpec, Topology

IPInterface = IPv4Interface | IPv6Interface
IPNetwork = IPv4Network | IPv6Network
IPAddress = IPv4Address | IPv6Address

L2_BRIDGE = "br0"


@dataclass(frozen=True)
class Route:
    dst: IPNetwork
    via: IPAddress
    dev: str


@dataclass(frozen=True)
class HostPort:
    """A host's NIC on one plane."""

    plane: str
    ifname: str
    ipv4: IPv4Interface
    ipv6: IPv6Interface
    switch: str
    gateway4: IPv4Address | None = None
    gateway6: IPv6Address | None = None
    # Routed planes: the address the data path translates this host's traffic to on this plane
    # when another plane fails. The multihome role adds it to the NIC; the fabric routes it here.
    failover4: IPv4Address | None = None
    failover6: IPv6Address | None = None


@dataclass(frozen=True)
class Host:
    name: str
    rack: int
    netns: str  # "" for a VM: it has no namespace here, its NICs are taps on its switches
    ports: tuple[HostPort, ...]
    routes: tuple[Route, ...] = ()
    machine: str = "netns"  # netns | vm

    @property
    def rack_name(self) -> str:
        return f"r{self.rack}"

    def port(self, plane: str) -> HostPort:
        for port in self.ports:
            if port.plane == plane:
                return port
        raise LabError(f"host {self.name} has no plane {plane!r}")


@dataclass(frozen=True)
class Bridge:
    """A Linux bridge inside a switch namespace, joining some of its ports."""

    name: str
    ports: tuple[str, ...]
    addresses: tuple[IPInterface, ...] = ()


@dataclass(frozen=True)
class Switch:
    name: str
    role: str  # tor | spine | switch
    plane: str
    rack: int | None
    netns: str
    routed: bool
    ports: tuple[str, ...]  # every port, named after the neighbour node
    bridges: tuple[Bridge, ...]
    port_addresses: tuple[tuple[str, tuple[IPInterface, ...]], ...] = ()  # routed uplinks
    routes: tuple[Route, ...] = ()
    hosts: tuple[str, ...] = ()  # hosts whose traffic on this plane can cross this switch
    neighbors: tuple[str, ...] = ()  # adjacent switches


@dataclass(frozen=True)
class Endpoint:
    node: str
    netns: str
    ifname: str


@dataclass(frozen=True)
class Link:
    """One veth pair. `a` is the host (or the ToR for an uplink), `b` the switch above it."""

    plane: str
    a: Endpoint
    b: Endpoint


@dataclass(frozen=True)
class FabricPlan:
    topology: Topology
    hosts: tuple[Host, ...]
    switches: tuple[Switch, ...]
    links: tuple[Link, ...]

    @property
    def name(self) -> str:
        return self.topology.name

    @cached_property
    def _hosts(self) -> dict[str, Host]:
        return {h.name: h for h in self.hosts}

    @cached_property
    def _switches(self) -> dict[str, Switch]:
        return {s.name: s for s in self.switches}

    @property
    def namespaces(self) -> list[str]:
        return [h.netns for h in self.hosts if h.netns] + [s.netns for s in self.switches]

    @property
    def vm_links(self) -> list[Link]:
        """Cables of VM hosts: the switch end is a tap the VM's qemu holds (edgeft_lab.vm)."""
        return [link for link in self.links if is_vm_cable(link)]

    def plane(self, name: str) -> PlaneSpec:
        for plane in self.topology.planes:
            if plane.name == name:
                return plane
        known = ", ".join(p.name for p in self.topology.planes)
        raise LabError(f"unknown plane {name!r} (planes: {known})")

    def host(self, name: str) -> Host:
        try:
            return self._hosts[name]
        except KeyError:
            raise LabError(f"unknown host {name!r} (hosts: {', '.join(self._hosts)})") from None

    def switch(self, name: str) -> Switch:
        try:
            return self._switches[name]
        except KeyError:
            raise LabError(f"unknown switch {name!r} (switches: {', '.join(self._switches)})") from None

    def netns(self, node: str) -> str:
        if node in self._hosts:
            return self._hosts[node].netns
        return self.switch(node).netns

    def host_link(self, host: str, plane: str) -> Link:
        self.plane(plane)
        self.host(host)
        for link in self.links:
            if link.a.node == host and link.plane == plane:
                return link
        raise LabError(f"host {host} has no link on plane {plane}")  # unreachable for valid plans

    def switch_links(self, switch: str) -> list[Link]:
        self.switch(switch)
        return [link for link in self.links if switch in (link.a.node, link.b.node)]


def is_vm_cable(link: Link) -> bool:
    return link.a.netns == ""


def netns_name(lab: str, node: str) -> str:
    return f"{lab}-{node}"


def plan_fabric(topology: Topology) -> FabricPlan:
    lab = topology.name
    routed = topology.routed
    racks = {r: [host_name(r, h) for h in range(1, n + 1)] for r, n in enumerate(topology.hosts_per_rack, 1)}
    vm = topology.machines == "vm"
    failover = _failover_addresses(topology, [name for names in racks.values() for name in names])

    def access_switch(rack: int, plane: str) -> str:
        return flat_switch_name(plane) if topology.kind == "flat" else tor_name(rack, plane)

    hosts: list[Host] = []
    links: list[Link] = []
    for rack, names in racks.items():
        for index, name in enumerate(names, 1):
            ports, routes = [], []
            for plane in topology.planes:
                switch = access_switch(rack, plane.name)
                gw4 = addressing.gateway4(plane.ipv4, rack).ip if routed else None
                gw6 = addressing.gateway6(plane.ipv6, rack).ip if routed else None
                ports.append(
                    HostPort(
                        plane=plane.name,
                        ifname=plane.nic,
                        ipv4=addressing.host4(plane.ipv4, rack, index, routed),
                        ipv6=addressing.host6(plane.ipv6, rack, index, routed),
                        switch=switch,
                        gateway4=gw4,
                        gateway6=gw6,
                        failover4=failover.get((plane.name, 4), {}).get(name),  # type: ignore[arg-type]
                        failover6=failover.get((plane.name, 6), {}).get(name),  # type: ignore[arg-type]
                    )
                )
                if gw4 is not None and gw6 is not None:
                    # A plane carries only its own prefixes, so the host routes just those.
                    routes += [Route(plane.ipv4, gw4, plane.nic), Route(plane.ipv6, gw6, plane.nic)]
                host_ns = "" if vm else netns_name(lab, name)
                links.append(
                    Link(plane.name, Endpoint(name, host_ns, plane.nic), Endpoint(switch, netns_name(lab, switch), name))
                )
            hosts.append(Host(name, rack, host_ns, tuple(ports), tuple(routes), topology.machines))

    switches: list[Switch] = []
    isl_pairs = [(flat_switch_name(a), flat_switch_name(b)) for a, b in topology.isl_pairs]
    for plane in topology.planes:
        if topology.kind == "flat":
            # Inter-switch links join the switches of the topology's plane pairs (fabric.isl).
            this = flat_switch_name(plane.name)
            isl_peers = tuple(b if a == this else a for a, b in isl_pairs if this in (a, b))
            switches.append(_flat_switch(lab, plane, racks, routed, isl_peers, hosts))
        else:
            tors = [_tor(lab, plane, rack, names, routed, hosts) for rack, names in racks.items()]
            switches += tors
            switches.append(_spine(lab, plane, racks, routed, hosts))
            for rack in racks:
                tor, spine = tor_name(rack, plane.name), spine_name(plane.name)
                links.append(
                    Link(
                        plane.name,
                        Endpoint(tor, netns_name(lab, tor), spine),
                        Endpoint(spine, netns_name(lab, spine), tor),
                    )
                )
    for left, right in isl_pairs:
        links.append(Link("isl", Endpoint(left, netns_name(lab, left), right), Endpoint(right, netns_name(lab, right), left)))
    return FabricPlan(topology, tuple(hosts), tuple(switches), tuple(links))


def _failover_addresses(topology: Topology, hosts: list[str]) -> dict[tuple[str, int], dict[str, IPAddress]]:
    """(plane, family) -> host -> failover address, for the planes that have failover prefixes."""
    result: dict[tuple[str, int], dict[str, IPAddress]] = {}
    for plane in topology.planes:
        for family, prefix in ((4, plane.failover_ipv4), (6, plane.failover_ipv6)):
            if prefix is not None:
                result[(plane.name, family)] = dict(addressing.failover_addresses(prefix, hosts))
    return result


def _failover_routes_to_hosts(plane: str, hosts: Iterable[Host]) -> list[Route]:
    """On the router holding the hosts' rack bridges: each host's failover address via its native one."""
    routes = []
    for host in hosts:
        port = host.port(plane)
        if port.failover4 is not None:
            routes.append(Route(IPv4Network(port.failover4), port.ipv4.ip, _rack_bridge_name(host.rack)))
        if port.failover6 is not None:
            routes.append(Route(IPv6Network(port.failover6), port.ipv6.ip, _rack_bridge_name(host.rack)))
    return routes


def _rack_bridge_name(rack: int) -> str:
    return f"br-r{rack}"


def _rack_bridge(plane: PlaneSpec, rack: int, hosts: list[str]) -> Bridge:
    """Routed mode: a rack's host ports share one bridge carrying the rack's gateway."""
    gateways = (addressing.gateway4(plane.ipv4, rack), addressing.gateway6(plane.ipv6, rack))
    return Bridge(_rack_bridge_name(rack), tuple(hosts), gateways)


def _flat_switch(
    lab: str, plane: PlaneSpec, racks: dict[int, list[str]], routed: bool, isl_peers: tuple[str, ...] = (),
    planned_hosts: Sequence[Host] = (),
) -> Switch:
    name = flat_switch_name(plane.name)
    all_hosts = tuple(h for names in racks.values() for h in names)
    ports = (*all_hosts, *isl_peers)
    routes: tuple[Route, ...] = ()
    if routed:
        bridges = tuple(_rack_bridge(plane, rack, names) for rack, names in racks.items())
        routes = tuple(_failover_routes_to_hosts(plane.name, planned_hosts))
    else:
        bridges = (Bridge(L2_BRIDGE, ports),)
    return Switch(
        name=name, role="switch", plane=plane.name, rack=None, netns=netns_name(lab, name),
        routed=routed, ports=ports, bridges=bridges, routes=routes, hosts=all_hosts, neighbors=isl_peers,
    )


def _tor(lab: str, plane: PlaneSpec, rack: int, hosts: list[str], routed: bool, planned_hosts: Sequence[Host]) -> Switch:
    name, spine = tor_name(rack, plane.name), spine_name(plane.name)
    ports = (*hosts, spine)
    if not routed:
        return Switch(
            name=name, role="tor", plane=plane.name, rack=rack, netns=netns_name(lab, name), routed=False,
            ports=ports, bridges=(Bridge(L2_BRIDGE, ports),), hosts=tuple(hosts), neighbors=(spine,),
        )
    spine4, tor4 = addressing.transit4(plane.ipv4, rack)
    spine6, tor6 = addressing.transit6(plane.ipv6, rack)
    return Switch(
        name=name, role="tor", plane=plane.name, rack=rack, netns=netns_name(lab, name), routed=True,
        ports=ports,
        bridges=(_rack_bridge(plane, rack, hosts),),
        port_addresses=((spine, (tor4, tor6)),),
        # Everything of this plane that is not the rack's own subnet is behind the spine, except
        # the failover addresses of the rack's own hosts.
        routes=(
            Route(plane.ipv4, spine4.ip, spine), Route(plane.ipv6, spine6.ip, spine),
            *_failover_routes_to_hosts(plane.name, [h for h in planned_hosts if h.rack == rack]),
        ),
        hosts=tuple(hosts), neighbors=(spine,),
    )


def _spine(lab: str, plane: PlaneSpec, racks: dict[int, list[str]], routed: bool, planned_hosts: Sequence[Host]) -> Switch:
    name = spine_name(plane.name)
    tors = tuple(tor_name(rack, plane.name) for rack in racks)
    all_hosts = tuple(h for names in racks.values() for h in names)
    if not routed:
        return Switch(
            name=name, role="spine", plane=plane.name, rack=None, netns=netns_name(lab, name), routed=False,
            ports=tors, bridges=(Bridge(L2_BRIDGE, tors),), hosts=all_hosts, neighbors=tors,
        )
    port_addresses, routes = [], []
    for rack, tor in zip(racks, tors):
        spine4, tor4 = addressing.transit4(plane.ipv4, rack)
        spine6, tor6 = addressing.transit6(plane.ipv6, rack)
        port_addresses.append((tor, (spine4, spine6)))
        routes += [
            Route(addressing.rack_subnet4(plane.ipv4, rack), tor4.ip, tor),
            Route(addressing.rack_subnet6(plane.ipv6, rack), tor6.ip, tor),
        ]
    for host in planned_hosts:
        # A host's failover address is wherever the host is: behind its rack's ToR.
        port = host.port(plane.name)
        spine4, tor4 = addressing.transit4(plane.ipv4, host.rack)
        spine6, tor6 = addressing.transit6(plane.ipv6, host.rack)
        if port.failover4 is not None:
            routes.append(Route(IPv4Network(port.failover4), tor4.ip, tor_name(host.rack, plane.name)))
        if port.failover6 is not None:
            routes.append(Route(IPv6Network(port.failover6), tor6.ip, tor_name(host.rack, plane.name)))
    return Switch(
        name=name, role="spine", plane=plane.name, rack=None, netns=netns_name(lab, name), routed=True,
        ports=tors, bridges=(), port_addresses=tuple(port_addresses), routes=tuple(routes),
        hosts=all_hosts, neighbors=tors,
    )
