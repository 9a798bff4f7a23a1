"""edgeft.failover.bond on this machine's real kernel, which has no bonding driver.

In a namespace the test creates (two veth "NICs" with addresses, up), the module
must refuse with the clear driver error and leave the namespace exactly as it
was: links, their state, masters, MTUs, addresses, routes. The apply path
(creating and changing real bonds) runs in the project's VM scenario, whose
kernel has the driver; its logic is unit-tested in test_bond_changes.py and
test_bond_runner.py.
"""

from __future__ import annotations

import json
import os
from unittest import mock

import pytest

import hostlab as L
from nshost import ip_ns as sh, veth_netns

from ansible_collections.edgeft.failover.plugins.module_utils.bond import kernel
from ansible_collections.edgeft.failover.plugins.modules import bond as bond_module

NO_DRIVER = "bond: this kernel has no bonding driver (CONFIG_BONDING); load the module `bonding` or use a kernel that has it"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)"),
    pytest.mark.skipif(os.path.exists("/sys/class/net/bonding_masters") or os.path.exists("/proc/modules"),
                       reason="this kernel has or can load a bonding driver: the refusal cannot be shown here"),
]

BOND = {"name": "bond0", "ports": ["fab0", "fab1"], "primary": "fab0", "miimon": 100, "updelay": 200,
        "addresses": ["198.18.1.11/16"], "mtu": 9000}


@pytest.fixture
def host(tmp_path):
    with veth_netns("eft-bd", [("fab0", "p0", ["198.18.1.11/16"]), ("fab1", "p1", ["198.19.1.11/16"])]) as ns:
        yield {"ns": ns, "state_dir": str(tmp_path / "state")}


def namespace_state(host):
    """Everything the module could have touched, as iproute2 reports it."""
    links = json.loads(sh(host["ns"], "-j", "-d", "link", "show"))
    keep = ("ifindex", "ifname", "flags", "mtu", "master", "operstate", "address", "linkinfo")
    return {
        "links": [{k: link.get(k) for k in keep} for link in links],
        "addresses": json.loads(sh(host["ns"], "-j", "addr", "show")),
        "routes": [json.loads(sh(host["ns"], "-j", fam, "route", "show", "table", "all")) for fam in ("-4", "-6")],
    }


def run(host, check=False, **params):
    args = dict(BOND, state_dir=host["state_dir"])
    args.update(params)
    return L.run_module(bond_module.main, args, host["ns"], check_mode=check)


@pytest.mark.parametrize("check", [False, True], ids=["run", "check"])
def test_refuses_with_the_driver_error_and_changes_nothing(host, check):
    before = namespace_state(host)
    result = run(host, check=check)
    assert result.get("failed") and result["msg"] == NO_DRIVER
    assert namespace_state(host) == before
    assert not os.path.exists(host["state_dir"])


def test_the_kernels_own_refusal_eopnotsupp_gives_the_same_error(host):
    """Past detection (as on a kernel whose bonding.ko is listed but cannot load), the
    RTM_NEWLINK of kind bond itself fails with EOPNOTSUPP: same message, nothing changed.
    Only the detection is overridden; the netlink request is real."""
    before = namespace_state(host)
    with mock.patch.object(kernel, "driver_status", return_value="loadable"):
        result = run(host)
    assert result.get("failed") and result["msg"] == NO_DRIVER
    assert namespace_state(host) == before


def test_bad_input_is_refused_first_naming_the_option(host):
    before = namespace_state(host)
    result = run(host, primary="fab7")
    assert result.get("failed") and result["msg"] == "primary: fab7 is not one of the bond's ports (fab0, fab1)"
    result = run(host, arp_interval=100, arp_ip_target=["198.18.1.1"])
    assert result.get("failed") and result["msg"].startswith("miimon: the ARP monitor (arp_interval 100) and the MII monitor")
    result = run(host, ports=None)
    assert result.get("failed") and "ports" in result["msg"]  # required with state=present (argument spec)
    assert namespace_state(host) == before


def test_absent_without_a_bond_is_a_no_op(host):
    before = namespace_state(host)
    result = run(host, state="absent")
    assert not result.get("failed") and not result["changed"] and result["steps"] == []
    assert result["plan"] == {"interfaces": [], "sysctls": {}}
    assert namespace_state(host) == before


def test_absent_refuses_to_delete_an_interface_that_is_not_a_bond(host):
    result = run(host, name="fab0", state="absent")
    assert result.get("failed") and result["msg"] == "name: fab0 exists and is a veth, not a bond; not removing it"
