"""Each fault breaks exactly what it should, and its repair restores it (real packets)."""

from __future__ import annotations

import time

import pytest
from edgeft_lab import Fault, LabError, nft, procs
from lab_helpers import both_families, link_info, needs_root, reach, reach_all, udp_delivery, wait_for

pytestmark = needs_root


def _assert_reach(lab, expected: dict[tuple, bool]) -> None:
    got = reach_all(lab, list(expected))
    wrong = {case: got[case] for case in expected if got[case] != expected[case]}
    assert not wrong, f"unexpected reachability (case: got): {wrong}"


def _plane_cases(src: str, dst: str, a: bool, b: bool) -> dict[tuple, bool]:
    return {**{c: a for c in both_families(src, dst, "a")}, **{c: b for c in both_families(src, dst, "b")}}


@pytest.mark.parametrize("side", ["host", "switch"])
def test_link_down(healthy, side):
    lab = healthy
    lab.link_down("r1h1", "a", side=side)
    host_nic = link_info(lab, "r1h1", "fab0")
    switch_port = link_info(lab, "tor-r1-a", "r1h1")
    assert host_nic["carrier"] is False and switch_port["carrier"] is False
    assert host_nic["admin_up"] is (side == "switch") and switch_port["admin_up"] is (side == "host")
    assert link_info(lab, "r1h1", "fab1")["carrier"] is True
    _assert_reach(lab, {**_plane_cases("r1h1", "r2h1", a=False, b=True), **_plane_cases("r1h2", "r2h2", a=True, b=True)})
    assert lab.status()["faults"][0]["id"] == f"link-down host=r1h1 plane=a side={side}"

    assert [f.id for f in lab.repair(Fault("link-down", host="r1h1"))] == [f"link-down host=r1h1 plane=a side={side}"]
    assert link_info(lab, "r1h1", "fab0")["carrier"] is True
    # IPv6 addresses survive the admin-down (keep_addr_on_down), so plane a is whole again.
    assert wait_for(lambda: all(reach_all(lab, list(_plane_cases("r1h1", "r2h1", True, True))).values()))
    assert lab.faults() == []


def test_power_off_drops_carrier_for_every_host_behind_the_tor(healthy):
    lab = healthy
    lab.power_off("tor-r1-a")
    for host in ("r1h1", "r1h2"):
        info = link_info(lab, host, "fab0")
        assert info["admin_up"] and not info["carrier"] and info["operstate"] != "UP"
        assert link_info(lab, host, "fab1")["carrier"]
    for host in ("r2h1", "r2h2"):
        assert link_info(lab, host, "fab0")["carrier"]
    assert not link_info(lab, "spine-a", "tor-r1-a")["carrier"]
    _assert_reach(lab, {**_plane_cases("r1h1", "r2h1", a=False, b=True), **_plane_cases("r2h1", "r2h2", a=True, b=True)})

    lab.repair(Fault("power-off", switch="tor-r1-a"))
    assert all(link_info(lab, h, "fab0")["carrier"] for h in ("r1h1", "r1h2"))
    assert wait_for(lambda: all(reach_all(lab, list(_plane_cases("r1h1", "r2h1", True, True))).values()))


def test_silent_switch_keeps_carrier_but_forwards_nothing(healthy):
    lab = healthy
    lab.silence("tor-r1-a")
    for host in ("r1h1", "r1h2"):
        info = link_info(lab, host, "fab0")
        assert info["carrier"] is True and info["operstate"] == "UP"  # nothing to see locally
    table = nft.list_table(lab.netns("tor-r1-a"))
    assert table.count("policy drop") == 3 and "hook ingress" in table  # every port
    assert nft.list_table(lab.netns("r1h1")) == ""  # never in a host
    _assert_reach(
        lab,
        {
            **_plane_cases("r1h1", "r2h1", a=False, b=True),
            **_plane_cases("r1h1", "r1h2", a=False, b=True),  # same ToR: not even local switching
            **_plane_cases("r2h1", "r2h2", a=True, b=True),  # the other ToR is untouched
        },
    )
    lab.repair(Fault("silent", switch="tor-r1-a"))
    assert nft.list_table(lab.netns("tor-r1-a")) == ""
    assert wait_for(lambda: all(reach_all(lab, list(_plane_cases("r1h1", "r1h2", True, True))).values()))


def test_loss_on_a_link_drops_both_directions(healthy):
    lab = healthy
    lab.loss(30, host="r1h1", plane="a")
    table = nft.list_table(lab.netns("tor-r1-a"))
    assert "hook ingress" in table and "hook egress" in table and "numgen random mod 100 < 30 drop" in table
    outbound = udp_delivery(lab, "r1h1", "r2h1", "a")  # dropped on the port's ingress
    inbound = udp_delivery(lab, "r2h1", "r1h1", "a")  # dropped on the port's egress
    assert 0.55 <= outbound <= 0.85 and 0.55 <= inbound <= 0.85, (outbound, inbound)
    assert udp_delivery(lab, "r1h1", "r2h1", "b") == 1.0  # the other plane is clean
    assert udp_delivery(lab, "r1h2", "r2h2", "a") == 1.0  # and so are the other hosts

    lab.repair(Fault("loss", host="r1h1", plane="a"))
    assert nft.list_table(lab.netns("tor-r1-a")) == ""
    assert udp_delivery(lab, "r1h1", "r2h1", "a") == 1.0


