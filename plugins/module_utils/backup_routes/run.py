# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The backup_routes module end to end: validate, compare, apply with rollback, record."""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils import constants
from ansible_collections.edgeft.failover.plugins.module_utils.backup_routes import changes, kernel, spec
from ansible_collections.edgeft.failover.plugins.module_utils.backup_routes.record import RouteRecord
from ansible_collections.edgeft.failover.plugins.module_utils.backup_routes.spec import OptionError
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError

DEFAULT_STATE_DIR = constants.STATE_DIR


class ApplyError(EdgeftError, RuntimeError):
    """A kernel change failed after validation; the message says what and whether it was rolled back."""


def _text(route):
    line = spec.route_text(route)
    proto = route.get("proto", kernel.PROTO)
    return line if proto == kernel.PROTO else "%s proto %d" % (line, proto)


class Journal:
    """Undo steps of the changes made so far, run newest first on failure."""

    def __init__(self):
        self.undo = []

    def run_undo(self):
        failed = []
        for what, step in reversed(self.undo):
            try:
                step()
            except (OSError, kernel.KernelError, kernel.NetlinkError) as e:
                failed.append("%s (%s)" % (what, e))
        return failed


def apply(ipr, rc, writes, restores, ifindex, journal):
    """Sysctls first (new routes fail over from their first moment), then new and
    replaced routes, then removals (a replaced route never leaves a gap), then
    sysctls put back."""
    for family, dev, new, old in writes:
        step = "setting %s to %s" % (kernel.sysctl_key(family, dev), new)
        kernel.write_sysctl(family, dev, new)
        journal.undo.append((step, lambda f=family, d=dev, v=old: kernel.write_sysctl(f, d, v)))
    for route in rc.add:
        what = "adding %s" % spec.route_text(route)
        try:
            kernel.replace_route(ipr, kernel.route_args(route, ifindex))
        except kernel.NetlinkError as e:
            raise ApplyError("%s: %s failed: %s" % (route["where"], what, e)) from None
        journal.undo.append((what, lambda r=route: kernel.delete_route(ipr, r["family"], r["dst"], r["metric"])))
    for route, old in rc.update:
        what = "replacing %s with %s" % (_text(old), spec.route_text(route))
        try:
            kernel.replace_route(ipr, kernel.route_args(route, ifindex))
        except kernel.NetlinkError as e:
            raise ApplyError("%s: %s failed: %s" % (route["where"], what, e)) from None
        journal.undo.append((what, lambda o=old: kernel.restore_route(ipr, o["restore"])))
    for old in rc.remove:
        what = "removing %s" % _text(old)
        try:
            kernel.delete_route(ipr, old["family"], old["dst"], old["metric"])
        except kernel.NetlinkError as e:
            raise ApplyError("%s failed: %s" % (what, e)) from None
        journal.undo.append((what, lambda o=old: kernel.restore_route(ipr, o["restore"])))
    for family, dev, value in restores:
        previous = kernel.read_sysctl(family, dev)
        kernel.write_sysctl(family, dev, value)
        journal.undo.append(("restoring %s" % kernel.sysctl_key(family, dev),
                             lambda f=family, d=dev, v=previous: kernel.write_sysctl(f, d, v)))


def _select(state, declared, recorded):
    """(kernel routes to install, recorded routes that may go, recorded routes kept as they are).

    present: the declared routes, exactly. absent: the recorded routes to the
    declared destinations go, or every recorded route when none is declared.
    """
    if state == "present":
        keys = {spec.route_key(r) for r in declared}
        return declared, [r for r in recorded if spec.route_key(r) not in keys], []
    targets = declared
    removable = [r for r in recorded if not targets or (r["family"], r["dst"]) in targets]
    return [], removable, [r for r in recorded if r not in removable]


