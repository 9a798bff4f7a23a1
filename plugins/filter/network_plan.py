# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The merge_network_plans filter (documented in merge_network_plans.yml)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.edgeft.failover.plugins.module_utils.persist.merge import MergeError, merge_plans


def merge_network_plans(plans):
    try:
        return merge_plans(plans)
    except MergeError as e:
        raise AnsibleFilterError("merge_network_plans: %s" % e) from None


class FilterModule:
    def filters(self):
        return {"merge_network_plans": merge_network_plans}
