#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: footprint_info
short_description: Report what edgeft left on a host, from the records its modules keep
version_added: 0.1.0
description:
  - Reads the records edgeft's modules keep under O(state_dir), the pins under O(pin_root) and the
    pinned maps, and reports what edgeft made on the host - the attach points of the data path, the
    peer table, whether multihome, backup routes and bonds hold anything - so that
    C(playbooks/uninstall.yml) removes exactly that, and nothing on a host edgeft never touched.
  - Reports in RV(steering) why removing the data path now would move traffic (a plane drained or
    down, a peer steered off a plane).
  - Changes nothing, not even O(state_dir) or a lock file.
author:
  - edgeft maintainers (@edgeft)
options:
  pin_root:
    description:
      - The bpffs directory of this host's pinned edgeft maps, as given to M(edgeft.failover.ebpf_program).
    type: path
    default: /sys/fs/bpf/edgeft
  datapath_config:
    description:
      - The role's record of the data path modules' arguments (C(ebpf_failover_datapath_config)).
      - Defaults to C(datapath.json) in O(state_dir).
    type: path
requirements:
  - root on the target
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes.info_module
  - edgeft.failover.state_dir
'''

EXAMPLES = r'''
- name: Read what edgeft left on the host
  edgeft.failover.footprint_info:
    state_dir: /var/lib/edgeft
    pin_root: /sys/fs/bpf/edgeft
  register: footprint
'''

RETURN = r'''
state_dir_exists:
  description: Whether O(state_dir) exists.
  returned: always
  type: bool
attach:
  description: The attach points to detach with M(edgeft.failover.ebpf_program) O(edgeft.failover.ebpf_program#module:state=absent).
  returned: always
  type: list
  elements: dict
  sample: [{"interface": "fab0", "direction": "egress"}, {"interface": "fab0", "direction": "ingress"}]
pins:
  description: The names under O(pin_root).
  returned: always
  type: list
  elements: str
maps_pinned:
  description: Whether the edgeft maps are pinned under O(pin_root).
  returned: always
  type: bool
peer_table:
  description: The peer table's record for O(pin_root) (planes, peer names, neighbour entries) and the peers in the maps.
  returned: always
  type: dict
  sample: {"planes": [{"name": "a", "interface": "fab0"}], "peers": ["r2h1"], "map_peers": 1, "neighbors": ["198.18.2.11 dev fab0"]}
steering:
  description: Why removing the data path now would move traffic; empty when nothing is steered.
  returned: always
  type: list
  elements: str
  sample: ["plane a is drained: its traffic would go back onto it with the data path removed; ..."]
multihome:
  description: Whether the multihome record holds anything.
  returned: always
  type: bool
backup_routes:
  description: Whether the backup routes record of this network namespace holds anything.
  returned: always
  type: bool
bonds_created:
  description: The bonds edgeft created in this network namespace.
  returned: always
  type: list
  elements: str
bonds_kept:
  description: The bonds edgeft managed but did not create; the uninstall leaves them as they are.
  returned: always
  type: list
  elements: str
peer_drains:
  description: Whether per-peer drains are recorded for O(pin_root).
  returned: always
  type: bool
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils import module_options
from ansible_collections.edgeft.failover.plugins.module_utils.module_result import run_module
from ansible_collections.edgeft.failover.plugins.module_utils.uninstall.footprint import footprint


def main():
    run_module(AnsibleModule, dict(
        state_dir=module_options.state_dir(),
        pin_root=dict(type='path', default='/sys/fs/bpf/edgeft'),
        datapath_config=dict(type='path'),
    ), footprint, pyroute2=False)


if __name__ == '__main__':
    main()
