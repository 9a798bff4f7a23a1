# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verdicts on two plane_state reports per host taken a window apart.

After a drain the switch's plane must carry nothing to or from the hosts behind
it: their tx counter on the plane stands still, they received nothing on it
from any peer during the window, and every other host avoids the plane for
them. After an undrain nothing of the drain is left.
"""

from __future__ import annotations


def plane_entry(report, name):
    """A plane_state report's entry of plane `name`, None without one."""
    for p in report.get("planes") or []:
        if p.get("name") == name:
            return p
    return None


def _peer(report, name):
    for p in report.get("peers") or []:
        if p.get("name") == name:
            return p
    return None


def _peers_of_drained_hosts(plan, after, out):
    """(peer host, drained host, its entry in the peer's report) for every peer host that reports
    the drained host; a peer host without a report adds a line to out."""
    for host in plan["peers"]:
        report = after.get(host)
        if report is None:
            out.append("%s: no report (unreachable?)" % host)
            continue
        for name in plan["hosts"]:
            peer = _peer(report, name)
            if peer is not None:  # else not a peer of this host: it sends nothing to it through edgeft
                yield host, name, peer


def _skipped(before, after) -> int:
    """steer_skipped packets between two reports of one host, every plane."""
    if not before or not after:
        return 0
    b = {p.get("name"): p["counters"].get("steer_skipped", 0) for p in before.get("planes") or []}
    return sum(max(0, p["counters"].get("steer_skipped", 0) - b.get(p.get("name"), 0)) for p in after.get("planes") or [])


def still_used(plan: dict, before: dict, after: dict, window_ms: int) -> list:
    """Who still uses the drained plane; empty when the switch carries nothing of ours."""
    plane, out = plan["plane"], []
    served = set(plan["hosts"])
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
    for host in plan["hosts"] + plan["peers"]:
        skipped = _skipped(before.get(host), after.get(host))
        if skipped:
            out.append("%s: %d packets found no plane to move to and stayed on their own" % (host, skipped))
    for host, name, peer in _peers_of_drained_hosts(plan, after, out):
        if plane not in (peer.get("down_planes") or []):
            out.append("%s: still sends to %s on plane %r" % (host, name, plane))
        age = (peer.get("last_seen_age_ms") or {}).get(plane)
        if age is not None and age < window_ms and name in served:
            out.append("%s: still receives from %s on plane %r (%d ms ago)" % (host, name, plane, age))
    return out


def leftovers(plan: dict, after: dict) -> list:
    """What of the drain is still in place after an undrain; empty when traffic may use the plane again."""
    plane, out = plan["plane"], []
    for host in plan["hosts"]:
        a = after.get(host)
        if a is None:
            out.append("%s: no report (unreachable?)" % host)
            continue
        p = plane_entry(a, plane)
        if p is None or p.get("drained"):
            out.append("%s: plane %r is still drained" % (host, plane))
    for host, name, peer in _peers_of_drained_hosts(plan, after, out):
        if plane in (peer.get("drained_planes") or []):
            out.append("%s: still steers its traffic for %s off plane %r" % (host, name, plane))
    return out
