#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: steering_cleanup
short_description: Remove the failover agent's and the drains' rules, tables and neighbour entries
version_added: 0.1.0
description:
  - Removes what the failover agent and M(edgeft.failover.plane_state) drains leave in the kernel
    and no module's C(state=absent) removes - the rules at O(priority)-1 .. O(priority)+1 of both
    families (held table, main without its default route, backup table), every route of the
    backup table O(table) and of the held table after it - and the managed neighbour entries
    M(edgeft.failover.peer_table) recorded for O(pin_root).
  - Puts back the neighbour table thresholds (C(net.ipv4.neigh.default.gc_thresh2) and the like)
    that M(edgeft.failover.peer_table) raised, to the values it recorded in O(state_dir) before its
    first raise; where this network namespace cannot see them (not the initial one), nothing.
  - Only edgeft's own are removed - rules and routes with protocol 237, in the form the agent adds
    them; neighbour entries that are recorded and still managed. Others found there are kept and
    reported as warnings.
  - Validates the options first. Check mode and diff mode show what would go.
  - Run it once nothing is steered any more (the uninstall empties the peer table first), or
    traffic a failover or a drain moved would move back.
author:
  - edgeft maintainers (@edgeft)
options:
  table:
    description:
      - The agent's backup table (its C(backup_routes.table)); the held table is the next one.
    type: int
    default: 60919
  priority:
    description:
      - The agent's backup rule priority (its C(backup_routes.priority)); its rules sit at this priority and the ones beside it.
    type: int
    default: 32690
  pin_root:
    description:
      - The pin root whose peer table record names the neighbour entries to remove; none are removed without it.
    type: path
requirements:
  - root on the target
  - pyroute2 (Debian package C(python3-pyroute2))
  - iproute2 (C(ip)) for the managed neighbour entries
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes
  - edgeft.failover.state_dir
'''

EXAMPLES = r'''
- name: Remove the agent's and drains' routes and the peer table's neighbour entries
  edgeft.failover.steering_cleanup:
    state_dir: /var/lib/edgeft
    pin_root: /sys/fs/bpf/edgeft
'''

RETURN = r'''
rules:
  description: The rules removed (or that would be).
  returned: always
  type: list
  elements: str
  sample: ["IPv4 32689: lookup 60920 proto 237", "IPv4 32690: lookup main suppress_prefixlength 0 proto 237"]
routes:
  description: The routes removed from the two tables (or that would be).
  returned: always
  type: list
  elements: str
  sample: ["IPv4 198.18.2.11/32 table 60919 proto 237"]
neighbors:
  description: The managed neighbour entries removed (or that would be).
  returned: always
  type: list
  elements: str
  sample: ["198.18.2.11 dev fab0"]
neighbor_limits:
  description: The neighbour table thresholds put back (or that would be), with their values before and after.
  returned: always
  type: dict
  sample: {net.ipv4.neigh.default.gc_thresh3: {before: 16896, after: 1024}}
kept:
  description: Rules and routes found there that edgeft did not add, left in place.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils import constants, module_options
from ansible_collections.edgeft.failover.plugins.module_utils.module_result import run_module
from ansible_collections.edgeft.failover.plugins.module_utils.uninstall.steering import steering_cleanup


def main():
    run_module(AnsibleModule, dict(
        table=dict(type='int', default=constants.BACKUP_TABLE),
        priority=dict(type='int', default=constants.BACKUP_RULE_PRIORITY),
        pin_root=dict(type='path'),
        state_dir=module_options.state_dir(),
    ), steering_cleanup)


if __name__ == '__main__':
    main()
