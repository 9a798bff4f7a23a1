# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout_refusal and rollout_serial filters (documented in rollout_refusal.yml and rollout_serial.yml)."""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils import rollout


class FilterModule:
    def filters(self):
        return {"rollout_refusal": rollout.refusal, "rollout_serial": rollout.serial}
