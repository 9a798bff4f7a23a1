#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: remove_paths
short_description: Remove edgeft's files, links and the directories they leave empty, in one run
version_added: 0.1.0
description:
  - Removes every path of O(paths) that exists, a directory with everything in it; then every link
    of O(links) that points at its target (a file of that name pointing elsewhere is not edgeft's
    and stays); then every directory of O(empty_dirs) that holds nothing else by then, deepest
    first. A directory that still holds anything stays and is reported in RV(kept).
  - One module run for what would otherwise be a file task per path, so that C(playbooks/uninstall.yml)
    costs one round trip per host for its files.
  - Refuses a path that is not a normalised absolute path at least two levels deep, naming the option,
    before anything is removed. Check mode and diff mode show what would go.
author:
  - edgeft maintainers (@edgeft)
options:
  paths:
    description:
      - Files, links and directories to remove; a directory goes with its contents.
    type: list
    elements: path
    default: []
  links:
    description:
      - Symbolic links to remove only if they point at O(links[].target).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The link.
        type: path
        required: true
      target:
        description: What the link must point at (its text, as C(readlink) shows it) to be removed.
        type: str
        required: true
  empty_dirs:
    description:
      - Directories to remove once empty, after the paths and links above are gone.
    type: list
    elements: path
    default: []
requirements:
  - root on the target for system paths
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes
'''

EXAMPLES = r'''
- name: Remove the agent, its configuration and its link, and /etc/edgeft once empty
  edgeft.failover.remove_paths:
    paths: [/usr/local/lib/edgeft/agent, /etc/edgeft/agent.json]
    links:
      - path: /usr/local/sbin/edgeft-agent
        target: /usr/local/lib/edgeft/agent/edgeft-agent
    empty_dirs: [/usr/local/lib/edgeft, /etc/edgeft]
'''

RETURN = r'''
removed:
  description: What was removed (or would be), paths first, then links, then emptied directories.
  returned: always
  type: list
  elements: str
  sample: ["/usr/local/lib/edgeft/agent", "/usr/local/sbin/edgeft-agent", "/etc/edgeft"]
kept:
  description: Directories of O(empty_dirs) that hold something else and stay.
  returned: always
  type: list
  elements: str
  sample: ["/usr/local/lib/edgeft"]
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils.module_result import run_module
from ansible_collections.edgeft.failover.plugins.module_utils.uninstall import paths


def main():
    run_module(AnsibleModule, dict(
        paths=dict(type='list', elements='path', default=[]),
        links=dict(type='list', elements='dict', default=[], options=dict(
            path=dict(type='path', required=True),
            target=dict(type='str', required=True),
        )),
        empty_dirs=dict(type='list', elements='path', default=[]),
    ), paths.run, pyroute2=False, diff_headers=('present', 'removed'))


if __name__ == '__main__':
    main()
