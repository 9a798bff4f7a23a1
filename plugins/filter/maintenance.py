# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The switch maintenance filters (each documented in its own YAML file here).

Thin: they turn Ansible's hostvars into plain data and call
module_utils/maintenance, where the logic is tested without Ansible.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.edgeft.failover.plugins.module_utils.maintenance import batches, guards, model, report, results, verify


def _inventory(hostvars, groups) -> dict:
    """The plain inventory the model needs: groups, and the edgeft vars of switches and fabric hosts."""
    plain_groups = {name: list(members) for name, members in dict(groups).items()}
    wanted = set(plain_groups.get(model.SWITCH_GROUP) or []) | set(plain_groups.get(model.FABRIC_GROUP) or [])
    for switch in plain_groups.get(model.SWITCH_GROUP) or []:
        # A switch's hosts group may hold hosts outside the fabric group: the model rejects them by name.
        group = model.hosts_group(switch, {k: hostvars[switch].get(k) for k in model.SWITCH_VARS} if switch in hostvars else {})
        wanted.update(plain_groups.get(group) or [])
    plain_vars = {}
    for host in wanted:
        if host not in hostvars:
            continue
        hv = hostvars[host]
        plain_vars[host] = {k: hv.get(k) for k in model.HOST_VARS + model.SWITCH_VARS if hv.get(k) is not None}
    return {"groups": plain_groups, "hostvars": plain_vars}


def maintenance_plan(targets, hostvars, groups, option="edgeft_switch", serial=1, max_fail_percentage=0,
                     serial_option="edgeft_serial", max_fail_option="edgeft_max_fail_percentage"):
    try:
        inventory = _inventory(hostvars, groups)
        plan = model.maintenance_plan(targets, inventory, option)
        plan["conflicts"] = batches.shared_hosts([plan["plans"][s] for s in plan["switches"]])
        plan["batches"] = batches.batches(plan["switches"], plan["plans"], serial, serial_option)
        plan["members"] = [batches.members(b, plan["plans"]) for b in plan["batches"]]
        plan["max_fail_percentage"] = batches.max_fail_percentage(max_fail_percentage, max_fail_option)
        return plan
    except model.MaintenanceError as e:
        raise AnsibleFilterError(str(e)) from None


def _registered(hosts, hostvars, name) -> dict:
    return {h: hostvars[h].get(name) for h in hosts if h in hostvars}


def maintenance_results(hosts, hostvars, name, active):
    """{host: what it registered as `name`} for the hosts whose step succeeded and are still in the play."""
    return results.succeeded(_registered(hosts, hostvars, name), list(active))


def maintenance_failures(hosts, hostvars, name, active):
    """'host: message' for the hosts whose step `name` failed or that left the play."""
    return results.failures(_registered(hosts, hostvars, name), list(active))


def maintenance_stop(batch, active, max_fail_percentage=0):
    """The batch's failed switches when they are more than the run allows; empty when it goes on."""
    return batches.stop_after(list(batch), list(active), int(max_fail_percentage))


def maintenance_refusals(plan, reports, checks=None):
    reports = dict(reports or {})
    if checks is None:  # the checks plane_state ran with check_planes, in each host's report
        checks = {host: r.get("checks") or {} for host, r in reports.items() if isinstance(r, dict)}
    return guards.refusals(plan, reports, dict(checks))


def maintenance_verdict(plan, after, before=None, window_ms=0, phase="drained", drains=None):
    if phase == "drained":
        return verify.still_used(plan, dict(before or {}), dict(after or {}), int(window_ms),
                                 None if drains is None else dict(drains))
    if phase == "undrained":
        return verify.leftovers(plan, dict(after or {}))
    raise AnsibleFilterError("maintenance_verdict: phase must be drained or undrained, not %r" % (phase,))


def maintenance_row(plan, before, after, drained_at=None, undrained_at=None, failures=None, status="done", verified=None):
    return report.switch_row(plan, dict(before or {}), dict(after or {}), drained_at, undrained_at, failures, status,
                             dict(verified) if verified else None)


def maintenance_table(rows):
    return report.render(list(rows or []))


class FilterModule:
    def filters(self):
        return {
            "maintenance_plan": maintenance_plan,
            "maintenance_results": maintenance_results,
            "maintenance_failures": maintenance_failures,
            "maintenance_stop": maintenance_stop,
            "maintenance_refusals": maintenance_refusals,
            "maintenance_verdict": maintenance_verdict,
            "maintenance_row": maintenance_row,
            "maintenance_table": maintenance_table,
        }
