"""The lab never touches the machine's own networking: interfaces, addresses, routes, rules,
nftables ruleset and sysctls of the root namespace are identical before and after a full
up / faults / repair / down cycle, and no lab interface ever appears there, even briefly."""

from __future__ import annotations

import select

from edgeft_lab import Fault
from lab_helpers import needs_root, root_snapshot, wait_for
from pyroute2 import IPRoute
from pyroute2.netlink.rtnl import (
    RTMGRP_IPV4_IFADDR,
    RTMGRP_IPV4_ROUTE,
    RTMGRP_IPV6_IFADDR,
    RTMGRP_IPV6_ROUTE,
    RTMGRP_LINK,
)

pytestmark = needs_root


def _drain(monitor: IPRoute) -> list:
    events = []
    while select.select([monitor], [], [], 0.2)[0]:
        events += monitor.get()
    return events


def test_root_namespace_is_untouched(make_lab):
    before = root_snapshot()
    monitor = IPRoute()
    monitor.bind(groups=RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE)
    try:
        lab = make_lab("routed")
        lab.up()
        lab.link_down("r1h1", "a", side="host")
        lab.power_off("tor-r2-a")
        lab.silence("tor-r1-b")
        lab.loss(20, host="r2h2", plane="b")
        lab.loss(20, switch="spine-b")
        lab.flap("r1h2", "b", hz=10, duration=0.5)
        assert wait_for(lambda: not lab.faults()[-1].running(), timeout=3)
        lab.repair_all()
        assert lab.ping_matrix().ok
        lab.down()
        events = _drain(monitor)
    finally:
        monitor.close()
    lab_ifnames = {"fab0", "fab1", "br0", "br-r1", "br-r2"} | {n for ln in lab.plan.links for n in (ln.a.ifname, ln.b.ifname)}
    leaked = [e for e in events if e.get_attr("IFLA_IFNAME") in lab_ifnames]
    assert leaked == [], "lab interfaces appeared in the root namespace"
    after = root_snapshot()
    for key in before:
        assert after[key] == before[key], f"root namespace {key} changed"


def test_faults_never_touch_hosts_beyond_a_host_side_link_down(make_lab):
    from edgeft_lab import nft

    lab = make_lab("default")
    lab.up()
    for fault in (Fault("silent", switch="tor-r1-a"), Fault("loss", switch="tor-r2-b", percent=5),
                  Fault("loss", host="r1h2", plane="a", percent=5), Fault("power-off", switch="spine-b"),
                  Fault("link-down", host="r2h1", plane="a", side="switch")):
        lab.fault(fault)
    for host in lab.plan.hosts:
        assert nft.list_table(host.netns) == ""
        with lab.ipr(host.name) as sock:
            assert all(link["flags"] & 1 for link in sock.get_links())  # every host interface admin up
