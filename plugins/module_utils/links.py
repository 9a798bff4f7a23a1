# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read-only view of a host's plane interfaces through netlink (pyroute2).

Kept free of Ansible imports so tests and the agent use it directly.
"""

from __future__ import annotations

import ipaddress

from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError

from ansible_collections.edgeft.failover.plugins.module_utils import netlink


class PlaneSpecError(EdgeftError, ValueError):
    """A plane declaration is malformed; the message names the option path."""


def _as_interface(value, where):
    """Parse 'addr/len' into an ip_interface, naming the option on error."""
    if value in (None, ''):
        return None
    try:
        return ipaddress.ip_interface(str(value))
    except ValueError:
        raise PlaneSpecError('%s: %r is not an address with prefix length (e.g. 198.18.1.11/16)' % (where, value)) from None


def normalize_planes(planes, option='planes'):
    """Validate plane declarations; return a list of dicts with parsed addresses.

    Checks what the kernel cannot tell us later: duplicate plane names or
    interfaces, a family mismatch, and subnets that overlap across planes
    (which would make the kernel pick one plane for both).
    """
    if not planes:
        raise PlaneSpecError('%s: at least one plane is required' % option)
    seen_names, seen_ifaces, result = {}, {}, []
    for idx, plane in enumerate(planes):
        where = '%s[%d]' % (option, idx)
        name, iface = plane.get('name'), plane.get('interface')
        if not name:
            raise PlaneSpecError('%s.name: a plane name is required' % where)
        if not iface:
            raise PlaneSpecError('%s.interface: the plane NIC name is required' % where)
        if len(iface) > 15:
            raise PlaneSpecError('%s.interface: %r is longer than the kernel limit of 15 characters' % (where, iface))
        if name in seen_names:
            raise PlaneSpecError('%s.name: plane %r is already declared at %s' % (where, name, seen_names[name]))
        if iface in seen_ifaces:
            raise PlaneSpecError('%s.interface: %r already carries plane %r' % (where, iface, seen_ifaces[iface]))
        seen_names[name], seen_ifaces[iface] = where, name
        v4 = _as_interface(plane.get('ipv4'), where + '.ipv4')
        v6 = _as_interface(plane.get('ipv6'), where + '.ipv6')
        if v4 is not None and v4.version != 4:
            raise PlaneSpecError('%s.ipv4: %s is not an IPv4 address' % (where, v4))
        if v6 is not None and v6.version != 6:
            raise PlaneSpecError('%s.ipv6: %s is not an IPv6 address' % (where, v6))
        result.append({'name': name, 'interface': iface, 'ipv4': v4, 'ipv6': v6, 'where': where})
    for i, first in enumerate(result):
        for second in result[i + 1:]:
            for fam in ('ipv4', 'ipv6'):
                a, b = first[fam], second[fam]
                if a is not None and b is not None and a.network.overlaps(b.network):
                    raise PlaneSpecError('%s.%s: subnet %s overlaps %s of plane %r; planes must use disjoint subnets'
                                         % (second['where'], fam, b.network, a.network, first['name']))
    return result


def _link_state(ipr, index):
    link = ipr.get_links(index)[0]
    flags = link['flags']
    return {
        'ifindex': index,
        'mac': link.get_attr('IFLA_ADDRESS'),
        'mtu': link.get_attr('IFLA_MTU'),
        'admin_up': bool(flags & 0x1),  # IFF_UP
        'carrier': bool(link.get_attr('IFLA_CARRIER')),
        'operstate': link.get_attr('IFLA_OPERSTATE'),
    }


def _addresses(ipr, index):
    found = []
    for msg in ipr.get_addr(index=index):
        addr = msg.get_attr('IFA_ADDRESS')
        if addr:
            found.append('%s/%d' % (addr, msg['prefixlen']))
    return found


def _rp_filter(name):
    """The value of net.ipv4.conf.<name>.rp_filter, None when the kernel has none."""
    try:
        with open('/proc/sys/net/ipv4/conf/%s/rp_filter' % name) as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def plane_report(planes):
    """Return (report, problems) for normalized planes.

    report: per plane the interface state and its addresses.
    problems: human-readable mismatches between declaration and host.
    """
    report, problems = [], []
    with netlink.open_ipr(RuntimeError) as ipr:
        for plane in planes:
            entry = {'name': plane['name'], 'interface': plane['interface'], 'present': False,
                     'addresses': [], 'missing_addresses': []}
            found = ipr.link_lookup(ifname=plane['interface'])
            if not found:
                problems.append('%s.interface: interface %r does not exist on this host'
                                % (plane['where'], plane['interface']))
                report.append(entry)
                continue
            entry['present'] = True
            entry.update(_link_state(ipr, found[0]))
            entry['addresses'] = _addresses(ipr, found[0])
            # The kernel applies the larger of 'all' and the interface's value.
            values = [v for v in (_rp_filter('all'), _rp_filter(plane['interface'])) if v is not None]
            entry['rp_filter'] = max(values) if values else None
            for fam in ('ipv4', 'ipv6'):
                want = plane[fam]
                if want is not None and want not in [ipaddress.ip_interface(a) for a in entry['addresses']]:
                    entry['missing_addresses'].append(str(want))
                    problems.append('%s.%s: %s is not configured on %s'
                                    % (plane['where'], fam, want, plane['interface']))
            report.append(entry)
    return report, problems
