# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Undo multihome (sysctls, MTUs, link states, plane tables, source rules, failover addresses)
while keeping the plane addresses.

multihome records an address it found on the NIC (adopted) exactly like one it added, so its
state=absent removes both - also an address the installer configured, and with it the host's
connectivity on that plane. The uninstall keeps the addresses given in `keep_addresses` (the
inventory's plane addresses): the record no longer claims them and they stay as they are; a
kept address edgeft did add is a leftover that carries traffic, never a cut. The rest goes
through multihome's own diff and apply with its rollback.
"""

from __future__ import annotations

import copy
import ipaddress

from ansible_collections.edgeft.failover.plugins.module_utils.multihome import changes, spec
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.apply import ApplyError, apply_steps
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.host import Host
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.record import Record, empty, is_empty
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.run import check_target, read_live


def keep_ips(values) -> set:
    """The IPs of keep_addresses (with or without a prefix length); OptionError names the entry."""
    out = set()
    for index, value in enumerate(values or []):
        try:
            out.add(ipaddress.ip_interface(str(value)).ip)
        except ValueError:
            raise spec.OptionError("keep_addresses[%d]: %r is not an IP address (give the plane addresses, e.g. "
                                   "198.18.1.11/16)" % (index, value)) from None
    return out


def trimmed(record, ips) -> tuple:
    """(the record without the kept addresses, [kept 'cidr dev nic']). Pure."""
    out, kept = copy.deepcopy(record), []
    for nic, entry in sorted(out["interfaces"].items()):
        mine = []
        for cidr in entry.get("addresses") or []:
            if ipaddress.ip_interface(cidr).ip in ips:
                kept.append("%s dev %s" % (cidr, nic))
            else:
                mine.append(cidr)
        entry["addresses"] = mine
    return out, kept


def _compute(host, record):
    plan = spec.empty_plan()
    return changes.compute(plan, read_live(host, plan, record, host.links()), record)


def release(params, check_mode=False):
    """The module: (result, warnings). Raises spec.OptionError (bad input, named) or ApplyError."""
    check_target()
    ips = keep_ips(params.get("keep_addresses"))
    store = Record(params.get("state_dir"))
    old = store.load()
    if is_empty(old):
        return {"changed": False, "kept_addresses": [], "removed": {"addresses": [], "routes": [], "rules": []},
                "sysctls_changed": {}, "links_changed": {}, "diff": {"before": {}, "after": {}}}, []
    with Host() as host:
        mine, kept = trimmed(old, ips)
        ch = _compute(host, mine)
        if not check_mode:
            with store.locked():
                old = store.load()  # again under the lock: another run may have just finished
                mine, kept = trimmed(old, ips)
                ch = _compute(host, mine)
                store.save(mine)  # the kept addresses are no longer edgeft's
                try:
                    apply_steps(host, ch.steps)
                except ApplyError as e:
                    if e.rolled_back:
                        store.save(old)
                    raise
                store.save(empty())  # removes the record
    _added, removed, sysctls_changed, links_changed = ch.summary()
    return {
        "changed": True,  # at least the record goes
        "kept_addresses": kept,
        "removed": removed,
        "sysctls_changed": sysctls_changed,
        "links_changed": links_changed,
        "diff": {"before": ch.before, "after": ch.after},
    }, []
