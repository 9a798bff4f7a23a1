"""Bond declarations: normalisation and every cross-field validation rule (pure).

Bonds cannot be created on this test machine (its kernel has no bonding
driver); the apply path runs for real in the project's VM scenario.
"""

from __future__ import annotations

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.bond import spec
from ansible_collections.edgeft.failover.plugins.module_utils.bond.spec import OptionError

AB = {"name": "bond0", "ports": ["fab0", "fab1"]}
ARP = dict(AB, arp_interval=100, arp_ip_target=["198.18.1.1"])
LACP = dict(AB, mode="802.3ad")


def opts(**params):
    return spec.normalize_bond(dict(AB, **params))["options"]


def test_defaults_active_backup_with_the_mii_monitor():
    bond = spec.normalize_bond(AB)
    assert bond == {"name": "bond0", "ports": ["fab0", "fab1"], "mtu": None, "addresses": None, "options": {
        "mode": "active-backup", "miimon": 100, "arp_interval": None, "arp_ip_target": [], "arp_validate": None,
        "arp_all_targets": None, "lacp_rate": None, "primary": None, "updelay": 0, "downdelay": 0, "xmit_hash_policy": None}}


def test_arp_monitor_defaults():
    o = spec.normalize_bond(ARP)["options"]
    assert (o["miimon"], o["arp_interval"], o["arp_ip_target"], o["arp_validate"], o["arp_all_targets"]) == \
        (None, 100, ["198.18.1.1"], "none", "any")
    o = spec.normalize_bond(dict(ARP, miimon=0, arp_validate="all", arp_all_targets="all"))["options"]
    assert (o["miimon"], o["arp_validate"], o["arp_all_targets"]) == (None, "all", "all")


def test_mode_defaults_for_lacp_and_hashing():
    o = spec.normalize_bond(LACP)["options"]
    assert (o["lacp_rate"], o["xmit_hash_policy"], o["miimon"]) == ("slow", "layer2", 100)
    o = spec.normalize_bond(dict(LACP, lacp_rate="fast", xmit_hash_policy="layer3+4"))["options"]
    assert (o["lacp_rate"], o["xmit_hash_policy"]) == ("fast", "layer3+4")
    assert opts(mode="balance-xor")["xmit_hash_policy"] == "layer2"
    assert opts(mode="balance-tlb", primary="fab1")["primary"] == "fab1"


def test_delays_multiples_of_miimon_and_ansible_nones():
    o = opts(miimon=50, updelay=200, downdelay=0, lacp_rate=None, primary=None, xmit_hash_policy=None,
             arp_ip_target=None, arp_validate=None, arp_all_targets=None, mtu=None, addresses=None)
    assert (o["miimon"], o["updelay"], o["downdelay"]) == (50, 200, 0)


def test_mtu_and_addresses():
    bond = spec.normalize_bond(dict(AB, mtu="9000", addresses=["198.18.1.11/16", "FD0E:D6EF:7A00:1::B/64"]))
    assert bond["mtu"] == 9000 and bond["addresses"] == ["198.18.1.11/16", "fd0e:d6ef:7a00:1::b/64"]


