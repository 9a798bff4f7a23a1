# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric_peers filter (documented in fabric_peers.yml)."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.edgeft.failover.plugins.module_utils.failover_addresses import peer_entries


def _planes(hostvars, hosts, option):
    if isinstance(hosts, str) or not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("fabric_peers: %s must be a list of inventory hostnames, such as groups['fabric'], "
                                 "got %r" % (option, hosts))
    found = {}
    for host in hosts:
        if host not in hostvars:
            raise AnsibleFilterError("fabric_peers: host %r is not in the inventory" % (host,))
        planes = hostvars[host].get("edgeft_planes") or []
        found[host] = planes if isinstance(planes, list) else []
    return found


def fabric_peers(hostvars, hosts, failover_hosts=None, prefixes=None):
    if not isinstance(hostvars, Mapping):
        raise AnsibleFilterError("fabric_peers: the input must be hostvars, got %s" % type(hostvars).__name__)
    planes = _planes(hostvars, hosts, "hosts")
    failover = planes if failover_hosts is None else _planes(hostvars, failover_hosts, "failover_hosts")
    table, error = peer_entries(planes, failover, prefixes or {})
    return {"hosts": table, "failover_error": error}


class FilterModule:
    def filters(self):
        return {"fabric_peers": fabric_peers}
