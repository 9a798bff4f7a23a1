# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plane_info module: a host's plane NICs as netlink shows them (pyroute2), against the
plane declaration (validated by the plane model, host/planes.py). Changes nothing.
"""

from __future__ import annotations

import ipaddress

from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.host import nics
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import normalize_planes


class PlaneMismatch(EdgeftError):
    """The host does not match its declaration; `result` is the module's report."""

    def __init__(self, message, result):
        super().__init__(message)
        self.result = result


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
    links = nics.read_links()
    for plane in planes:
        entry = {'name': plane['name'], 'interface': plane['interface'], 'present': False,
                 'addresses': [], 'missing_addresses': []}
        link = links.get(plane['interface'])
        if link is None:
            problems.append('%s.interface: interface %r does not exist on this host'
                            % (plane['where'], plane['interface']))
            report.append(entry)
            continue
        entry.update(present=True, addresses=link['addresses'], admin_up=link['up'],
                     **{key: link[key] for key in ('ifindex', 'mac', 'mtu', 'carrier', 'operstate')})
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


def plane_info(params):
    """The module: (result, warnings). Raises OptionError (bad declaration) or PlaneMismatch."""
    planes = normalize_planes(params["planes"])
    report, problems = plane_report(planes)
    if params.get("require_carrier"):
        problems.extend("%s.interface: %s has no carrier" % (p["where"], p["interface"])
                        for p, r in zip(planes, report) if r["present"] and not r["carrier"])
    result = dict(changed=False, planes=report, problems=problems)
    if problems and params.get("fail_on_mismatch", True):
        raise PlaneMismatch("host does not match its plane declaration: " + "; ".join(problems), result)
    return result, []
