"""The netplan file, compiled by the real `netplan generate` and applied by the real systemd-networkd.

netplan must accept the file (mode 0600, as it asks) without a word and generate networkd
files holding the plan's addresses and bond parameters; systemd-networkd must then read them
without complaint and configure the plan's plane NICs in a sandbox (persist_sandbox.py).
What netplan cannot express (multipath routes, rto_min: gaps the role refuses by default) is
left out of the comparison.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

import persist_applied as applied
import persist_render as rendering
import persist_sandbox as sandbox


def _problem():
    if shutil.which("netplan") is None:
        return "netplan is not installed (package netplan.io)"
    return None


pytestmark = pytest.mark.skipif(_problem() is not None, reason=str(_problem()))


def generate(tmp_path, plan_name):
    plan = rendering.load_plan(plan_name)
    rendering.write_tree(tmp_path, rendering.render(plan, "netplan"))
    proc = subprocess.run(["netplan", "generate", "--root-dir", str(tmp_path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and proc.stderr == "", "netplan generate: %s" % proc.stderr
    return rendering.info(plan, "netplan")["plan"], tmp_path / "run/systemd/network"


def sections(text):
    """[(section, key, value)] of a systemd unit-style file."""
    out, section = [], None
    for line in text.splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        elif "=" in line:
            key, value = line.split("=", 1)
            out.append((section, key, value))
    return out


@pytest.mark.parametrize("plan_name", ["fabric", "lacp"])
def test_netplan_generates_networkd_files_for_the_plan(tmp_path, plan_name):
    plan, generated = generate(tmp_path, plan_name)
    for iface in plan["interfaces"]:
        network = sections((generated / ("10-netplan-%s.network" % iface["name"])).read_text())
        assert ("Match", "Name", iface["name"]) in network
        assert [v for s, k, v in network if k == "Address"] == [a["address"] for a in iface["addresses"]]
        assert ("Network", "ConfigureWithoutCarrier", "yes") in network
        if iface["mtu"]:
            assert ("Link", "MTUBytes", str(iface["mtu"])) in network
        if iface["kind"] == "bond-port":
            assert ("Network", "Bond", iface["master"]) in network
        else:
            assert ("Network", "IPv6AcceptRA", "yes" if iface["accept_ra"] else "no") in network
        routes = [r for r in iface["routes"] if not r["nexthops"]]
        assert [v for s, k, v in network if s == "Route" and k == "Destination"] == [r["dst"] for r in routes]
        assert [v for s, k, v in network if s == "RoutingPolicyRule" and k == "From"] == [r["from"] for r in iface["rules"]]
        if iface["bond"]:
            bond = iface["bond"]
            netdev = sections((generated / ("10-netplan-%s.netdev" % iface["name"])).read_text())
            assert ("Bond", "Mode", bond["mode"]) in netdev
            for key, option in (("miimon", "MIIMonitorSec"), ("arp_interval", "ARPIntervalSec"), ("updelay", "UpDelaySec"),
                                ("downdelay", "DownDelaySec")):
                if bond[key] is not None:
                    assert ("Bond", option, "%dms" % bond[key]) in netdev
            for key, option in (("arp_validate", "ARPValidate"), ("arp_all_targets", "ARPAllTargets"), ("lacp_rate", "LACPTransmitRate"),
                                ("xmit_hash_policy", "TransmitHashPolicy")):
                if bond[key] is not None:
                    assert ("Bond", option, bond[key]) in netdev
            if bond["arp_ip_target"]:
                assert ("Bond", "ARPIPTargets", " ".join(bond["arp_ip_target"])) in netdev
            if bond["primary"]:
                primary = sections((generated / ("10-netplan-%s.network" % bond["primary"])).read_text())
                assert ("Network", "PrimarySlave", "true") in primary


@pytest.mark.skipif(sandbox.networkd_problem() is not None, reason=str(sandbox.networkd_problem()))
def test_networkd_applies_what_netplan_generated(tmp_path):
    plan, generated = generate(tmp_path, "fabric")
    config = {"/run/systemd/network": generated, "/etc/systemd/networkd.conf.d": tmp_path / "etc/systemd/networkd.conf.d"}
    state, log = sandbox.run_networkd(config, ["fab0", "fab1"], ["fab0", "fab1"])
    assert [line for line in log.splitlines() if re.match(sandbox.NETWORKD_PARSE_WARNING, line)] == []
    applied.assert_applied(plan, state, ["fab0", "fab1"], rto_min=False, multipath=False)