def backup_routes(params, check_mode=False):
    """The module: (result, warnings). Raises OptionError (bad input, named) or ApplyError."""
    state = params.get("state") or "present"
    if state not in ("present", "absent"):
        raise OptionError("state: %r is not one of present, absent" % state)
    # Bad input fails before anything is opened.
    if state == "present":
        declared = spec.normalize_routes(params.get("routes"))
    else:
        declared = spec.normalize_destinations(params.get("routes"))
    manage = params.get("set_ignore_linkdown", True) is not False
    record = RouteRecord(params.get("state_dir") or DEFAULT_STATE_DIR, kernel.netns_id())
    with kernel.open_ipr() as ipr:
        with record.locked(create=not check_mode):
            desired, removable, kept = _select(state, declared, record.routes)
            links = kernel.links(ipr)
            errors, warnings = changes.host_problems(desired, links, check_mode)
            if errors:
                raise OptionError("; ".join(errors))
            current = kernel.main_routes(ipr)
            owned = {spec.route_key(r) for r in record.routes}
            rc = changes.route_changes(desired, current, removable, owned)
            warnings.extend(rc.warnings)
            needed = changes.needed_sysctls(desired + kept)
            values = {}
            for key in set(needed) | set(record.sysctls):
                family, dev = changes.split_key(key)
                values[key] = (kernel.read_sysctl(family, dev), kernel.effective_sysctl(family, dev))
            writes, restores, sysctls_after = changes.sysctl_changes(needed, values, record.sysctls, manage)
            changed = rc.changed or bool(writes or restores)
            routes_after = [spec.stored(r) for r in desired] + kept
            before, after = _diff(current, desired + removable, desired + kept, values, writes, restores)
            if not check_mode:
                _commit(ipr, record, rc, writes, restores, links, routes_after, sysctls_after, changed)
    return {
        "changed": changed,
        "added": [spec.route_text(r) for r in rc.add],
        "updated": [spec.route_text(r) for r, _old in rc.update],
        "removed": [_text(r) for r in rc.remove],
        "routes": after["routes"],
        "sysctls": {"set": {kernel.sysctl_key(f, d): v for f, d, v, _old in writes},
                    "restored": {kernel.sysctl_key(f, d): v for f, d, v in restores}},
        "plan": changes.build_plan(desired + kept, links),
        "diff": {"before": before, "after": after},
    }, warnings


def _diff(current, compared, after_routes, values, writes, restores):
    """(before, after) for --diff: the kernel's routes at the keys involved and the sysctls, then as declared."""
    before = {"routes": sorted(_text(current[spec.route_key(r)]) for r in compared if spec.route_key(r) in current),
              "sysctls": {k: values[k][0] for k in sorted(values) if values[k][0] is not None}}
    sysctls = dict(before["sysctls"])
    sysctls.update({kernel.sysctl_key(f, d): v for f, d, v, _old in writes})
    sysctls.update({kernel.sysctl_key(f, d): v for f, d, v in restores})
    return before, {"routes": sorted(spec.route_text(r) for r in after_routes), "sysctls": sysctls}


def _commit(ipr, record, rc, writes, restores, links, routes_after, sysctls_after, changed):
    old_routes, old_sysctls = record.routes, record.sysctls
    if not changed:
        if old_routes != routes_after or old_sysctls != sysctls_after:
            record.save(routes_after, sysctls_after)  # bookkeeping only (adopted or vanished routes)
        return
    # Record the intent first: a crash part-way leaves nothing this module made unrecorded.
    intent = {spec.route_key(r): r for r in old_routes}
    intent.update({spec.route_key(r): r for r in routes_after})
    pending = dict(sysctls_after)
    pending.update(old_sysctls)
    record.save(list(intent.values()), pending)
    journal = Journal()
    ifindex = {name: link["ifindex"] for name, link in links.items()}
    try:
        apply(ipr, rc, writes, restores, ifindex, journal)
        record.save(routes_after, sysctls_after)
    except (ApplyError, kernel.KernelError, kernel.NetlinkError, OSError) as e:
        failed = journal.run_undo()
        try:
            record.save(old_routes, old_sysctls)
        except OSError as save_error:
            failed.append("restoring the record (%s)" % save_error)
        if failed:
            raise ApplyError("backup_routes: %s; rolling back failed for: %s. Check `ip route` and run the task again"
                             % (e, "; ".join(failed))) from None
        raise ApplyError("backup_routes: %s; rolled back, nothing was changed" % e) from None
