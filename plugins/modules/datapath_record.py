#!/usr/bin/python
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r'''
---
module: datapath_record
short_description: Record the data path's arguments for the restore at boot, and drop the objects no record names
version_added: 0.1.0
description:
  - Writes the arguments a deployment gave M(edgeft.failover.ebpf_program) and M(edgeft.failover.peer_table)
    to O(path), the file C(edgeft-agent restore-datapath) reads at boot to rebuild what a reboot loses
    (the tc filters and the pinned maps). The file is replaced whole (a crash leaves the old or the new
    record), as JSON with sorted keys.
  - With O(prune_objects), the data path objects (C(edgeft-p*.bpf.o)) in that directory that the new
    record does not load are removed after the record is written, so the objects the restore at boot
    needs are always on disk.
author:
  - edgeft maintainers (@edgeft)
options:
  path:
    description:
      - The record file, an absolute path; its directory is created when missing.
    type: path
    required: true
  record:
    description:
      - The arguments of each step of the restore, C(ebpf_program) and C(peer_table), as the
        modules were given them. Other keys are refused.
    type: dict
    required: true
  prune_objects:
    description:
      - The directory of the data path's objects. Files named C(edgeft-p*.bpf.o) in it that the
        record's C(ebpf_program) arguments (its C(object) and C(attach[].object)) do not
        name are removed. Other files are left alone.
      - Leave it out for the bcc loader, which installs sources instead of objects.
    type: path
requirements:
  - root, to write the record and remove objects in the role's directories
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - edgeft.failover.attributes
attributes:
  check_mode:
    support: full
    details: Reports whether the record would change and which objects would go; changes nothing.
seealso:
  - module: edgeft.failover.ebpf_program
  - module: edgeft.failover.peer_table
'''

EXAMPLES = r'''
- name: Record the data path's arguments for the restore at boot
  edgeft.failover.datapath_record:
    path: /var/lib/edgeft/datapath.json
    record:
      ebpf_program: "{{ edgeft_program_args }}"
      peer_table: "{{ edgeft_peer_table_args }}"
    prune_objects: /usr/local/lib/edgeft/bpf
'''

RETURN = r'''
path:
  description: The record file.
  returned: always
  type: str
  sample: /var/lib/edgeft/datapath.json
removed:
  description: The objects removed (in check mode, that would be removed).
  returned: always
  type: list
  elements: str
  sample:
    - /usr/local/lib/edgeft/bpf/edgeft-p0-54adc8eaa58ad8a3.bpf.o
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.edgeft.failover.plugins.module_utils.module_result import run_module
from ansible_collections.edgeft.failover.plugins.module_utils.program.restore_record import ARGUMENT_SPEC, run


def main():
    run_module(AnsibleModule, ARGUMENT_SPEC, run, pyroute2=False, diff_headers=('record before', 'record after'))


if __name__ == '__main__':
    main()
