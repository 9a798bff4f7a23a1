#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: host_files
short_description: Install files from the controller, directories and links on a host, in one run
version_added: 0.1.0
description:
  - Makes each file of O(files) hold the content of its controller file or text, and each directory of
    O(directories) and link of O(links) exist, every one owned by root with its mode. What already is
    as wanted is left alone.
  - One module run for what would otherwise be a C(copy), C(template) or C(file) task per path. An unchanged
    host costs one round trip, a changed one two, whatever the number of files. The action sends each
    file's digest first and the content only of the files that differ.
  - Everything is checked and compared before anything changes. The changes are then made together; on a
    failure the ones already made are put back and the task fails naming the error.
  - A missing parent directory of a path is created with mode C(0755). A link at a file's O(files[].dest) is
    replaced by the file; a file, directory or other object where a link or a directory is wanted is refused.
  - Check mode and diff mode show every change without making it.
author:
  - edgeft maintainers (@edgeft)
options:
  files:
    description:
      - Files to install.
    type: list
    elements: dict
    default: []
    suboptions:
      dest:
        description: The file on the host, a normalised absolute path.
        type: str
        required: true
      src:
        description:
          - A file on the controller whose bytes the file gets, found like C(copy)'s O(ansible.builtin.copy#module:src)
            (a role's C(files/), or an absolute path). Binary files are fine.
          - Exactly one of O(files[].src) and O(files[].content).
        type: path
      content:
        description:
          - The file's whole text (UTF-8), for example from C(lookup('ansible.builtin.template', ...)).
          - Exactly one of O(files[].src) and O(files[].content).
        type: str
      mode:
        description: The file's permission bits, as a quoted octal string.
        type: raw
        default: '0644'
      sha256:
        description:
          - Set by the action (the digest of the file's content); do not set it in a task.
        type: str
      content_base64:
        description:
          - Set by the action (the content of a file that differs, when the module asks for it); do not set it in a task.
        type: str
  directories:
    description:
      - Directories to create (with their missing parents, C(0755)) or give their mode and root ownership.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The directory, a normalised absolute path.
        type: str
        required: true
      mode:
        description: Its permission bits, as a quoted octal string.
        type: raw
        default: '0755'
  links:
    description:
      - Symbolic links to create or point elsewhere.
    type: list
    elements: dict
    default: []
    suboptions:
      dest:
        description: The link, a normalised absolute path.
        type: str
        required: true
      src:
        description: What the link points at (its text, as C(readlink) shows it).
        type: str
        required: true
requirements:
  - root on the target (the paths are made root-owned)
notes:
  - The action plugin of the same name reads O(files[].src) and O(files[].content) on the controller and gives the
    module O(files[].sha256) and, when it asks for them, O(files[].content_base64) instead.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes
'''

EXAMPLES = r'''
- name: Install the agent's code, its configuration, its unit and its link in one run
  edgeft.failover.host_files:
    directories:
      - path: /etc/edgeft
    files:
      - src: "{{ role_path }}/../../bin/edgeft-agent"
        dest: /usr/local/lib/edgeft/agent/edgeft-agent
        mode: '0755'
      - content: "{{ lookup('ansible.builtin.template', 'agent.json.j2') }}"
        dest: /etc/edgeft/agent.json
    links:
      - dest: /usr/local/sbin/edgeft-agent
        src: /usr/local/lib/edgeft/agent/edgeft-agent
  register: installed

- name: Restart the agent when its configuration changed
  ansible.builtin.systemd_service:
    name: edgeft-agent.service
    state: restarted
  when: "'/etc/edgeft/agent.json' in installed.changed_paths"
'''

RETURN = r'''
changed_paths:
  description:
    - The directories, files and links created or changed (or that would be, in check mode), in that order.
  returned: always
  type: list
  elements: str
  sample: ["/etc/edgeft", "/etc/edgeft/agent.json", "/usr/local/sbin/edgeft-agent"]
need_content:
  description:
    - Files whose content differs and was not sent; nothing was changed. The action sends them and runs again,
      so a task never returns them outside check mode.
  returned: always
  type: list
  elements: str
  sample: []
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils import host_files
from ansible_collections.edgeft.failover.plugins.module_utils.module_result import run_module


def main():
    run_module(AnsibleModule, dict(
        files=dict(type='list', elements='dict', default=[], options=dict(
            dest=dict(type='str', required=True),
            src=dict(type='path'),
            content=dict(type='str'),
            mode=dict(type='raw', default='0644'),
            sha256=dict(type='str'),
            content_base64=dict(type='str'),
        )),
        directories=dict(type='list', elements='dict', default=[], options=dict(
            path=dict(type='str', required=True),
            mode=dict(type='raw', default='0755'),
        )),
        links=dict(type='list', elements='dict', default=[], options=dict(
            dest=dict(type='str', required=True),
            src=dict(type='str', required=True),
        )),
    ), host_files.run, pyroute2=False)


if __name__ == '__main__':
    main()
