"""The lab's address plan: pure arithmetic on a plane's prefixes (documented in docs/lab.md).

For a plane with prefixes P4 (e.g. 198.18.0.0/16) and P6 (e.g. fd0e:d6ef:7a00::/56):
  rack r (1-based) owns the r-th /24 of P4 and the r-th /64 of P6;
  host h (1-based) of rack r is host number 10+h in both (198.18.1.11, fd0e:d6ef:7a00:1::b);
  the rack's gateway (routed mode) is number 1 (198.18.1.1, fd0e:d6ef:7a00:1::1);
  subnet 0 holds the routed ToR<->spine transit links: link k (1-based, = rack) is the
  k-th /31 (/127), the spine on the even address, the ToR on the odd one.
"""

from __future__ import annotations

from ipaddress import IPv4Interface, IPv4Network, IPv6Interface, IPv6Network

HOST_OFFSET = 10
GATEWAY_NUMBER = 1


def rack_subnet4(plane4: IPv4Network, rack: int) -> IPv4Network:
    return IPv4Network((int(plane4.network_address) + (rack << 8), 24))


def rack_subnet6(plane6: IPv6Network, rack: int) -> IPv6Network:
    return IPv6Network((int(plane6.network_address) + (rack << 64), 64))


def host4(plane4: IPv4Network, rack: int, host: int, routed: bool) -> IPv4Interface:
    """In L2 mode the whole plane is one segment, so the host uses the plane's prefix length."""
    address = rack_subnet4(plane4, rack).network_address + HOST_OFFSET + host
    return IPv4Interface((address, 24 if routed else plane4.prefixlen))


def host6(plane6: IPv6Network, rack: int, host: int, routed: bool) -> IPv6Interface:
    address = rack_subnet6(plane6, rack).network_address + HOST_OFFSET + host
    return IPv6Interface((address, 64 if routed else plane6.prefixlen))


def gateway4(plane4: IPv4Network, rack: int) -> IPv4Interface:
    return IPv4Interface((rack_subnet4(plane4, rack).network_address + GATEWAY_NUMBER, 24))


def gateway6(plane6: IPv6Network, rack: int) -> IPv6Interface:
    return IPv6Interface((rack_subnet6(plane6, rack).network_address + GATEWAY_NUMBER, 64))


def transit4(plane4: IPv4Network, link: int) -> tuple[IPv4Interface, IPv4Interface]:
    """(spine end, ToR end) of routed transit link `link` (1-based): a /31 in subnet 0."""
    base = plane4.network_address + 2 * link
    return IPv4Interface((base, 31)), IPv4Interface((base + 1, 31))


def transit6(plane6: IPv6Network, link: int) -> tuple[IPv6Interface, IPv6Interface]:
    """(spine end, ToR end) of routed transit link `link` (1-based): a /127 in subnet 0."""
    base = plane6.network_address + 2 * link
    return IPv6Interface((base, 127)), IPv6Interface((base + 1, 127))
