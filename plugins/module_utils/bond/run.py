# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bond module end to end: validate, check the driver and the host, plan the
steps, run them with rollback, record."""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils import constants
from ansible_collections.edgeft.failover.plugins.module_utils.bond import changes, kernel, spec
from ansible_collections.edgeft.failover.plugins.module_utils.bond.record import BondRecord
from ansible_collections.edgeft.failover.plugins.module_utils.bond.spec import OptionError

DEFAULT_STATE_DIR = constants.STATE_DIR


def bond(params, check_mode=False):
    """The module: (result, warnings). Raises OptionError (bad input, named),
    kernel.DriverMissing or kernel.KernelError (a change failed and was rolled back)."""
    state = params.get("state") or "present"
    if state not in ("present", "absent"):
        raise OptionError("state: %r is not one of present, absent" % state)
    name = spec.interface_name(params.get("name"), "name")
    desired = spec.normalize_bond(params) if state == "present" else None
    record = BondRecord(params.get("state_dir") or DEFAULT_STATE_DIR)
    warnings = []
    with kernel.open_ipr() as ipr:
        links = kernel.links(ipr)
        current = kernel.read_bond(name, links)
        if name in links and current is None:
            raise OptionError("name: %s exists and is a %s, not a bond; %s" % (
                name, links[name]["kind"] or "physical interface",
                "choose another name" if desired else "not removing it"))
        if desired is not None:
            if current is None and kernel.driver_status() == "absent":
                raise kernel.DriverMissing()
            errors, warnings = spec.host_problems(desired, links)
            if errors:
                raise OptionError("; ".join(errors))
        with record.locked_namespace(kernel.netns_id(), create=not check_mode):
            entry = record.entry(name)
            if desired is not None:
                steps = changes.present_steps(desired, current, links, entry)
                entry_after = changes.record_after(desired, current, links, entry)
            else:
                steps = changes.absent_steps(current, entry)
                entry_after = None
            if not check_mode:
                _commit(ipr, record, name, steps, entry, entry_after)
    return {
        "changed": bool(steps),
        "bond": changes.view(desired),
        "steps": [changes.step_text(s) for s in steps],
        "plan": changes.build_plan(desired),
        "diff": {"before": changes.view(current), "after": changes.view(desired)},
    }, warnings


def _commit(ipr, record, name, steps, entry, entry_after):
    old = entry or None
    if not steps:
        if old != entry_after:
            record.save(name, entry_after)  # bookkeeping only
        return
    if entry_after is not None:
        # Before enslaving: the ports' admin state is what a later release restores.
        record.save(name, entry_after)
    try:
        kernel.run_steps(ipr, steps, name)
    except kernel.KernelError:
        record.save(name, old)
        raise
    record.save(name, entry_after)
