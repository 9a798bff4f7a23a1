"""The lab's address plan: pure arithmetic on a plane's prefixes (documented in docs/lab.md).

For a plane with prefixes P4 (e.g. 198.18.0.0/16) and P6 (e.g. fd0e:d6ef:7a00::/56):
  rack r (1-based) owns the r-th /24 of P4 and the r-th /64 of P6;
  host h (1-based) of rack r is host number 10+h in both (198.18.1.11, fd0e:d6ef:7a00:1::b);
  the rack's gateway (routed mode) is number 1 (198.18.1.1, fd0e:d6ef:7a00:1::1);
  subnet 0 holds the routed ToR<->spine transit links: link k (1-based, = rack) is the
  k-th /31 (/127), the spine on the even address, the ToR on the odd one.
Routed planes also carry the hosts' failover addresses (the data path's stateless NAT
targets): by default from the plane's last /24 (/64), allocated by the collection's
plugins/module_utils/failover_addresses.py, the same code the multihome role runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from ipaddress import IPv4Address, IPv4Interface, IPv4Network, IPv6Address, IPv6Interface, IPv6Network, ip_address
from types import ModuleType

from . import collection

HOST_OFFSET = 10
GATEWAY_NUMBER = 1
FAILOVER_ADDRESSES_MODULE = "plugins.module_utils.failover_addresses"


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


def last_subnet4(plane4: IPv4Network) -> tuple[int, IPv4Network]:
    """(number, network) of the plane's last /24: subnet 255 of a /16."""
    number = (1 << (24 - plane4.prefixlen)) - 1
    return number, rack_subnet4(plane4, number)


def last_subnet6(plane6: IPv6Network) -> tuple[int, IPv6Network]:
    """(number, network) of the plane's last /64: subnet 0xff of a /56."""
    number = (1 << (64 - plane6.prefixlen)) - 1
    return number, rack_subnet6(plane6, number)


def native_subnets4(plane4: IPv4Network, racks: int) -> list[IPv4Network]:
    """What a routed plane uses itself: subnet 0 (transit links) and the rack subnets."""
    return [rack_subnet4(plane4, number) for number in range(racks + 1)]


def native_subnets6(plane6: IPv6Network, racks: int) -> list[IPv6Network]:
    return [rack_subnet6(plane6, number) for number in range(racks + 1)]


def failover_addresses(
    prefix: IPv4Network | IPv6Network, hosts: Sequence[str], native: Iterable[IPv4Network | IPv6Network] = (),
    option: str = "failover prefix",
) -> dict[str, IPv4Address | IPv6Address]:
    """host -> failover address from `prefix`, exactly as the multihome role derives it from
    edgeft_failover_prefixes (hosts sorted by name take the usable addresses in order).
    Raises the library's FailoverAddressError (see failover_address_error)."""
    allocated = failover_library().allocate(str(prefix), list(hosts), native=[str(n) for n in native], option=option)
    return {host: ip_address(address) for host, address in allocated.items()}


def failover_address_error() -> type[Exception]:
    return failover_library().FailoverAddressError


def failover_library() -> ModuleType:
    """The collection's failover address library (the multihome role's)."""
    return collection.module(FAILOVER_ADDRESSES_MODULE, "routed planes (their failover addresses)")
