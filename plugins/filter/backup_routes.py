# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The backup_route_refusal filter (documented in backup_route_refusal.yml)."""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.backup_routes.spec import OptionError, normalize_routes


def backup_route_refusal(routes, option="edgeft_backup_routes"):
    """Why the backup_routes module would refuse this declaration before reading the host, or ''."""
    try:
        normalize_routes(routes, option=option)
    except OptionError as e:
        return str(e)
    return ""


class FilterModule:
    def filters(self):
        return {"backup_route_refusal": backup_route_refusal}
