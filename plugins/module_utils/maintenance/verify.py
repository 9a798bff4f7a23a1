# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verdicts on two plane_state reports per host behind a switch, taken a window apart.

After a drain the switch's plane must carry nothing to or from the hosts behind
it: their tx counter on the plane stands still, they received nothing on it
from any peer during the window, and every peer of theirs confirmed, answering
the drain's echo on another plane, that it keeps off the plane for them (the
other hosts learn a drain in-band: planes/confirm.py). After an undrain the
plane is drained on none of them.
"""

from __future__ import annotations


def plane_entry(report, name):
    """A plane_state report's entry of plane `name`, None without one."""
    for p in report.get("planes") or []:
        if p.get("name") == name:
            return p
    return None


def _skipped(before, after) -> int:
    """steer_skipped packets between two reports of one host, every plane."""
    if not before or not after:
        return 0
    b = {p.get("name"): p["counters"].get("steer_skipped", 0) for p in before.get("planes") or []}
    return sum(max(0, p["counters"].get("steer_skipped", 0) - b.get(p.get("name"), 0)) for p in after.get("planes") or [])


def _unconfirmed(plan: dict, drains: dict, out: list) -> None:
    """The peers the drain of each host behind the switch could not confirm off the plane."""
    plane = plan["plane"]
    for host in plan["hosts"]:
        drain = drains.get(host)
        if drain is None or "unconfirmed" not in drain:
            out.append("%s: no confirmation from its drain (not run?)" % host)
            continue
        for peer in drain["unconfirmed"]:
            if peer.get("reason") == "answered on the plane":
                out.append("%s: still sends to %s on plane %r (its answer to the drain's echo came back on it)"
                           % (peer["name"], host, plane))
            else:
                out.append("%s: did not answer %s's echo after the drain (%s), so it cannot be shown to keep off plane %r"
                           % (peer["name"], host, peer.get("reason"), plane))


def still_used(plan: dict, before: dict, after: dict, window_ms: int, drains=None) -> list:
    """Who still uses the drained plane; empty when the switch carries nothing of ours.

    drains: each host's plane_state result of the drain, with its confirmations;
    None when only the counters are judged.
    """
    plane, out = plan["plane"], []
    for host in plan["hosts"]:
        b, a = before.get(host), after.get(host)
        if a is None or b is None:
            out.append("%s: no report (unreachable?)" % host)
            continue
        pa, pb = plane_entry(a, plane), plane_entry(b, plane)
        if pa is None or pb is None:
            out.append("%s: plane %r is missing from its report" % (host, plane))
            continue
        if not pa.get("drained"):
            out.append("%s: plane %r is not drained" % (host, plane))
        sent = pa["counters"]["tx_packets"] - pb["counters"]["tx_packets"]
        if sent > 0:
            out.append("%s: still sent %d packets on plane %r" % (host, sent, plane))
        for peer in a.get("peers") or []:
            age = (peer.get("last_seen_age_ms") or {}).get(plane)
            if age is not None and age < window_ms:
                out.append("%s: still receives from %s on plane %r (%d ms ago)" % (host, peer["name"], plane, age))
    for host in plan["hosts"]:
        skipped = _skipped(before.get(host), after.get(host))
        if skipped:
            out.append("%s: %d packets found no plane to move to and stayed on their own" % (host, skipped))
    if drains is not None:
        _unconfirmed(plan, drains, out)
    return out


def leftovers(plan: dict, after: dict) -> list:
    """What of the drain is still in place after an undrain; empty when traffic may use the plane again.
    (The peers forget what the drain taught them from the undrain's echo, natively on the plane.)"""
    plane, out = plan["plane"], []
    for host in plan["hosts"]:
        a = after.get(host)
        if a is None:
            out.append("%s: no report (unreachable?)" % host)
            continue
        p = plane_entry(a, plane)
        if p is None or p.get("drained"):
            out.append("%s: plane %r is still drained" % (host, plane))
    return out
