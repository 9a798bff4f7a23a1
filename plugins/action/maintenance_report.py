# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The maintenance_report action (documented in plugins/modules/maintenance_report.py): writes
the switch maintenance report on the controller, without a module run."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.edgeft.failover.plugins.module_utils.maintenance import report_files


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("dir", "switch", "row", "report"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        directory, switch, row = args.get("dir"), args.get("switch"), args.get("row")
        if not isinstance(directory, str) or not directory:
            raise AnsibleActionFail("dir: the report directory is required (a path on the controller)")
        if (switch is None) != (row is None):
            raise AnsibleActionFail("switch and row: give both (the switch's line) or neither")
        if row is not None and not isinstance(row, dict):
            raise AnsibleActionFail("row: expected the switch's line as a dict, got %s" % type(row).__name__)
        changed = False
        try:
            if row is not None:
                changed = report_files.write_row(directory, str(switch), dict(row))
            if boolean(args.get("report", True), strict=False):
                lines, table, report_changed = report_files.write_report(directory)
                result.update(rows=lines, table=table)
                changed = changed or report_changed
        except (OSError, ValueError) as e:
            raise AnsibleActionFail("dir: cannot write the report in %s: %s" % (directory, to_native(e))) from None
        result["changed"] = changed
        return result
