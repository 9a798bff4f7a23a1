# -*- coding: utf-8 -*-
# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

# The work is done by the action plugin of the same name, on the controller.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: maintenance_report
short_description: Write the switch maintenance report on the controller
version_added: 0.1.0
description:
  - Writes a switch's line of the maintenance report (C(switches/NAME.json) under O(dir)) and the
    report of the run so far, from every switch's line - C(report.json) for machines and
    C(report.txt), a table, for people. Each file is replaced whole.
  - Runs on the controller as an action, without a module run, so the report costs next to nothing
    per switch; used by the C(edgeft.failover.switch_maintenance) role.
options:
  dir:
    description: The report directory of the run, on the controller.
    type: path
    required: true
  switch:
    description: The switch whose line O(row) is; with O(row).
    type: str
  row:
    description: The switch's line of the report (the C(edgeft.failover.maintenance_row) filter); with O(switch).
    type: dict
  report:
    description: Write C(report.json) and C(report.txt) from every switch's line written so far.
    type: bool
    default: true
attributes:
  check_mode:
    support: none
    details: The report is written in check mode too - it says what would move.
  diff_mode:
    support: none
  platform:
    platforms: posix
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
author:
  - edgeft maintainers (@edgeft)
"""

EXAMPLES = r"""
- name: Write this switch's line, then the report of the run so far
  edgeft.failover.maintenance_report:
    dir: "{{ report_dir }}"
    switch: "{{ inventory_hostname }}"
    row: "{{ row }}"
    report: false

- name: Write the report of the run so far
  edgeft.failover.maintenance_report:
    dir: "{{ report_dir }}"
  run_once: true
"""

RETURN = r"""
rows:
  description: Every switch's line written so far, in the order the switches started.
  returned: when O(report=true)
  type: list
  elements: dict
table:
  description: The report as a table (the content of C(report.txt)).
  returned: when O(report=true)
  type: str
"""
