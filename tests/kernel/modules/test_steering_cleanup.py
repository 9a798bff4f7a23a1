"""The steering_cleanup core on a real kernel, in a throwaway network namespace: the agent's and
drains' rules and table routes and the recorded managed neighbours go, what others added at the
same places stays, check mode changes nothing, and a second run finds nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
from repo import collections_path

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")

RUN = """
import json, sys
from ansible_collections.edgeft.failover.plugins.module_utils.uninstall.steering import steering_cleanup
params, check = json.loads(sys.argv[1]), sys.argv[2] == 'check'
print(json.dumps(steering_cleanup(params, check)[0]))
"""


@pytest.fixture
def ns(tmp_path):
    name = "eft-stc-%s" % uuid.uuid4().hex[:8]
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def ip(ns, *argv):
    return subprocess.run(["ip", "-n", ns, *argv], capture_output=True, text=True, check=True).stdout


def cleanup(ns, state_dir, check=False):
    params = {"state_dir": str(state_dir), "pin_root": "/sys/fs/bpf/edgeft", "table": 60919, "priority": 32690}
    proc = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", RUN, json.dumps(params), "check" if check else "run"],
                          capture_output=True, text=True, check=False, env=dict(os.environ, PYTHONPATH=collections_path()))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def test_edgeft_routing_goes_and_the_rest_stays(ns, tmp_path):
    for nic, far, address in (("fab0", "p0", "198.18.1.11/16"), ("fab1", "p1", "198.19.1.11/16")):
        ip(ns, "link", "add", nic, "type", "veth", "peer", "name", far)  # this kernel has no dummy driver
        ip(ns, "addr", "add", address, "dev", nic)
        ip(ns, "link", "set", nic, "up")
        ip(ns, "link", "set", far, "up")
    for family in ("-4", "-6"):  # as fabric/routes.ensure_rules adds them
        ip(ns, family, "rule", "add", "priority", "32689", "table", "60920", "protocol", "237")
        ip(ns, family, "rule", "add", "priority", "32690", "table", "main", "suppress_prefixlength", "0", "protocol", "237")
        ip(ns, family, "rule", "add", "priority", "32691", "table", "60919", "protocol", "237")
    ip(ns, "-4", "rule", "add", "priority", "32690", "table", "main", "protocol", "static")  # someone else's
    ip(ns, "route", "add", "198.18.2.11", "via", "198.19.2.11", "dev", "fab1", "onlink", "table", "60919", "proto", "237")
    ip(ns, "route", "add", "198.18.2.12", "via", "198.19.2.12", "dev", "fab1", "onlink", "table", "60920", "proto", "237")
    ip(ns, "route", "add", "198.18.9.9", "via", "198.19.9.9", "dev", "fab1", "onlink", "table", "60919", "proto", "static")
    ip(ns, "neigh", "replace", "198.18.2.11", "dev", "fab0", "managed")
    ip(ns, "neigh", "replace", "198.18.2.13", "dev", "fab0", "managed")  # not in the record: not edgeft's
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / "peer_table.json").write_text(json.dumps({"version": 1, "tables": {"/sys/fs/bpf/edgeft": {
        "peers": {"r2h1": 0}, "planes": [{"name": "a", "interface": "fab0"}], "neighbors": [["198.18.2.11", "fab0"]]}}}))
    before = ip(ns, "rule") + ip(ns, "-6", "rule") + ip(ns, "route", "show", "table", "all") + ip(ns, "neigh")

    planned = cleanup(ns, state_dir, check=True)
    assert planned["changed"] and len(planned["rules"]) == 6 and len(planned["routes"]) == 2, planned
    assert planned["neighbors"] == ["198.18.2.11 dev fab0"]
    # The static rule at 32690 is not in the agent's form (no suppress_prefixlength): not a candidate at all.
    assert planned["kept"] == ["route IPv4 198.18.9.9/32 table 60919 proto 4: not added by edgeft"], planned["kept"]
    assert ip(ns, "rule") + ip(ns, "-6", "rule") + ip(ns, "route", "show", "table", "all") + ip(ns, "neigh") == before

    done = cleanup(ns, state_dir)
    assert done["rules"] == planned["rules"] and done["routes"] == planned["routes"]
    rules = ip(ns, "rule") + ip(ns, "-6", "rule")
    assert "proto 237" not in rules and "32690:\tfrom all lookup main proto static" in rules, rules
    assert ip(ns, "route", "show", "table", "60920") == ""
    assert ip(ns, "route", "show", "table", "60919").split() == "198.18.9.9 via 198.19.9.9 dev fab1 proto static onlink".split()
    neigh = ip(ns, "neigh")
    assert "198.18.2.11 " not in neigh and "198.18.2.13 dev fab0" in neigh, neigh

    again = cleanup(ns, state_dir)
    assert not again["changed"] and len(again["kept"]) == 1, again
