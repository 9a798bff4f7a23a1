# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The multihome module without Ansible: validate, read the host, diff, apply, report."""

from __future__ import annotations

import os

from ansible_collections.edgeft.failover.plugins.module_utils import netlink
from ansible_collections.edgeft.failover.plugins.module_utils.host import planes as model
from ansible_collections.edgeft.failover.plugins.module_utils.multihome import changes as diff
from ansible_collections.edgeft.failover.plugins.module_utils.multihome import spec
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.apply import ApplyError, apply_steps
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.host import Host
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.record import DEFAULT_STATE_DIR, Record


def check_target():
    """Root and pyroute2, before anything else."""
    if os.geteuid() != 0:
        raise spec.OptionError("this module must run as root (addresses, routes, rules and sysctls need CAP_NET_ADMIN): "
                               "use become: true")
    netlink.require(spec.OptionError)


def declared(params, links):
    """(planes, plan, where, failover) of a present state: {(nic, cidr): option} names addresses in
    messages; failover is {nic: [cidr]} of the failover addresses, installed beside the plan."""
    planes = spec.normalize_planes(params.get("planes"), links)
    table_base, priority_base = spec.check_numbers(params.get("table_base"), params.get("rule_priority_base"), len(planes))
    manage_sysctls = model.as_bool(params.get("sysctls"), "sysctls", default=True)
    plan = spec.build_plan(planes, table_base, priority_base, manage_sysctls)
    where = {}
    for p in planes:
        for key, _version, _gw in model.FAMILIES:
            if p[key] is not None:
                where[(p["interface"], str(p[key]))] = "%s.%s" % (p["where"], key)
        for _key, _version, failover_key in model.FAILOVER_KEYS:
            if p[failover_key] is not None:
                where[(p["interface"], spec.failover_cidr(p[failover_key]))] = "%s.%s" % (p["where"], failover_key)
    return planes, plan, where, spec.failover_addresses(planes)


def check_ipv6(planes, links, read_sysctl):
    """A plane declaring IPv6 needs IPv6 on its NIC (else its address add would fail half-way)."""
    for p in planes:
        if p["ipv6"] is None:
            continue
        if p["mtu"] is not None and p["mtu"] >= model.MTU_MIN_IPV6 > links[p["interface"]]["mtu"]:
            continue  # the new MTU brings IPv6 back on the NIC
        key = spec.sysctl_key("ipv6", p["interface"], "disable_ipv6")
        value = read_sysctl(key)
        if value is None:
            raise spec.OptionError("%s.ipv6: %s has no IPv6 (no %s sysctl: IPv6 is off on this host or NIC)"
                                   % (p["where"], p["interface"], key))
        if value != "0":
            raise spec.OptionError("%s.ipv6: IPv6 is disabled on %s (%s = %s)" % (p["where"], p["interface"], key, value))


def read_live(host, plan, record, links):
    return {
        "links": links,
        "addresses": host.addresses(),
        "routes": host.routes(diff.tables_of_interest(plan, record)),
        "rules": host.rules(),
        "sysctls": {k: host.sysctl(k) for k in diff.sysctls_of_interest(plan, record)},
        "failover_ready": host.failover_ready(),
    }


def multihome(params, check_mode=False):
    """The module: (result, warnings). Raises spec.OptionError (bad input, named) or apply.ApplyError."""
    check_target()
    state = params.get("state") or "present"
    if state not in ("present", "absent"):
        raise spec.OptionError("state: must be present or absent, not %r" % state)
    store = Record(params.get("state_dir") or DEFAULT_STATE_DIR)
    with Host() as host:
        links = host.links()
        if state == "present":
            planes, plan, where, failover = declared(params, links)
            check_ipv6(planes, links, host.sysctl)
        else:
            plan, where, failover = spec.empty_plan(), {}, {}
        # A first pass without the lock: check mode and refused input write nothing, not even a lock file.
        old = store.load()
        ch = diff.compute(plan, read_live(host, plan, old, links), old, where, failover)
        if not check_mode and (ch.changed or ch.record != old):
            with store.locked():
                old = store.load()  # again under the lock: another run may have just finished
                links = host.links()
                ch = diff.compute(plan, read_live(host, plan, old, links), old, where, failover)
                if ch.changed:
                    store.save(ch.intent_record(old))
                    try:
                        apply_steps(host, ch.steps)
                    except ApplyError as e:
                        if e.rolled_back:  # else the intent record keeps naming what may be left over
                            store.save(old)
                        raise
                store.save(ch.record)  # without changes: bookkeeping only (adopted addresses, routes, rules)
    added, removed, sysctls_changed, links_changed = ch.summary()
    result = {
        "changed": ch.changed,
        "plan": plan,
        "failover_addresses": failover,
        "added": added,
        "removed": removed,
        "sysctls_changed": sysctls_changed,
        "links_changed": links_changed,
        "diff": {"before": ch.before, "after": ch.after},
    }
    return result, ch.warnings
