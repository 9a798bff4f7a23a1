"""Every template of the network_persist role, rendered for fixed plans, against reviewed expected files.

tests/data/persist/expected/<renderer>/<plan>/ holds exactly the files the role writes for
plans/<plan>.yml (networkd: for systemd-networkd 255, which knows rto_min). To regenerate
after a template change: EDGEFT_UPDATE_EXPECTED=1 pytest tests/pure/persist/test_persist_templates.py,
then review every changed line (git diff) before keeping it.
"""

from __future__ import annotations

import shutil

import pytest

import persist_render as rendering

PLANS = ("fabric", "lacp")
MODES = {"networkmanager/nmconnection.j2": "0600", "netplan/netplan.yaml.j2": "0600"}


@pytest.mark.parametrize("renderer", rendering.RENDERERS)
@pytest.mark.parametrize("plan_name", PLANS)
def test_rendered_files_are_the_expected_ones(plan_name, renderer):
    files = rendering.render(rendering.load_plan(plan_name), renderer)
    expected = rendering.expected_dir(plan_name, renderer)
    if rendering.UPDATE:
        shutil.rmtree(expected, ignore_errors=True)
        rendering.write_tree(expected, {path: (text, "0644") for path, (text, _mode) in files.items()})
    assert {path: text for path, (text, _mode) in files.items()} == rendering.read_tree(expected)


@pytest.mark.parametrize("renderer", rendering.RENDERERS)
def test_file_modes(renderer):
    for item in rendering.files_for(rendering.load_plan("fabric"), renderer):
        # NetworkManager ignores keyfiles others can read; netplan warns about them.
        assert item["mode"] == MODES.get(item["template"], "0644"), item["path"]


def test_networkd_before_255_has_no_rto_min_key():
    """systemd-networkd 252 (Debian 12) would ignore TCPRetransmissionTimeoutSec= with a warning: it is left out (a gap)."""
    plan = rendering.load_plan("fabric")
    old = rendering.render(plan, "networkd", networkd_version=252)
    new = rendering.render(plan, "networkd", networkd_version=255)
    assert sorted(old) == sorted(new)
    for path, (text, _mode) in new.items():
        kept = "".join(line for line in text.splitlines(True) if not line.startswith("TCPRetransmissionTimeoutSec="))
        assert old[path][0] == kept
    assert sum(text.count("TCPRetransmissionTimeoutSec=20ms") for text, _mode in new.values()) == 2


def test_files_follow_the_prefix_and_the_plan():
    plan = rendering.load_plan("fabric")
    paths = [f["path"] for f in rendering.files_for(plan, "networkd", prefix="70-fabric")]
    assert paths == ["etc/systemd/network/70-fabric-fab0.network", "etc/systemd/network/70-fabric-fab1.network",
                     "etc/systemd/network/70-fabric-bond0.network", "etc/systemd/network/70-fabric-bond0.netdev",
                     "etc/systemd/network/70-fabric-fab2.network", "etc/systemd/network/70-fabric-fab3.network",
                     "etc/systemd/networkd.conf.d/70-fabric.conf", "etc/sysctl.d/70-fabric.conf"]
    assert [f["path"] for f in rendering.files_for(plan, "none")] == ["etc/sysctl.d/60-edgeft.conf"]
    for renderer in rendering.RENDERERS:
        assert rendering.files_for({"interfaces": [], "sysctls": {}}, renderer) == []


def test_ifupdown_adds_a_multipath_route_with_the_last_of_its_interfaces():
    """ifup -a brings interfaces up in file name order; the kernel refuses a next hop on an interface still down."""
    files = rendering.render(rendering.load_plan("fabric"), "ifupdown")
    fab0, fab1 = (files["etc/network/interfaces.d/60-edgeft-%s" % n][0] for n in ("fab0", "fab1"))
    assert "nexthop" not in fab0
    assert "post-up ip -4 route replace 198.18.3.0/24 metric 300 rto_min 20ms nexthop via 198.18.1.1 dev fab0 weight 1" \
           " nexthop via 198.19.1.1 dev fab1 weight 2\n" in fab1


def test_networkmanager_splits_a_multipath_route_over_the_next_hops_profiles():
    files = rendering.render(rendering.load_plan("fabric"), "networkmanager")
    for nic, gateway, weight in (("fab0", "198.18.1.1", 1), ("fab1", "198.19.1.1", 2)):
        text = files["etc/NetworkManager/system-connections/60-edgeft-%s.nmconnection" % nic][0]
        lines = text.splitlines()
        index = lines.index([line for line in lines if line.endswith("=198.18.3.0/24,%s,300" % gateway)][0])
        assert lines[index + 1].endswith("_options=rto_min=20,weight=%d" % weight)
