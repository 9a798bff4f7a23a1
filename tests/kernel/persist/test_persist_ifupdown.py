"""The ifupdown files, parsed by ifquery and applied by the real ifup.

ifquery (ifupdown's own parser) must read every file and show the options the plan implies.
Then ifup -a brings the plane NICs up in a sandbox (persist_sandbox.py) from a main
interfaces file that sources the rendered directory, as /etc/network/interfaces does, with
--no-scripts so no hook of this machine runs: every address, MTU, route (rto_min and the
multipath route included) and rule must be in the kernel; ifdown -a must remove the rules
again and a second ifup -a must succeed. Bonds need the bonding driver, which this kernel
lacks: for them ifquery's reading is the check.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

import persist_applied as applied
import persist_render as rendering
import persist_sandbox as sandbox


def _problem():
    if shutil.which("ifquery") is None or shutil.which("ifup") is None:
        return "ifupdown is not installed (package ifupdown)"
    return None


pytestmark = pytest.mark.skipif(_problem() is not None, reason=str(_problem()))


def ifquery(path, *args):
    proc = subprocess.run(["ifquery", "-i", str(path), "--state-dir", str(path.parent / ".ifstate")] + list(args),
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and not proc.stderr, "ifquery %s %s: %s" % (path, args, proc.stderr)
    return proc.stdout


def options(text):
    """ifquery's 'key: value' lines as a list of pairs."""
    return [tuple(line.split(": ", 1)) if ": " in line else (line.rstrip(":"), "") for line in text.splitlines()]


@pytest.fixture(params=["fabric", "lacp"])
def rendered(request, tmp_path):
    plan = rendering.load_plan(request.param)
    rendering.write_tree(tmp_path, rendering.render(plan, "ifupdown"))
    return rendering.info(plan, "ifupdown")["plan"], tmp_path / "etc/network/interfaces.d"


def test_ifquery_reads_every_file(rendered):
    plan, directory = rendered
    for iface in plan["interfaces"]:
        path = directory / ("60-edgeft-%s" % iface["name"])
        if iface["kind"] == "bond-port":
            assert ifquery(path, "--list").split() == ["lo"]  # not brought up by ifup -a: its bond does it
            assert ifquery(path, "--list", "--allow", iface["master"]).split() == [iface["name"]]
        else:
            assert ifquery(path, "--list").split() == ["lo", iface["name"]]
        got = options(ifquery(path, iface["name"]))
        keys = [key for key, _value in got]
        # The first address of each family is the stanza's address option; further ones are ip commands.
        firsts = [next((a["address"].split("/")[0] for a in iface["addresses"] if a["family"] == family), None) for family in (4, 6)]
        assert [v for k, v in got if k == "address"] == [a for a in firsts if a]
        if iface["mtu"]:
            assert ("mtu", str(iface["mtu"])) in got
        if iface["kind"] == "bond-port":
            assert ("bond-master", iface["master"]) in got
        if iface["bond"]:
            bond = iface["bond"]
            assert ("bond-slaves", " ".join(iface["ports"])) in got
            assert ("bond-mode", bond["mode"]) in got
            for key, option in (("miimon", "bond-miimon"), ("arp_interval", "bond-arp-interval"), ("updelay", "bond-updelay"),
                                ("downdelay", "bond-downdelay"), ("arp_validate", "bond-arp-validate"), ("lacp_rate", "bond-lacp-rate"),
                                ("primary", "bond-primary"), ("xmit_hash_policy", "bond-xmit-hash-policy")):
                if bond[key] is None:
                    assert option not in keys
                else:
                    assert (option, str(bond[key])) in got
            if bond["arp_ip_target"]:
                assert ("bond-arp-ip-target", " ".join(bond["arp_ip_target"])) in got
            if bond["arp_all_targets"]:  # no ifenslave option: set with ip once the bond is up
                assert ("up", "ip link set dev %s type bond arp_all_targets %s" % (iface["name"], bond["arp_all_targets"])) in got
        rules = len(iface["rules"])
        assert keys.count("down") == rules
        assert keys.count("up") >= rules + len([r for r in iface["routes"] if not r["nexthops"]])


IFUP = r"""
mkdir -p /run/ifstate
printf 'source %(directory)s/*\n' > /run/interfaces
add_links fab0 fab1
ifup -a -X bond0 -i /run/interfaces --state-dir /run/ifstate --no-scripts
dump
ifdown -a -X bond0 -i /run/interfaces --state-dir /run/ifstate --no-scripts
dump
ifup -a -X bond0 -i /run/interfaces --state-dir /run/ifstate --no-scripts
dump
"""


@pytest.mark.skipif(sandbox.problem() is not None, reason=str(sandbox.problem()))
def test_ifup_applies_the_plan(tmp_path):
    plan = rendering.load_plan("fabric")
    rendering.write_tree(tmp_path, rendering.render(plan, "ifupdown"))
    proc = sandbox.run(IFUP % dict(directory=tmp_path / "etc/network/interfaces.d"))
    assert proc.returncode == 0, "ifup/ifdown failed (%d):\n%s\n%s" % (proc.returncode, proc.stderr[-3000:], proc.stdout[-2000:])
    up, down, again = (sandbox.state(part + "@@end\n") for part in proc.stdout.split("@@end\n")[:3])
    normalized = rendering.info(plan, "ifupdown")["plan"]
    applied.assert_applied(normalized, up, ["fab0", "fab1"])
    assert {r["priority"] for r in down["rule4"] + down["rule6"]} == {0, 32766, 32767}, "ifdown left rules behind"
    applied.assert_applied(normalized, again, ["fab0", "fab1"])
