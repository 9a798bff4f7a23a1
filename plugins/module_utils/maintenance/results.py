# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the hosts behind a switch registered in one step, as the switch's decisions read it.

Each host runs the step itself (the play's forks run them in parallel) and registers its
result; the switch then judges them all. ``registered`` maps a host to the value it
registered (a module result, or a loop's ``{"results": [...]}``), ``active`` lists the
hosts still in the play: a host that left it (unreachable) may hold a result of an
earlier batch, which must not be read as this step's.
"""

from __future__ import annotations


def _ok(result) -> bool:
    return isinstance(result, dict) and not result.get("failed") and not result.get("skipped")


def _label(item) -> str:
    return item if isinstance(item, str) else " ".join(str(x) for x in item) if isinstance(item, (list, tuple)) else str(item)


def succeeded(registered: dict, active) -> dict:
    """{host: result} of the hosts whose step succeeded; a loop's as {host: {item: result}}."""
    out = {}
    for host, result in registered.items():
        if host not in active or not isinstance(result, dict) or result.get("skipped"):
            continue
        if "results" in result:
            out[host] = {_label(r.get("item")): r for r in result["results"] if _ok(r)}
        elif _ok(result):
            out[host] = result
    return out


def _message(r: dict) -> str:
    if r.get("msg"):
        return r["msg"]
    if r.get("healthy") is False:  # plane_check's until ran out of retries
        return "check probes to %s were lost, %d tries" % (", ".join(r.get("unhealthy_peers") or []) or "every peer",
                                                           r.get("attempts") or 1)
    return "failed"


def failures(registered: dict, active, item_name: str = "plane") -> list:
    """'host: message' for each host whose step failed, and each one that left the play;
    a loop's items are named `item_name` (the role loops over planes)."""
    out = []
    for host, result in registered.items():
        if host not in active:
            out.append("%s: unreachable, or failed before this step" % host)
            continue
        if not isinstance(result, dict) or result.get("skipped"):
            continue
        items = result.get("results") if "results" in result else [result]
        for r in items:
            if isinstance(r, dict) and r.get("failed"):
                where = host if "item" not in r else "%s %s %s" % (host, item_name, _label(r["item"]))
                out.append("%s: %s" % (where, _message(r)))
    return out
