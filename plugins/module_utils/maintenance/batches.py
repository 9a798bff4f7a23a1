# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A maintenance run's batches of switches, checked before any host changes.

The run is one play over the switches and the hosts behind them: each batch's
host steps run on those hosts in parallel (the play's forks), so a batch must
never hold two switches that serve one host - that host would be drained by
both, and a failure of one switch would roll back the other's drain.
``serial`` is read as Ansible reads a play's: a switch count, a percentage of
the switches such as '50%', or a list of them, the last repeated.
"""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.maintenance.model import MaintenanceError
from ansible_collections.edgeft.failover.plugins.module_utils.module_options import batch_size, int_in_range


def _size(value, total: int, name: str) -> int:
    """One batch size: a count, or a percentage of `total` rounded down, at least 1."""
    size = batch_size(value, name, MaintenanceError, ("switch", "switches"), "the switches", "maintain", "50%")
    return max(1, total * int(size[:-1]) // 100) if isinstance(size, str) else size


def batch_sizes(serial, total: int, name: str = "edgeft_serial") -> list:
    """Each batch's size, in order, covering `total` switches."""
    values = serial if isinstance(serial, (list, tuple)) else [serial]
    if not values:
        raise MaintenanceError("%s: an empty list gives no batch size; give a count such as 1" % name)
    sizes = [_size(v, total, name) for v in values]
    out, left = [], total
    while left > 0:
        size = min(sizes[min(len(out), len(sizes) - 1)], left)
        out.append(size)
        left -= size
    return out


def shared_hosts(plans: list) -> list:
    """Why the switches of one batch cannot go together: they serve the same host."""
    seen, errors = {}, []
    for p in plans:
        for h in p["hosts"]:
            other = seen.get(h)
            if other is None:
                seen[h] = p
            elif other["plane"] != p["plane"]:
                errors.append("%s and %s are in the same batch and both serve %s (planes %s and %s): maintain them "
                              "in different batches (serial)" % (other["switch"], p["switch"], h, other["plane"], p["plane"]))
            else:
                errors.append("%s and %s are in the same batch and both serve %s (plane %s): a host's plane is "
                              "drained for one switch at a time; maintain them in different batches (serial)"
                              % (other["switch"], p["switch"], h, p["plane"]))
    return errors


def batches(switches: list, plans: dict, serial=1, name: str = "edgeft_serial") -> list:
    """The switches cut into batches of `serial`; refused when a batch's switches share a host."""
    out, start = [], 0
    for size in batch_sizes(serial, len(switches), name):
        out.append(list(switches[start:start + size]))
        start += size
    errors = []
    for batch in out:
        errors.extend(shared_hosts([plans[s] for s in batch]))
    if errors:
        raise MaintenanceError("; ".join(errors))
    return out


def members(batch: list, plans: dict) -> dict:
    """{switch or host behind it: its switch} for one batch (shared_hosts refused any overlap)."""
    out = {}
    for s in batch:
        out[s] = s
        for h in plans[s]["hosts"]:
            out.setdefault(h, s)
    return out


def max_fail_percentage(value, name: str = "edgeft_max_fail_percentage") -> int:
    return int_in_range(value, name, 0, 100, MaintenanceError)


def stop_after(batch: list, still_in_play: list, max_fail: int) -> list:
    """The switches of `batch` that failed (left the play), when more failed than `max_fail`
    percent of the batch allows: no later batch may start then. Empty when the run goes on."""
    failed = [s for s in batch if s not in still_in_play]
    if failed and len(failed) * 100 > max_fail * len(batch):
        return failed
    return []
