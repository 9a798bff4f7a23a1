"""Bond options -> pyroute2 arguments, -> sysfs, and back from netlink attributes (pure).

The kernel here has no bonding driver, so the RTM_NEWLINK messages are not sent:
the test builds them with pyroute2's own request code (IPRoute.link) and decodes
the bytes it would send - with the project's pyroute2 and with the target
interpreter's (Debian's python3-pyroute2). The apply path runs for real in the
project's VM scenario.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.bond import mapping, spec

AB = {"name": "bond0", "ports": ["fab0", "fab1"]}
IFINDEX = {"fab0": 4, "fab1": 5}


def options(**params):
    return spec.normalize_bond(dict(AB, **params))["options"]


CASES = {
    "active-backup, miimon": (dict(primary="fab0", miimon=100, updelay=200, downdelay=100), {
        "bond_mode": 1, "bond_miimon": 100, "bond_updelay": 200, "bond_downdelay": 100, "bond_arp_interval": 0,
        "bond_arp_ip_target": [], "bond_arp_validate": 0, "bond_arp_all_targets": 0, "bond_primary": 4}),
    "active-backup, ARP": (dict(arp_interval=100, arp_ip_target=["198.18.1.1", "198.18.1.2"], arp_validate="all",
                                arp_all_targets="all"), {
        "bond_mode": 1, "bond_miimon": 0, "bond_arp_interval": 100, "bond_arp_ip_target": ["198.18.1.1", "198.18.1.2"],
        "bond_arp_validate": 3, "bond_arp_all_targets": 1, "bond_primary": 0}),
    "802.3ad": (dict(mode="802.3ad", lacp_rate="fast", xmit_hash_policy="layer3+4"), {
        "bond_mode": 4, "bond_miimon": 100, "bond_updelay": 0, "bond_downdelay": 0, "bond_ad_lacp_rate": 1,
        "bond_xmit_hash_policy": 1}),
    "balance-xor": (dict(mode="balance-xor", xmit_hash_policy="layer2+3"), {
        "bond_mode": 2, "bond_miimon": 100, "bond_updelay": 0, "bond_downdelay": 0, "bond_arp_interval": 0,
        "bond_arp_ip_target": [], "bond_arp_validate": 0, "bond_arp_all_targets": 0, "bond_xmit_hash_policy": 2}),
    "balance-tlb": (dict(mode="balance-tlb", primary="fab1", xmit_hash_policy="encap3+4"), {
        "bond_mode": 5, "bond_miimon": 100, "bond_updelay": 0, "bond_downdelay": 0, "bond_primary": 5,
        "bond_xmit_hash_policy": 4}),
    "balance-alb": (dict(mode="balance-alb"), {
        "bond_mode": 6, "bond_miimon": 100, "bond_updelay": 0, "bond_downdelay": 0, "bond_primary": 0}),
    "balance-rr, ARP": (dict(mode="balance-rr", arp_interval=200, arp_ip_target=["198.18.1.1"]), {
        "bond_mode": 0, "bond_miimon": 0, "bond_arp_interval": 200, "bond_arp_ip_target": ["198.18.1.1"],
        "bond_arp_validate": 0, "bond_arp_all_targets": 0}),
    "broadcast": (dict(mode="broadcast", miimon=50), {
        "bond_mode": 3, "bond_miimon": 50, "bond_updelay": 0, "bond_downdelay": 0, "bond_arp_interval": 0,
        "bond_arp_ip_target": [], "bond_arp_validate": 0, "bond_arp_all_targets": 0}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_pyroute2_args_send_only_what_the_mode_accepts(case):
    params, expected = CASES[case]
    assert mapping.pyroute2_args(options(**params), IFINDEX) == expected


def test_primary_stays_a_name_until_the_step_runs():
    assert mapping.pyroute2_args(options(primary="fab1"))["bond_primary"] == "fab1"


def _kernel_report(args, ifnames):
    """IFLA_INFO_DATA as the kernel reports a bond: every attribute, 0 where not set."""
    report = {name: 0 for name in ("IFLA_BOND_MODE", "IFLA_BOND_MIIMON", "IFLA_BOND_UPDELAY", "IFLA_BOND_DOWNDELAY",
                                   "IFLA_BOND_ARP_INTERVAL", "IFLA_BOND_ARP_VALIDATE", "IFLA_BOND_ARP_ALL_TARGETS",
                                   "IFLA_BOND_AD_LACP_RATE", "IFLA_BOND_XMIT_HASH_POLICY")}
    for key, value in args.items():
        attr = "IFLA_BOND_" + key[5:].upper()
        report[attr] = value
    if not report.get("IFLA_BOND_ARP_IP_TARGET"):
        report.pop("IFLA_BOND_ARP_IP_TARGET", None)  # the kernel leaves the attribute out with no targets
    return report


@pytest.mark.parametrize("case", sorted(CASES))
def test_options_read_back_compare_equal_to_the_declaration(case):
    params, _expected = CASES[case]
    declared = options(**params)
    report = _kernel_report(mapping.pyroute2_args(declared, IFINDEX), {4: "fab0", 5: "fab1"})
    assert mapping.options_from_kernel(report, {4: "fab0", 5: "fab1"}) == declared


def test_read_back_ignores_leftovers_of_another_monitor_or_mode():
    # After a switch from ARP to MII the kernel may still report old targets and validation.
    report = {"IFLA_BOND_MODE": 1, "IFLA_BOND_MIIMON": 100, "IFLA_BOND_ARP_INTERVAL": 0, "IFLA_BOND_ARP_VALIDATE": 3,
              "IFLA_BOND_ARP_IP_TARGET": ["198.18.1.1"], "IFLA_BOND_AD_LACP_RATE": 1, "IFLA_BOND_XMIT_HASH_POLICY": 2,
              "IFLA_BOND_PRIMARY": 0}
    assert mapping.options_from_kernel(report, {}) == options()


SYSFS = {
    "active-backup, ARP": [("mode", "active-backup"), ("arp_interval", "100"), ("arp_ip_target", "+198.18.1.1"),
                           ("arp_ip_target", "+198.18.1.2"), ("arp_validate", "all"), ("arp_all_targets", "all")],
    "active-backup, miimon": [("mode", "active-backup"), ("miimon", "100"), ("updelay", "200"), ("downdelay", "100"),
                              ("primary", "fab0")],
    "802.3ad": [("mode", "802.3ad"), ("xmit_hash_policy", "layer3+4"), ("lacp_rate", "fast"), ("miimon", "100"),
                ("updelay", "0"), ("downdelay", "0")],
}


@pytest.mark.parametrize("case", sorted(SYSFS))
def test_sysfs_settings_in_writable_order(case):
    params, _expected = CASES[case]
    settings = mapping.sysfs_settings(options(**params))
    assert settings[0][0] == "mode"  # first: the driver takes the mode only on an empty bond that is down
    assert settings == SYSFS[case]


@pytest.mark.parametrize("option, text, value", [
    ("mode", "active-backup 1\n", "active-backup"),
    ("xmit_hash_policy", "layer3+4 1\n", "layer3+4"),
    ("lacp_rate", "slow 0\n", "slow"),
    ("arp_validate", "all 3\n", "all"),
    ("arp_all_targets", "any 0\n", "any"),
    ("arp_ip_target", "198.18.1.1,198.18.1.2\n", ["198.18.1.1", "198.18.1.2"]),
    ("arp_ip_target", "\n", []),
    ("miimon", "100\n", 100),
    ("updelay", "0\n", 0),
    ("primary", "\n", None),
    ("primary", "fab0\n", "fab0"),
])
def test_parse_sysfs(option, text, value):
    assert mapping.parse_sysfs(option, text) == value


def test_sysfs_names_are_the_option_names():
    assert set(mapping.SYSFS_ORDER) == set(spec.OPTION_NAMES)


ENCODE = r'''
import json, sys
from pyroute2 import IPRoute
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg

class Capture(IPRoute):
    """Builds the request like IPRoute.link, keeps the bytes instead of sending them."""
    def nlm_request(self, msg, msg_type=None, msg_flags=None, **kwargs):
        msg.encode()
        self.sent = (msg_type, bytes(msg.data))
        return []

out = []
ipr = Capture()
try:
    for args in json.loads(sys.argv[1]):
        ipr.link("add", ifname="bond0", kind="bond", **args)
        msg_type, data = ipr.sent
        msg = ifinfmsg(data)
        msg.decode()
        info = msg.get_attr("IFLA_LINKINFO")
        out.append({"type": msg_type, "ifname": msg.get_attr("IFLA_IFNAME"), "kind": info.get_attr("IFLA_INFO_KIND"),
                    "data": dict(info.get_attr("IFLA_INFO_DATA")["attrs"])})
finally:
    ipr.close()
print(json.dumps(out))
'''


@pytest.mark.parametrize("python", [sys.executable, "/usr/bin/python3"], ids=["project-pyroute2", "target-pyroute2"])
def test_pyroute2_encodes_the_arguments_as_ifla_bond_attributes(python):
    if not os.path.exists(python):
        pytest.skip("%s is not installed" % python)
    cases = sorted(CASES)
    proc = subprocess.run([python, "-c", ENCODE, json.dumps([CASES[c][1] for c in cases])], capture_output=True, text=True,
                          check=False, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    assert proc.returncode == 0, proc.stderr
    for case, sent in zip(cases, json.loads(proc.stdout)):
        expected = CASES[case][1]
        assert (sent["type"], sent["ifname"], sent["kind"]) == (16, "bond0", "bond"), case  # RTM_NEWLINK
        assert sent["data"] == {"IFLA_BOND_" + k[5:].upper(): v for k, v in expected.items()}, case
