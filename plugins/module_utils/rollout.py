# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A rolling deployment's settings (playbooks/site.yml): checked, and turned into its batches.

site.yml's first play checks them on every host before any change (filter rollout_refusal);
its deployment play runs in the batches rollout_serial gives (the play's `serial`): one
canary host, then batches of `batch` hosts, each gated by host_health. Free of Ansible
imports; every error names the variable at fault.
"""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.module_options import batch_size, int_in_range

MAX_GATE_TIMEOUT_S = 3600
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


class RolloutError(EdgeftError, ValueError):
    """A rollout setting that cannot be right; the message names the edgeft_rollout_* variable."""


def _bool(value, name) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise RolloutError("%s: %r is not a boolean (true or false)" % (name, value))


def _batch(value):
    """A batch size as Ansible's serial takes it: a host count, or a percentage as 'N%'."""
    return batch_size(value, "edgeft_rollout_batch", RolloutError, ("host", "hosts"), "the fabric", "deploy", "25%")


def settings(values: dict) -> dict:
    """The rollout settings {canary, batch, max_fail_percentage, gate_timeout}, checked."""
    return {
        "canary": _bool(values.get("canary", True), "edgeft_rollout_canary"),
        "batch": _batch(values.get("batch", "25%")),
        "max_fail_percentage": int_in_range(values.get("max_fail_percentage", 0), "edgeft_rollout_max_fail_percentage",
                                            0, 100, RolloutError),
        "gate_timeout": int_in_range(values.get("gate_timeout", 60), "edgeft_rollout_gate_timeout", 1,
                                     MAX_GATE_TIMEOUT_S, RolloutError),
    }


def refusal(values: dict) -> str:
    """Why the settings cannot be used, naming the variable; '' when they can."""
    try:
        settings(values)
    except RolloutError as e:
        return str(e)
    return ""


def serial(values: dict) -> list:
    """The play's `serial`: [1, batch] with a canary, else [batch]; Ansible repeats the last size."""
    checked = settings(values)
    return ([1] if checked["canary"] else []) + [checked["batch"]]
