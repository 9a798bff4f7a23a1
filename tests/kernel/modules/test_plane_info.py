"""edgeft.failover.plane_info in a namespace of its own: what it reports of the plane NICs,
the mismatches it names, and the reverse path filtering the kernel applies (the
ebpf_failover role refuses strict filtering from this report)."""

from __future__ import annotations

import os
import subprocess

import pytest

import nshost

from ansible_collections.edgeft.failover.plugins.module_utils import netlink
from ansible_collections.edgeft.failover.plugins.modules import plane_info

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not netlink.HAS_PYROUTE2, reason="needs root and pyroute2")

PLANES = [{"name": "a", "interface": "fab0", "ipv4": "198.18.1.11/24", "ipv6": "fd0e:d6ef:7a00:1::b/64"},
          {"name": "b", "interface": "fab1", "ipv4": "198.18.2.11/24"}]


def sh(netns, *argv):
    subprocess.run(["ip", "netns", "exec", netns] + list(argv), check=True)


@pytest.fixture
def netns():
    name = "edgeft-t-pinfo-%d" % os.getpid()
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        for nic, address in (("fab0", "198.18.1.11/24"), ("fab1", "198.18.2.11/24")):
            sh(name, "ip", "link", "add", nic, "type", "veth", "peer", "name", nic + "p")
            sh(name, "ip", "addr", "add", address, "dev", nic)
            sh(name, "ip", "link", "set", nic, "up")
        sh(name, "ip", "addr", "add", "fd0e:d6ef:7a00:1::b/64", "dev", "fab0", "nodad")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def test_reports_the_nics_and_the_filtering_the_kernel_applies(netns):
    sh(netns, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.fab0.rp_filter=2", "net.ipv4.conf.fab1.rp_filter=0")
    result = nshost.run_module(plane_info.main, {"planes": PLANES}, netns)
    assert not result["failed"] and result["problems"] == []
    fab0, fab1 = result["planes"]
    assert fab0["present"] and fab0["admin_up"] and fab0["missing_addresses"] == []
    assert set(fab0["addresses"]) >= {"198.18.1.11/24", "fd0e:d6ef:7a00:1::b/64"}
    assert (fab0["rp_filter"], fab1["rp_filter"]) == (2, 0)

    # 'all' strict makes every NIC strict, whatever its own value.
    sh(netns, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=1")
    result = nshost.run_module(plane_info.main, {"planes": PLANES}, netns)
    assert [p["rp_filter"] for p in result["planes"]] == [2, 1]


def test_names_every_mismatch(netns):
    planes = [dict(PLANES[0], ipv4="198.18.1.12/24"), dict(PLANES[1], interface="fab7")]
    result = nshost.run_module(plane_info.main, {"planes": planes}, netns)
    assert result["failed"]
    assert result["problems"] == ["planes[0].ipv4: 198.18.1.12/24 is not configured on fab0",
                                  "planes[1].interface: interface 'fab7' does not exist on this host"]
    result = nshost.run_module(plane_info.main, {"planes": planes, "fail_on_mismatch": False}, netns)
    assert not result["failed"] and not result["planes"][1]["present"]
