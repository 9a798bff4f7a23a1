#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: network_files
short_description: Make edgeft's persisted network configuration files exactly a given set
version_added: 0.1.0
description:
  - Writes the network configuration and sysctl files that the C(edgeft.failover.network_persist)
    role renders, and removes the files edgeft wrote earlier with the same prefix that the set no
    longer holds, all in one run.
  - Only edgeft's own files are touched - a path must be in one of the renderers' directories and
    carry O(prefix) the way C(edgeft.failover.network_renderer_info) finds them (docs/persistence.md).
  - Each file is replaced atomically, owned by root with its mode. Missing directories are created
    with mode C(0755).
  - The changes are computed before any is made; check mode and diff mode show them without making them.
author:
  - edgeft maintainers (@edgeft)
options:
  root:
    description:
      - The root directory the paths are relative to (an image being built, or a scratch directory in tests).
    type: path
    default: /
  prefix:
    description:
      - The prefix of edgeft's file names; letters, digits, C(_) and C(-) only.
    type: str
    required: true
  state_dir:
    description:
      - Where the module records the directories it created under O(root) (C(network_files.json)); a run that
        leaves one of them empty removes it, so that removing every file puts the tree back as it was.
    type: path
    default: /var/lib/edgeft
  files:
    description:
      - Every file edgeft should have under O(root) with O(prefix); edgeft's other files with that prefix are removed.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: The path relative to O(root), for example C(etc/systemd/network/60-edgeft-fab0.network).
        type: str
        required: true
      content:
        description: The whole text of the file.
        type: str
        required: true
      mode:
        description: The file's mode.
        type: str
        choices: ['0644', '0600']
        default: '0644'
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes
'''

EXAMPLES = r'''
- name: Persist the sysctls of the plan
  edgeft.failover.network_files:
    prefix: 60-edgeft
    files:
      - path: etc/sysctl.d/60-edgeft.conf
        content: "net.ipv4.conf.fab0.rp_filter = 2\n"
'''

RETURN = r'''
files:
  description: Every file of O(files), as an absolute path.
  returned: always
  type: list
  elements: str
  sample: ["/etc/systemd/network/60-edgeft-fab0.network", "/etc/sysctl.d/60-edgeft.conf"]
written:
  description: The files written (or, in check mode, that would be), absolute paths.
  returned: always
  type: list
  elements: str
removed:
  description: edgeft's files with O(prefix) that O(files) no longer holds, removed (or that would be), absolute paths.
  returned: always
  type: list
  elements: str
  sample: ["/etc/systemd/network/60-edgeft-fab3.network"]
directories:
  description: The directories created (or that would be), relative to O(root).
  returned: always
  type: list
  elements: str
  sample: ["etc/systemd/network"]
removed_directories:
  description: Directories this module had created that the run left empty, removed (or that would be), absolute paths.
  returned: always
  type: list
  elements: str
  sample: ["/etc/systemd/networkd.conf.d"]
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils.module_result import run_module
from ansible_collections.edgeft.failover.plugins.module_utils.persist import write


def main():
    run_module(AnsibleModule, dict(
        root=dict(type='path', default='/'),
        prefix=dict(type='str', required=True),
        state_dir=dict(type='path', default='/var/lib/edgeft'),
        files=dict(type='list', elements='dict', required=True, options=dict(
            path=dict(type='str', required=True),
            content=dict(type='str', required=True),
            mode=dict(type='str', choices=['0644', '0600'], default='0644'),
        )),
    ), write.run, pyroute2=False)


if __name__ == '__main__':
    main()
