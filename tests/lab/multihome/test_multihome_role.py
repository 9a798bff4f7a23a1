"""The multihome role on a default lab (4 hosts), through ansible-playbook and the netns connection.

One lab for the module, and the tests run in file order, each starting from what
the previous one left: --check on fresh hosts, the first run, the idempotent
second run, an address dropped from one host's inventory, bad input refused
with the host unchanged, and state=absent restoring the hosts. Lab hosts come
up with their plane addresses already on the NICs (the lab configures them), so
the first run adopts those and adds everything else.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import os

import pytest
import yaml
from mh_lab import NICS, addresses, routes, rules, run_playbook, snapshot, sysctls

HOSTS = ("r1h1", "r1h2", "r2h1", "r2h2")
PROTO = 237
SCOPE_LINK, SCOPE_UNIVERSE = 253, 0
EXPECTED_SYSCTLS = {
    "net.ipv4.conf.%s.rp_filter": "2",
    "net.ipv4.conf.%s.arp_ignore": "1",
    "net.ipv4.conf.%s.arp_announce": "2",
    "net.ipv4.conf.%s.ignore_routes_with_linkdown": "1",
    "net.ipv6.conf.%s.ignore_routes_with_linkdown": "1",
    "net.ipv6.conf.%s.accept_ra": "0",
}
FRESH = {}  # host -> snapshot before any run


def inventory(lab):
    with open(lab.inventory_path) as f:
        return yaml.safe_load(f)


def planes_of(inv, host):
    return inv["all"]["children"]["fabric"]["hosts"][host]["edgeft_planes"]


def expected_tables(planes):
    """{table: {route}} and {rule} the declaration asks for (route/rule tuples as mh_lab reads them)."""
    tables, want_rules = {}, set()
    for index, plane in enumerate(planes):
        table, priority = 60901 + index, 32700 + index
        tables[table] = set()
        for key, family in (("ipv4", 4), ("ipv6", 6)):
            if not plane.get(key):
                continue
            iface = ipaddress.ip_interface(plane[key])
            tables[table].add((family, str(iface.network), None, plane["interface"],
                               SCOPE_LINK if family == 4 else SCOPE_UNIVERSE, PROTO))
            want_rules.add((family, priority, "%s/%d" % (iface.ip, iface.ip.max_prefixlen), table, PROTO))
    return tables, want_rules


def assert_configured(lab, host, planes):
    have = addresses(lab, host)
    for plane in planes:
        want = {str(ipaddress.ip_interface(plane[k])) for k in ("ipv4", "ipv6") if plane.get(k)}
        assert have.get(plane["interface"], set()) == want, (host, plane["interface"], have)
    tables, want_rules = expected_tables(planes)
    for table, want in tables.items():
        assert routes(lab, host, table) == want, (host, table)
    ours = {r for r in rules(lab, host) if r[3] in tables}
    assert ours == want_rules, host
    values = sysctls(lab, host)
    for plane in planes:
        for key, value in EXPECTED_SYSCTLS.items():
            assert values[key % plane["interface"]] == value, (host, key % plane["interface"])


def record_path(inv, host):
    return os.path.join(inv["all"]["children"]["fabric"]["hosts"][host]["edgeft_state_dir"], "multihome.json")


def test_check_mode_on_fresh_hosts_reports_changes_and_changes_nothing(mh_lab):
    inv = inventory(mh_lab)
    for host in HOSTS:
        FRESH[host] = snapshot(mh_lab, host)
    rc, out, recap = run_playbook(mh_lab.inventory_path, "--check", "--diff")
    assert rc == 0, out[-6000:]
    assert set(recap) == set(HOSTS) and all(changed == 1 and not failed for changed, failed in recap.values()), recap
    assert '"net.ipv4.conf.fab0.rp_filter": "2"' in out  # the diff shows the sysctls it would set
    for host in HOSTS:
        assert snapshot(mh_lab, host) == FRESH[host], "check mode changed %s" % host
        assert not os.path.exists(record_path(inv, host)), "check mode wrote the record of %s" % host


def test_run_configures_every_host_exactly(mh_lab):
    inv = inventory(mh_lab)
    rc, out, recap = run_playbook(mh_lab.inventory_path)
    assert rc == 0, out[-6000:]
    assert all(changed == 1 and not failed for changed, failed in recap.values()), recap
    for host in HOSTS:
        assert_configured(mh_lab, host, planes_of(inv, host))
        # Only the sysctls it manages changed; the old values are recorded for state=absent.
        now, fresh = sysctls(mh_lab, host), FRESH[host]["sysctls"]
        changed = {k for k in now if now[k] != fresh[k]}
        assert changed == {k % nic for k in EXPECTED_SYSCTLS for nic in NICS if fresh[k % nic] != EXPECTED_SYSCTLS[k]}
        with open(record_path(inv, host)) as f:
            record = json.load(f)
        assert record["sysctls"] == {k: fresh[k] for k in changed}
        # The lab's addresses were adopted, not re-added: nothing else on the host moved.
        assert snapshot(mh_lab, host)["links"] == FRESH[host]["links"]


def test_second_run_changes_nothing(mh_lab):
    before = {host: snapshot(mh_lab, host) for host in HOSTS}
    rc, out, recap = run_playbook(mh_lab.inventory_path)
    assert rc == 0, out[-6000:]
    assert recap == {host: (0, 0) for host in HOSTS}, out[-6000:]
    for host in HOSTS:
        assert snapshot(mh_lab, host) == before[host]


def test_address_dropped_from_the_inventory_is_removed_and_nothing_else(mh_lab, tmp_path):
    inv = inventory(mh_lab)
    modified = copy.deepcopy(inv)
    plane_b = planes_of(modified, "r1h1")[1]
    dropped = str(ipaddress.ip_interface(plane_b.pop("ipv6")))
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(modified))
    before = {host: snapshot(mh_lab, host) for host in HOSTS}

    rc, out, recap = run_playbook(path)
    assert rc == 0, out[-6000:]
    assert recap == {"r1h1": (1, 0), "r1h2": (0, 0), "r2h1": (0, 0), "r2h2": (0, 0)}, out[-6000:]
    for host in ("r1h2", "r2h1", "r2h2"):
        assert snapshot(mh_lab, host) == before[host]

    after, was = snapshot(mh_lab, "r1h1"), before["r1h1"]
    prefix = str(ipaddress.ip_interface(dropped).network)
    # The address goes, and with it exactly what exists only because of it: plane b's IPv6
    # route in its table and its IPv6 source rule (edgeft), the kernel's connected route in main.
    assert was["addresses"]["fab1"] - after["addresses"]["fab1"] == {dropped}
    assert {k: v for k, v in after["addresses"].items() if k != "fab1"} == {k: v for k, v in was["addresses"].items() if k != "fab1"}
    assert after["addresses"]["fab1"] <= was["addresses"]["fab1"]
    assert was["routes"][60902] - after["routes"][60902] == {(6, prefix, None, "fab1", SCOPE_UNIVERSE, PROTO)}
    assert after["routes"][60902] <= was["routes"][60902]
    assert after["routes"][60901] == was["routes"][60901]
    assert {r[1] for r in was["routes"][254] - after["routes"][254]} == {prefix}
    assert after["routes"][254] <= was["routes"][254]
    assert was["rules"] - after["rules"] == {(6, 32701, dropped.split("/", maxsplit=1)[0] + "/128", 60902, PROTO)}
    assert after["rules"] <= was["rules"]
    assert after["sysctls"] == was["sysctls"] and after["links"] == was["links"]
    assert_configured(mh_lab, "r1h1", planes_of(modified, "r1h1"))

    # Declared again: it comes back, with its route and rule.
    rc, out, recap = run_playbook(mh_lab.inventory_path)
    assert rc == 0 and recap["r1h1"] == (1, 0), out[-6000:]
    assert_configured(mh_lab, "r1h1", planes_of(inv, "r1h1"))


@pytest.mark.parametrize("change, message", [
    (lambda planes: planes[0].update(interface="fab9"), "planes[0].interface: no interface 'fab9'"),
    (lambda planes: planes[1].update(ipv4="198.18.200.12/16"),
     "planes[1].ipv4: 198.18.0.0/16 overlaps planes[0].ipv4 198.18.0.0/16"),
])
def test_bad_input_fails_naming_the_option_and_changes_nothing(mh_lab, change, message):
    planes = copy.deepcopy(planes_of(inventory(mh_lab), "r1h2"))
    change(planes)
    before = snapshot(mh_lab, "r1h2")
    rc, out, recap = run_playbook(mh_lab.inventory_path, "--limit", "r1h2", "-e", json.dumps({"multihome_planes": planes}))
    assert rc != 0 and recap == {"r1h2": (0, 1)}, out[-6000:]
    assert message in out, out[-3000:]
    assert snapshot(mh_lab, "r1h2") == before


FAILOVER_PREFIXES = {"a": {"ipv6": "fd0e:d6ef:7aff::/64"}, "b": {"ipv6": "fd0e:d6ef:7bff::/64"}}


def test_failover_prefixes_install_every_hosts_failover_addresses_and_rules(mh_lab):
    """Routed planes: one failover address per plane from edgeft_failover_prefixes, hosts in name order.
    (IPv6 only: the lab's IPv4 planes fill 198.18.0.0/15, which leaves no IPv4 prefix outside them.)"""
    extra = json.dumps({"edgeft_failover_prefixes": FAILOVER_PREFIXES})
    rc, out, recap = run_playbook(mh_lab.inventory_path, "-e", extra)
    assert rc == 0, out[-6000:]
    assert all(changed == 1 and not failed for changed, failed in recap.values()), recap
    for number, host in enumerate(sorted(HOSTS), start=1):
        now = snapshot(mh_lab, host)
        for nic, plane, table, priority in (("fab0", "7aff", 60901, 32700), ("fab1", "7bff", 60902, 32701)):
            failover = "fd0e:d6ef:%s::%d" % (plane, number)
            assert "%s/128" % failover in now["addresses"][nic], (host, now["addresses"])
            assert (6, priority, "%s/128" % failover, table, PROTO) in now["rules"], host
    rc, out, recap = run_playbook(mh_lab.inventory_path, "-e", extra)
    assert rc == 0 and recap == {host: (0, 0) for host in HOSTS}, out[-6000:]


def test_absent_removes_everything_and_restores_the_sysctls(mh_lab):
    inv = inventory(mh_lab)
    rc, out, recap = run_playbook(mh_lab.inventory_path, "-e", "multihome_state=absent")
    assert rc == 0, out[-6000:]
    assert all(changed == 1 and not failed for changed, failed in recap.values()), recap
    for host in HOSTS:
        now, fresh = snapshot(mh_lab, host), FRESH[host]
        assert now["sysctls"] == fresh["sysctls"], host
        assert now["links"] == fresh["links"], host
        assert now["routes"][60901] == now["routes"][60902] == set(), host
        assert {r for r in now["rules"] if r[3] in (60901, 60902)} == set(), host
        assert now["rules"] == fresh["rules"], host
        # The plane addresses were adopted on the first run, so they were the module's to remove.
        assert all(not now["addresses"].get(nic) for nic in NICS), (host, now["addresses"])
        assert not os.path.exists(record_path(inv, host))
    rc, out, recap = run_playbook(mh_lab.inventory_path, "-e", "multihome_state=absent")
    assert rc == 0 and recap == {host: (0, 0) for host in HOSTS}, out[-6000:]
