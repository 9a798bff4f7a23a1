# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Carry out the steps of changes.compute; on a failure, undo the ones done, newest first."""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.host import HostError

INVERSE_OP = {"addr_add": "addr_del", "addr_del": "addr_add", "route_add": "route_del", "route_del": "route_add",
              "rule_add": "rule_del", "rule_del": "rule_add"}


class ApplyError(EdgeftError, RuntimeError):
    """A step failed after validation; what was done has been undone unless rolled_back is False."""

    def __init__(self, msg, rolled_back=True):
        super().__init__(msg)
        self.rolled_back = rolled_back


def inverse(step) -> dict:
    op = step["op"]
    if op in ("sysctl", "mtu"):
        return dict(step, old=step["new"], new=step["old"])
    if op == "link":
        return dict(step, up=not step["up"])
    return dict(step, op=INVERSE_OP[op])


def execute(host, step) -> None:
    op = step["op"]
    if op == "sysctl":
        host.set_sysctl(step["key"], step["new"])
    elif op == "mtu":
        host.set_mtu(step["dev"], step["new"])
    elif op == "link":
        host.set_up(step["dev"], step["up"])
    elif op in ("addr_add", "addr_del"):
        host.address(op[5:], step["dev"], step["cidr"], failover=bool(step.get("failover")))
    elif op in ("route_add", "route_del"):
        host.route(op[6:], step["route"])
    elif op in ("rule_add", "rule_del"):
        host.rule(op[5:], step["rule"])
    else:
        raise ValueError("unknown step %r" % op)


def apply_steps(host, steps) -> None:
    """All steps, or none: a failing step undoes the steps before it."""
    done = []
    for step in steps:
        try:
            execute(host, step)
        except Exception as e:  # whatever failed, the steps before it must not stay half-applied
            if not isinstance(e, HostError):
                e = "%s: %s" % (type(e).__name__, e)
            failed = rollback(host, done)
            if failed:
                raise ApplyError("%s; rolling back the %d change(s) made before it left %d undone: %s"
                                 % (e, len(done), len(failed), "; ".join(failed)), rolled_back=False) from None
            raise ApplyError("%s; the %d change(s) made before it were rolled back" % (e, len(done))) from None
        done.append(step)


def rollback(host, done) -> list:
    """Undo done steps newest first; the errors of steps that could not be undone."""
    errors = []
    for step in reversed(done):
        try:
            execute(host, inverse(step))
        except Exception as e:  # keep undoing the others
            errors.append(str(e) if isinstance(e, HostError) else "%s: %s" % (type(e).__name__, e))
    return errors
