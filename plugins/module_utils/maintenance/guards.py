# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checks before a switch is drained, on what the hosts report right now.

``reports`` maps a host to its plane_state result (planes with flags, peers): the hosts
behind the switch read now, the others as the preflight read them;
``checks`` maps a host to {plane name: plane_check result} for its backup
planes. Every refusal names the switch, the host, the plane and what to do.
"""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.maintenance.verify import plane_entry as _plane


def _served_by(plan: dict, host: str, plane: str) -> str:
    switch = plan["switch_of"].get(host, {}).get(plane)
    return "switch %s" % switch if switch else "its switch"


def _peers_left_on_the_switch(plan: dict, host: str, report: dict, backups: list) -> list:
    """The host's peers whose traffic would stay on the drained plane: every healthy backup
    plane is down for them in its data path (learned from their steering, or judged by its
    agent or a per-peer drain), and its egress program steers only to a plane that is not."""
    switch, plane, out = plan["switch"], plan["plane"], []
    if not backups:
        return out
    for peer in report.get("peers") or []:
        addresses = (peer.get("addresses") or {}).get("planes")
        if addresses is not None and plane not in addresses:
            continue  # nothing of the host's goes to it on the plane
        down = peer.get("down_planes") or []
        if any(b not in down for b in backups):
            continue
        learned = [b for b in backups if b in (peer.get("learned_planes") or [])]
        why = ("it keeps off %s for %s (learned from its packets)" % (_names(learned), host) if learned
               else "%s is down for it (judged by %s's agent, or drained for it)" % (_names(backups), host))
        out.append("%s: %s's traffic for %s would have nowhere to go but plane %r: %s; find out why "
                   "(edgeft.failover.plane_state state=query on %s) before draining %s"
                   % (switch, host, peer.get("name"), plane, why, host, switch))
    return out


def _names(planes) -> str:
    return ", ".join(repr(p) for p in planes)


def refusals(plan: dict, reports: dict, checks: dict) -> list:
    """Why draining plan['switch'] now would strand a host; empty when it is safe."""
    switch, plane = plan["switch"], plan["plane"]
    out = []
    for host in plan["hosts"]:
        report = reports.get(host)
        if report is None:
            out.append("%s: no report from %s (unreachable?): nothing is drained while a host behind the switch is unknown"
                       % (switch, host))
            continue
        if _plane(report, plane) is None:
            out.append("%s: %s has no plane %r in its data path: deploy edgeft (playbooks/site.yml) first" % (switch, host, plane))
            continue
        healthy = []
        for backup in plan["backup_planes"][host]:
            entry = _plane(report, backup)
            if entry is None:
                out.append("%s: %s's plane %r is not in its data path: deploy edgeft (playbooks/site.yml) first" % (switch, host, backup))
                continue
            if entry.get("drained"):
                out.append("%s: %s's plane %r is already drained (%s): draining %s too would leave %s no plane; "
                           "undrain that first" % (switch, host, backup, _served_by(plan, host, backup), switch, host))
                continue
            if not entry.get("usable"):
                out.append("%s: %s's backup plane %r is not usable (NIC %s down or not configured): repair it before "
                           "draining %s" % (switch, host, backup, entry.get("interface"), switch))
                continue
            check = (checks.get(host) or {}).get(backup)
            if check is not None and not check.get("healthy"):
                lost = check.get("unhealthy_peers") or []
                out.append("%s: %s's backup plane %r is unhealthy: check probes to %s were lost; repair it before draining %s"
                           % (switch, host, backup, ", ".join(lost) or "every peer", switch))
                continue
            healthy.append(backup)
        if not healthy and not any(r.startswith("%s: %s" % (switch, host)) for r in out):
            out.append("%s: %s has no healthy backup plane" % (switch, host))
        out.extend(_peers_left_on_the_switch(plan, host, report, healthy))
    # The other hosts as they last reported (the preflight): one without a report is not refused
    # here; the drain's confirmation proves every peer in-band.
    for peer in plan["peers"]:
        report = reports.get(peer)
        if report is None:
            continue
        others = [p for p in report.get("planes") or [] if p.get("name") != plane]
        if not any(p.get("usable") for p in others):
            out.append("%s: %s has no usable plane besides %r, so its traffic for %s could not leave the switch"
                       % (switch, peer, plane, ", ".join(plan["hosts"])))
    return out
