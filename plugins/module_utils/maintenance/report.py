# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The maintenance report: one row per switch, from counters read along the way.

Packets lost (from counters): packets edgeft had to move off the switch's plane
but found no plane for (steer_skipped, every plane of every host behind the
switch: the others, told in-band, are not read),
counted from the end of the drain's verification to the end of the undrain -
while the switch may be off, such a packet goes nowhere. (Counted from before
the drain when the verification did not run.) Packets that found no plane
during the drain itself still crossed a working switch; the verification
fails on them, and they are reported apart. NIC drop counters are reported
too, not counted as lost: they count any traffic on the NIC, ours or not.
"""

from __future__ import annotations


def _planes(report):
    return {p.get("name"): p for p in (report or {}).get("planes") or []}


def _delta(before, after, key):
    if not before or not after:
        return 0
    return max(0, (after.get(key) or 0) - (before.get(key) or 0))


def _skipped(hosts, before, after) -> int:
    total = 0
    for host in hosts:
        pb, pa = _planes(before.get(host)), _planes(after.get(host))
        for name, a in pa.items():
            if name in pb:
                total += _delta(pb[name].get("counters"), a.get("counters"), "steer_skipped")
    return total


def switch_row(plan: dict, before: dict, after: dict, drained_at=None, undrained_at=None, failures=None, status="done",
               verified=None) -> dict:
    hosts = list(plan["hosts"])
    if verified:
        skipped, during_drain = _skipped(hosts, verified, after), _skipped(hosts, before, verified)
    else:
        skipped, during_drain = _skipped(hosts, before, after), 0
    backup_drops = drained_drops = 0
    for host in hosts:
        pb, pa = _planes(before.get(host)), _planes(after.get(host))
        for name, a in pa.items():
            b = pb.get(name)
            if b is None:
                continue
            drops = sum(_delta(b.get("nic"), a.get("nic"), k) for k in ("tx_dropped", "rx_dropped"))
            if name == plan["plane"]:
                drained_drops += drops
            else:
                backup_drops += drops
    drained_s = None
    if drained_at is not None and undrained_at is not None:
        drained_s = round(float(undrained_at) - float(drained_at), 1)
    return {
        "switch": plan["switch"],
        "role": plan["role"],
        "plane": plan["plane"],
        "hosts_behind": list(plan["hosts"]),
        "hosts_steering": list(plan["peers"]),
        "hosts_affected": len(hosts) + len(plan["peers"]),
        "drained_seconds": drained_s,
        "lost_packets": skipped,
        "steer_skipped": skipped,
        "unsteered_during_drain": during_drain,
        "backup_plane_drops": backup_drops,
        "drained_plane_drops": drained_drops,
        "status": status,
        "failures": list(failures or []),
    }


def render(rows: list) -> str:
    """A table for people; the JSON next to it is for machines."""
    head = ("switch", "plane", "hosts", "drained s", "lost", "status")
    lines = [list(head)]
    for r in rows:
        lines.append([r["switch"], r["plane"], str(r["hosts_affected"]),
                      "-" if r["drained_seconds"] is None else "%.1f" % r["drained_seconds"],
                      str(r["lost_packets"]), r["status"]])
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines]
    total = sum(r["lost_packets"] for r in rows)
    failed = [r for r in rows if r["failures"]]
    out.append("%d switch(es), %d packets lost (counters), %d failed" % (len(rows), total, len(failed)))
    for r in failed:
        for f in r["failures"]:
            out.append("  %s: %s" % (r["switch"], f))
    return "\n".join(out)