@pytest.mark.parametrize("params, message", [
    # names
    (dict(AB, name=""), "name: an interface name is required"),
    (dict(AB, name="bond-with-a-long-name"), "name: 'bond-with-a-long-name' is not a valid interface name"),
    (dict(AB, name="bond/0"), "name: 'bond/0' is not a valid interface name"),
    (dict(AB, mode="active-active"), "mode: 'active-active' is not one of balance-rr, active-backup"),
    # ports
    (dict(AB, ports=[]), "ports: a bond needs at least one port"),
    (dict(AB, ports=None), "ports: a bond needs at least one port"),
    (dict(AB, ports=["fab0", "fab0"]), "ports[1]: fab0 is listed twice"),
    (dict(AB, ports=["fab0", "bond0"]), "ports[1]: bond0 is the bond itself"),
    (dict(AB, ports=["fab0", "fab 1"]), "ports[1]: 'fab 1' is not a valid interface name"),
    # the link monitor
    (dict(AB, miimon=0), "miimon: 0 with no ARP monitor leaves the bond without a link monitor"),
    (dict(AB, miimon=-1), "miimon: -1 is out of range"),
    (dict(ARP, miimon=100), "miimon: the ARP monitor (arp_interval 100) and the MII monitor exclude each other"),
    (dict(AB, arp_interval=100), "arp_ip_target: the ARP monitor (arp_interval) needs at least one target"),
    (dict(ARP, mode="802.3ad"), "arp_interval: the ARP monitor is not available in mode 802.3ad"),
    (dict(ARP, mode="balance-alb"), "arp_interval: the ARP monitor is not available in mode balance-alb"),
    (dict(AB, arp_ip_target=["198.18.1.1"]), "arp_ip_target: only used by the ARP monitor; set arp_interval"),
    (dict(AB, arp_validate="all"), "arp_validate: only used by the ARP monitor"),
    (dict(AB, arp_all_targets="all"), "arp_all_targets: only used by the ARP monitor"),
    (dict(ARP, arp_validate="sometimes"), "arp_validate: 'sometimes' is not one of none, active"),
    (dict(ARP, arp_all_targets="most"), "arp_all_targets: 'most' is not one of any, all"),
    (dict(ARP, arp_ip_target=["fd0e::1"]), "arp_ip_target[0]: fd0e::1 is not IPv4"),
    (dict(ARP, arp_ip_target=["198.18.1.1", "gw"]), "arp_ip_target[1]: 'gw' is not an IPv4 address"),
    (dict(ARP, arp_ip_target=["224.0.0.1"]), "arp_ip_target[0]: 224.0.0.1 cannot be an ARP target"),
    (dict(ARP, arp_ip_target=["198.18.1.1", "198.18.1.1"]), "arp_ip_target[1]: 198.18.1.1 is listed twice"),
    (dict(ARP, arp_ip_target=["198.18.1.%d" % i for i in range(1, 18)]), "arp_ip_target: 17 targets, the kernel holds at most 16"),
    (dict(ARP, arp_ip_target="198.18.1.1"), "arp_ip_target: expected a list"),
    # mode-dependent options
    (dict(AB, lacp_rate="fast"), "lacp_rate: only used in mode 802.3ad (LACP); this bond has mode active-backup"),
    (dict(LACP, lacp_rate="sometimes"), "lacp_rate: 'sometimes' is not one of slow, fast"),
    (dict(AB, primary="fab2"), "primary: fab2 is not one of the bond's ports (fab0, fab1)"),
    (dict(AB, mode="balance-rr", primary="fab0"), "primary: only used in modes active-backup, balance-tlb, balance-alb; this bond has mode balance-rr"),
    (dict(LACP, primary="fab0"), "primary: only used in modes active-backup, balance-tlb, balance-alb; this bond has mode 802.3ad"),
    (dict(AB, xmit_hash_policy="layer3+4"), "xmit_hash_policy: only used in modes balance-xor, 802.3ad, balance-tlb"),
    (dict(LACP, xmit_hash_policy="layer9"), "xmit_hash_policy: 'layer9' is not one of layer2"),
    # delays
    (dict(AB, updelay=150), "updelay: 150 is not a multiple of miimon (100); the kernel would round it down to 100"),
    (dict(AB, miimon=40, downdelay=100), "downdelay: 100 is not a multiple of miimon (40); the kernel would round it down to 80"),
    (dict(ARP, updelay=200), "updelay: needs the MII monitor (miimon); the ARP monitor has no updelay"),
    (dict(ARP, downdelay=100), "downdelay: needs the MII monitor (miimon)"),
    (dict(AB, updelay="soon"), "updelay: 'soon' is not an integer"),
    # the rest
    (dict(AB, mtu=67), "mtu: 67 is out of range (68 to 65535)"),
    (dict(AB, mtu=70000), "mtu: 70000 is out of range"),
    (dict(AB, addresses=["198.18.1.11"]), "addresses[0]: '198.18.1.11' needs a prefix length"),
    (dict(AB, addresses=["198.18.1.300/16"]), "addresses[0]: '198.18.1.300/16' is not an address with prefix length"),
    (dict(AB, addresses=["198.18.1.11/16", "198.18.1.11/16"]), "addresses[1]: 198.18.1.11/16 is listed twice"),
])
def test_bad_declarations_name_the_option(params, message):
    with pytest.raises(OptionError) as err:
        spec.normalize_bond(params)
    assert message in str(err.value)
    assert str(err.value).split(":", maxsplit=1)[0].split("[", maxsplit=1)[0] in spec.OPTION_NAMES + ("name", "ports", "mtu", "addresses")


LINKS = {
    "lo": {"kind": None, "master": None, "addresses": ["127.0.0.1/8"]},
    "fab0": {"kind": "veth", "master": None, "addresses": ["fe80::1/64"]},
    "fab1": {"kind": "veth", "master": None, "addresses": ["198.19.1.11/16"]},
    "fab2": {"kind": "veth", "master": "bond9", "addresses": []},
    "br0": {"kind": "bridge", "master": None, "addresses": []},
    "bond9": {"kind": "bond", "master": None, "addresses": []},
    "veth9": {"kind": "veth", "master": None, "addresses": []},
}


def test_host_problems_name_the_port():
    bond = spec.normalize_bond(dict(AB, ports=["fab0", "fab1", "fab2", "fab3", "br0", "lo"]))
    errors, warnings = spec.host_problems(bond, LINKS)
    assert errors == [
        "ports[2]: fab2 is already a port of bond9; remove it there first",
        "ports[3]: there is no interface 'fab3' on this host",
        "ports[4]: br0 is a bridge and cannot be a bond port",
        "ports[5]: lo is a loopback and cannot be a bond port",
    ]
    assert warnings[0] == ("ports[1]: fab1 carries 198.19.1.11/16, which stop working once it is a bond port; move them to "
                           "the bond (addresses)")


def test_host_problems_name_clash_and_own_ports():
    errors, _warnings = spec.host_problems(spec.normalize_bond(dict(AB, name="veth9")), LINKS)
    assert errors == ["name: veth9 exists and is a veth, not a bond; choose another name"]
    links = dict(LINKS, fab0=dict(LINKS["fab0"], master="bond0"), bond0={"kind": "bond", "master": None, "addresses": []})
    assert spec.host_problems(spec.normalize_bond(AB), links)[0] == []
