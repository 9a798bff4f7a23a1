# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The failover_addresses filter (documented in failover_addresses.yml)."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.edgeft.failover.plugins.module_utils.failover_addresses import FailoverAddressError, plan


def failover_addresses(hostvars, hosts, prefixes=None):
    if not isinstance(hostvars, Mapping):
        raise AnsibleFilterError("failover_addresses: the input must be hostvars, got %s" % type(hostvars).__name__)
    if isinstance(hosts, str) or not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("failover_addresses: the hosts must be a list of inventory hostnames, such as "
                                 "groups['fabric'], got %r" % (hosts,))
    planes_by_host = {}
    for host in hosts:
        if host not in hostvars:
            raise AnsibleFilterError("failover_addresses: host %r is not in the inventory" % (host,))
        planes_by_host[host] = hostvars[host].get("edgeft_planes") or []
    try:
        return plan(planes_by_host, prefixes or {})
    except FailoverAddressError as e:
        raise AnsibleFilterError("failover_addresses: %s" % e) from None


class FilterModule:
    def filters(self):
        return {"failover_addresses": failover_addresses}
