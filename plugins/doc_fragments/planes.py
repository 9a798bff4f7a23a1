# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    """The planes option, one fragment per shape: extends_documentation_fragment
    edgeft.failover.planes.<shape>. Every shape goes through the same validation
    (module_utils/host/planes.py normalize_planes); its argument spec is
    module_utils/module_options.planes().

    Ansible merges a fragment's option whole (suboptions are not merged), and ansible-test
    wants each fragment a plain string, so the suboptions the shapes share (name, interface,
    ipv4, ipv6, failover4, failover6) stand in each shape: change them in every shape alike.
    """

    # Planes by name and NIC only, to name them (plane_check, plane_state).
    NAMES_ONLY = r'''
options:
  planes:
    description:
      - This host's planes in plane order, to name them (in the options and the report); the names
        and interfaces given to M(edgeft.failover.peer_table).
      - When omitted, the plane names M(edgeft.failover.peer_table) recorded for O(pin_root) are used.
    type: list
    elements: dict
    suboptions:
      name:
        description: Plane name, for example V(a).
        type: str
        required: true
      interface:
        description: The NIC of this host that carries the plane.
        type: str
        required: true
'''

    # The declared planes with their addresses, compared with the host (plane_info).
    ADDRESSES = r'''
options:
  planes:
    description:
      - The planes this host is declared to have, in plane order.
      - Plane names and interfaces must be unique, and the subnets of two planes must not overlap.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Plane name, for example V(a).
        type: str
        required: true
      interface:
        description: The NIC of this host that carries the plane.
        type: str
        required: true
      ipv4:
        description:
          - This host's IPv4 address on the plane with its prefix length, for example V(198.18.1.11/16).
            The prefix is the plane's connected prefix.
        type: str
      ipv6:
        description: This host's IPv6 address on the plane with its prefix length, for example V(fd0e:d6ef:7a00:1::b/64).
        type: str
'''

    # The planes as the peer table writes them into the maps, routed planes included (peer_table).
    # The addresses may come without their prefix length: the peer table needs only the address.
    PEER_TABLE = r'''
options:
  planes:
    description:
      - This host's planes, in plane order (the first is plane index V(0)). Every plane's NIC must exist.
      - The peers' plane names must be among these names.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Plane name, for example V(a).
        type: str
        required: true
      interface:
        description: The NIC of this host that carries the plane.
        type: str
        required: true
      ipv4:
        description:
          - This host's IPv4 address on the plane (with or without a prefix length). Needed on a
            plane whose address a failover address on the other plane stands for.
        type: str
      ipv6:
        description: This host's IPv6 address on the plane, as O(planes[].ipv4).
        type: str
      failover4:
        description:
          - Routed planes only. This host's IPv4 failover address on this plane, without prefix length,
            for example V(198.19.255.1). It stands for this host's IPv4 address on another plane - when
            that plane fails, the address's traffic steered onto this plane is translated to it.
          - It needs O(planes[].ipv4), must lie outside every plane's native subnet and differ from the
            other planes' failover addresses. The roles compute it from C(edgeft_failover_prefixes) with
            the P(edgeft.failover.failover_addresses#filter) filter.
          - A plane with a failover address is routed - traffic steered onto it is translated to failover
            addresses, so both ends' must be known (the peer's is O(peers[].planes[].failover4)). Failover
            addresses need exactly two planes.
        type: str
      failover6:
        description:
          - Routed planes only. This host's IPv6 failover address on this plane, without prefix length;
            otherwise as O(planes[].failover4).
        type: str
'''

    # The whole declaration of the plane NICs, the inventory variable edgeft_planes (multihome).
    MULTIHOME = r'''
options:
  planes:
    description:
      - This host's planes, in plane order (the first is plane index V(0)); the inventory variable
        C(edgeft_planes). Required with O(state=present).
      - A plane needs O(planes[].ipv4), O(planes[].ipv6) or both, and its NIC must exist.
      - Subnets of different planes must not overlap.
    type: list
    elements: dict
    suboptions:
      name:
        description: Plane name, for example V(a).
        type: str
        required: true
      interface:
        description: The NIC of this host that carries the plane.
        type: str
        required: true
      ipv4:
        description:
          - This host's IPv4 address on the plane with its prefix length, for example V(198.18.1.11/16).
            The prefix is the plane's connected prefix.
        type: str
      ipv6:
        description: This host's IPv6 address on the plane with its prefix length, for example V(fd0e:d6ef:7a00:1::b/64).
        type: str
      mtu:
        description:
          - MTU of the NIC (68 to 65535, at least 1280 with an IPv6 address, and within what the NIC
            supports). Left as it is when not given.
        type: int
      gateway4:
        description: IPv4 first hop of a routed plane, inside the plane's IPv4 prefix; the plane's table gets a default route through it.
        type: str
      gateway6:
        description: IPv6 first hop of a routed plane, inside the plane's IPv6 prefix or link-local.
        type: str
      accept_ra:
        description: Accept IPv6 router advertisements on the NIC (C(net.ipv6.conf.NIC.accept_ra)).
        type: bool
        default: false
      switch:
        description: The switch serving the host on this plane. Informational; used by the drain playbooks, ignored here.
        type: str
      failover4:
        description:
          - Routed planes only. This host's IPv4 failover address on this plane, without prefix length,
            for example V(198.19.255.1). It stands for this host's IPv4 address on another plane - when
            that plane fails, the address's traffic steered onto this plane is translated to it.
          - It needs O(planes[].ipv4), must lie outside every plane's native subnet and differ from the
            other planes' failover addresses. The roles compute it from C(edgeft_failover_prefixes) with
            the P(edgeft.failover.failover_addresses#filter) filter.
          - Installed on the NIC as a V(/32) with a source rule to the plane's table like the native
            address's.
        type: str
      failover6:
        description:
          - Routed planes only. This host's IPv6 failover address on this plane, without prefix length;
            otherwise as O(planes[].failover4).
          - Installed as a V(/128) without duplicate address detection and with a preferred lifetime of
            0, so the kernel never picks it as a source address.
        type: str
'''