def test_total_loss_on_a_link_drops_every_packet_with_the_link_up(healthy):
    """100 %: a port that is silent while its link stays up (the rollout test's unhealthy host)."""
    lab = healthy
    lab.loss(100, host="r1h1", plane="a")
    assert "numgen" not in nft.list_table(lab.netns("tor-r1-a"))
    assert link_info(lab, "r1h1", "fab0")["carrier"]  # the link stays up
    for family in (4, 6):
        assert not reach(lab, "r1h1", "r2h1", "a", family) and not reach(lab, "r2h1", "r1h1", "a", family)
        assert reach(lab, "r1h1", "r2h1", "b", family)
    lab.repair(Fault("loss", host="r1h1", plane="a"))
    assert udp_delivery(lab, "r1h1", "r2h1", "a") == 1.0
    assert udp_delivery(lab, "r2h1", "r1h1", "a") == 1.0


def test_loss_on_a_switch_hits_only_traffic_crossing_it(healthy):
    lab = healthy
    lab.loss(30, switch="spine-a")
    across = udp_delivery(lab, "r1h1", "r2h1", "a")
    assert 0.55 <= across <= 0.85, across
    assert udp_delivery(lab, "r1h1", "r1h2", "a") == 1.0  # stays below the spine
    lab.repair(Fault("loss", switch="spine-a"))
    assert udp_delivery(lab, "r1h1", "r2h1", "a") == 1.0


def _carrier_samples(lab, host: str, seconds: float) -> list[bool]:
    samples = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        samples.append(link_info(lab, host, "fab0")["carrier"])
        time.sleep(0.01)
    return samples


def _transitions(samples: list[bool]) -> int:
    return sum(1 for x, y in zip(samples, samples[1:]) if x != y)


def test_flap_toggles_the_link_and_ends_up(healthy):
    lab = healthy
    lab.flap("r1h1", "a", hz=5, duration=1.5)
    (record,) = lab.faults()
    assert record.pid and record.running()
    samples = _carrier_samples(lab, "r1h1", 1.0)
    assert False in samples and True in samples and _transitions(samples) >= 4, samples
    assert wait_for(lambda: not record.running(), timeout=3)
    assert link_info(lab, "r1h1", "fab0")["carrier"]
    assert lab.status()["faults"][0]["running"] is False  # shown as finished until repaired
    assert wait_for(lambda: all(reach_all(lab, list(_plane_cases("r1h1", "r2h1", True, True))).values()))
    lab.repair(Fault("flap"))
    assert lab.faults() == []


def test_repair_stops_a_running_flapper(healthy):
    lab = healthy
    lab.flap("r2h2", "b", hz=10, duration=60)
    (record,) = lab.faults()
    assert wait_for(lambda: not link_info(lab, "r2h2", "fab1")["carrier"], timeout=1)
    with pytest.raises(LabError, match="conflicts with active fault"):
        lab.link_down("r2h2", "b", side="switch")
    lab.repair(Fault("flap", host="r2h2", plane="b"))
    assert not procs.is_running(record.pid, record.pid_start)
    samples = [link_info(lab, "r2h2", "fab1")["carrier"] for _sample in range(20)]
    assert all(samples)
    assert wait_for(lambda: all(reach_all(lab, list(_plane_cases("r2h2", "r1h1", True, True))).values()))


def test_fault_bookkeeping(healthy):
    lab = healthy
    lab.link_down("r1h1", "a", side="switch")
    with pytest.raises(LabError, match="fault already active"):
        lab.link_down("r1h1", "a", side="switch")
    with pytest.raises(LabError, match="unknown host"):
        lab.link_down("r9h9", "a")
    with pytest.raises(LabError, match="needs --percent"):
        lab.fault(Fault("loss", switch="spine-a"))
    # A power-off over a link that is already down: repairing one keeps the other's effect.
    lab.power_off("tor-r1-a")
    lab.repair(Fault("power-off", switch="tor-r1-a"))
    assert not link_info(lab, "r1h1", "fab0")["carrier"]  # still held down by the link-down
    assert link_info(lab, "r1h2", "fab0")["carrier"]
    lab.silence("tor-r2-b")
    lab.loss(10, host="r2h1", plane="b")
    assert len(lab.faults()) == 3
    # Removing one of two nft faults on a switch keeps the other's chains.
    lab.repair(Fault("silent", switch="tor-r2-b"))
    assert "linkloss_in_r2h1" in nft.list_table(lab.netns("tor-r2-b"))
    assert "silent" not in nft.list_table(lab.netns("tor-r2-b"))
    assert len(lab.repair_all()) == 2
    assert lab.faults() == [] and nft.list_table(lab.netns("tor-r2-b")) == ""


def test_routed_faults_restore_routes(routed_lab):
    lab = routed_lab
    assert lab.ping_matrix().ok
    # Setting an interface down flushes the routes through it; repairs put them back.
    lab.link_down("r1h1", "a", side="host")
    lab.power_off("tor-r2-b")
    _assert_reach(lab, {**_plane_cases("r1h1", "r2h1", a=False, b=False), **_plane_cases("r1h2", "r2h2", a=True, b=False)})
    lab.repair_all()
    lab.flap("r2h1", "a", hz=10, duration=0.6, side="host")
    (record,) = lab.faults()
    assert wait_for(lambda: not record.running(), timeout=3)
    assert wait_for(lambda: lab.ping_matrix(timeout=0.5).ok, timeout=5), lab.ping_matrix().format()
    lab.repair_all()
