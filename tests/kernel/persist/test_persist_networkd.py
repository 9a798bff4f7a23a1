"""The networkd files, read and applied by the real systemd-networkd of this machine.

systemd-networkd runs in a sandbox (sandbox.py: its own mount, network and PID namespaces,
veth links named like the plan's NICs); its log must hold no complaint about any of our
files, and the kernel must then hold every address, MTU, route and rule of the plan's
ethernet interfaces. Bonds cannot be created here (this kernel has no bonding driver), so
for them the check is that networkd reads the .netdev and .network files without complaint.
"""

from __future__ import annotations

import re

import pytest

import persist_applied as applied
import persist_render as rendering
import persist_sandbox as sandbox

from ansible_collections.edgeft.failover.plugins.module_utils.persist import detect

pytestmark = pytest.mark.skipif(sandbox.networkd_problem() is not None, reason=str(sandbox.networkd_problem()))

VERSION = detect.networkd_version("/") or 0
# The failover agent's rule, added while networkd runs; then a link appears that networkd configures,
# which is when networkd removes the rules it did not make (manager-wide) unless told to keep them.
AGENT_RULE = "ip rule add priority 32763 from all lookup 60919 proto 237"
LATE_LINK = "add_links late0"
LATE_NETWORK = "[Match]\nName=late0\n\n[Network]\nAddress=198.18.77.1/24\nIPv6AcceptRA=no\n"


def complaints(log: str) -> list:
    return [line for line in log.splitlines() if re.match(sandbox.NETWORKD_PARSE_WARNING, line)]


def configure(tmp_path, plan_name, links, wait_for, edit=None, **sandbox_args):
    plan = rendering.load_plan(plan_name)
    files = rendering.render(plan, "networkd", networkd_version=VERSION)
    if edit:
        files = edit(files)
    rendering.write_tree(tmp_path, files)
    config = {"/etc/systemd/network": tmp_path / "etc/systemd/network"}
    if (tmp_path / "etc/systemd/networkd.conf.d").is_dir():
        config["/etc/systemd/networkd.conf.d"] = tmp_path / "etc/systemd/networkd.conf.d"
    state, log = sandbox.run_networkd(config, links, wait_for, **sandbox_args)
    return rendering.info(plan, "networkd")["plan"], state, log


def test_networkd_applies_the_plan(tmp_path):
    plan, state, log = configure(tmp_path, "fabric", ["fab0", "fab1"], ["fab0", "fab1"])
    assert complaints(log) == []
    for link in ("fab0", "fab1"):
        assert re.search(r"^%s: State changed: configuring -> configured" % link, log, re.M), log[-3000:]
    # systemd-networkd before 255 cannot set rto_min (a gap the role reports); from 255 it must.
    applied.assert_applied(plan, state, ["fab0", "fab1"], rto_min=VERSION >= 255)


def test_networkd_reads_the_bond_files_without_complaint(tmp_path):
    _plan, _state, log = configure(tmp_path, "fabric", [], [])
    # This kernel has no bonding driver: networkd read the .netdev and tried to create the bond.
    assert re.search(r"^bond0: netdev could not be created", log, re.M), log[-3000:]
    assert complaints(log) == []
    _plan, _state, log = configure(tmp_path / "lacp", "lacp", [], [])
    assert re.search(r"^bond1: netdev could not be created", log, re.M), log[-3000:]
    assert complaints(log) == []


def test_complaints_are_seen(tmp_path):
    """The check above would see a key networkd does not know (so its silence means something)."""
    def bad_key(files):
        text, mode = files["etc/systemd/network/60-edgeft-fab0.network"]
        files["etc/systemd/network/60-edgeft-fab0.network"] = (text.replace("[Network]\n", "[Network]\nNoSuchKey=1\n"), mode)
        return files
    _plan, _state, log = configure(tmp_path, "fabric", ["fab0", "fab1"], ["fab0", "fab1"], edit=bad_key)
    assert [line for line in complaints(log) if "NoSuchKey" in line], log[-3000:]


def with_late_link(files):
    files["etc/systemd/network/99-late0.network"] = (LATE_NETWORK, "0644")
    return files


def test_networkd_keeps_the_agents_rules(tmp_path):
    """With edgeft's networkd.conf.d drop-in, a rule networkd did not make survives its next link configuration."""
    _plan, state, log = configure(tmp_path, "fabric", ["fab0", "fab1"], ["fab0", "fab1"], edit=with_late_link,
                                  after=AGENT_RULE + "\n" + LATE_LINK, after_wait=["late0"])
    assert re.search(r"^late0: State changed: configuring -> configured", log, re.M), log[-3000:]
    assert [r for r in state["rule4"] if r["priority"] == 32763 and r.get("table") == "60919"], state["rule4"]


def test_without_the_drop_in_networkd_removes_them(tmp_path):
    """Why the drop-in exists: by default networkd removes every rule it did not make when it configures a link."""
    def no_drop_in(files):
        return with_late_link({path: value for path, value in files.items() if "networkd.conf.d" not in path})
    _plan, state, log = configure(tmp_path, "fabric", ["fab0", "fab1"], ["fab0", "fab1"], edit=no_drop_in,
                                  after=AGENT_RULE + "\n" + LATE_LINK, after_wait=["late0"])
    assert re.search(r"^late0: State changed: configuring -> configured", log, re.M), log[-3000:]
    assert not [r for r in state["rule4"] if r["priority"] == 32763], state["rule4"]
