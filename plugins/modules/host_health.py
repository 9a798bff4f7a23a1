#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: host_health
short_description: Judge whether a deployed edgeft host is healthy, as a rollout gate
version_added: 0.1.0
description:
  - Reports whether this host's edgeft works, one line per problem found, so that a rolling
    deployment can stop before its next batch and name the host and why
    (C(playbooks/site.yml) runs it after each batch).
  - Healthy means every plane of O(planes) (or, without it, every plane
    M(edgeft.failover.peer_table) recorded) is configured in the pinned maps under
    O(pin_root), up and not drained; the peer table holds exactly O(peers); every peer of
    O(must_answer) answers check probes on every plane (see M(edgeft.failover.plane_check));
    and, with O(agent_endpoint), the failover agent answers there and judges every plane
    and every path to the peers of O(must_answer) up.
  - Check probes are answered by the peers' data path, so only peers already deployed can
    answer them; peers deployed later belong in O(peers) but not in O(must_answer).
  - Changes nothing, so it runs the same in check mode, and C(changed) is always false. An
    unhealthy host does not fail the task; test RV(healthy) or RV(problems).
author:
  - edgeft maintainers (@edgeft)
options:
  peers:
    description:
      - Inventory names of every peer the peer table must hold, exactly
        (the names given to M(edgeft.failover.peer_table)).
    type: list
    elements: str
    required: true
  must_answer:
    description:
      - The peers of O(peers) that must answer check probes on every plane.
      - When omitted, every peer of O(peers). An empty list probes nothing.
    type: list
    elements: str
  agent_endpoint:
    description:
      - C(ADDRESS:PORT) of the agent's C(/status) (its C(metrics_listen)). When given, an agent
        that does not answer there, or judges a plane or a path to a peer of O(must_answer)
        down, makes the host unhealthy. When omitted, the agent is not judged.
    type: str
  count:
    description: Check probes sent to each peer on each plane (1 to 1000).
    type: int
    default: 3
  max_loss_percent:
    description:
      - A peer that lost more of its check probes than this (0 to 100) on a plane is a
        problem. A peer that answered none always is.
    type: int
    default: 0
requirements:
  - root on the target
  - pyroute2 on the target (Debian package C(python3-pyroute2))
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes.info_module
  - edgeft.failover.pin_root
  - edgeft.failover.planes.names_only
  - edgeft.failover.state_dir
seealso:
  - module: edgeft.failover.plane_check
  - module: edgeft.failover.plane_state
'''

EXAMPLES = r'''
- name: Wait until the host is healthy, at most a minute
  edgeft.failover.host_health:
    pin_root: /sys/fs/bpf/edgeft
    planes: "{{ edgeft_planes | map('dict2items') | map('selectattr', 'key', 'in', ['name', 'interface'])
      | map('items2dict') | list }}"
    peers: "{{ groups['fabric'] | difference([inventory_hostname]) }}"
    agent_endpoint: 127.0.0.1:9531
  register: health
  until: health.healthy
  retries: 30
  delay: 2

- name: Stop here, naming the host and why
  ansible.builtin.assert:
    that: health.healthy
    fail_msg: "{{ inventory_hostname }}: {{ health.problems | join('; ') }}"
'''

RETURN = r'''
healthy:
  description: No problem was found.
  returned: always
  type: bool
  sample: false
problems:
  description: One line per problem, naming the plane, the peers or the agent concerned.
  returned: always
  type: list
  elements: str
  sample: ["plane a: check probes unanswered or lost by 1 of 3 peers: r2h1"]
planes:
  description: Each plane of O(planes) as the maps hold it.
  returned: always
  type: list
  elements: dict
  sample: [{name: a, interface: fab0, configured: true, up: true, drained: false}]
checks:
  description:
    - Per plane, how many peers were probed and which of them did not answer well
      (empty when the data path itself has a problem, which is reported first).
  returned: always
  type: dict
  sample: {a: {checked: 3, unhealthy_peers: []}, b: {checked: 3, unhealthy_peers: []}}
agent:
  description: Whether the agent answered, with its pid, uptime and session; null without O(agent_endpoint).
  returned: always
  type: dict
  sample: {answered: true, pid: 812, uptime_ms: 5230, session: 3061742290}
must_answer:
  description: The peers whose check probes and agent paths were judged, sorted.
  returned: always
  type: list
  elements: str
  sample: [r1h2, r2h1, r2h2]
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils import module_options
from ansible_collections.edgeft.failover.plugins.module_utils.health import gate
from ansible_collections.edgeft.failover.plugins.module_utils.module_result import finish, require_pyroute2


def main():
    module = AnsibleModule(
        argument_spec=dict(
            pin_root=module_options.pin_root(),
            state_dir=module_options.state_dir(),
            planes=module_options.planes(),
            peers=dict(type='list', elements='str', required=True),
            must_answer=dict(type='list', elements='str'),
            agent_endpoint=dict(type='str'),
            count=dict(type='int', default=3),
            max_loss_percent=dict(type='int', default=0),
        ),
        supports_check_mode=True,
    )
    require_pyroute2(module)
    finish(module, lambda: gate.host_health(module.params))


if __name__ == '__main__':
    main()
