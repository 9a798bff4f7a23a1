"""The edgeft.failover.bond role through ansible-playbook, on a host that is a namespace
the test creates (edgeft.failover.netns connection), with the target's /usr/bin/python3.

This machine's kernel has no bonding driver: the role must change nothing with no
bonds, and refuse a bond before any change. Creating bonds through the role runs
in the project's VM scenario.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
NO_DRIVER = "bond: this kernel has no bonding driver (CONFIG_BONDING); load the module `bonding` or use a kernel that has it"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")

PLAYBOOK = [{"name": "Bonds", "hosts": "all", "gather_facts": False, "roles": [{"role": "edgeft.failover.bond"}]}]


@pytest.fixture
def host(tmp_path):
    ns = "eft-bdr-%s" % uuid.uuid4().hex[:8]
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        for nic, far in (("fab0", "p0"), ("fab1", "p1")):
            subprocess.run(["ip", "-n", ns, "link", "add", nic, "type", "veth", "peer", "name", far], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", nic, "up"], check=True)
        (tmp_path / "play.yml").write_text(yaml.safe_dump(PLAYBOOK))
        yield {"ns": ns, "dir": tmp_path}
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def play(host, hostvars, *extra):
    """The role on the namespace host; persistence off unless hostvars say otherwise (the host
    shares the machine's /etc)."""
    inventory = {"all": {"hosts": {"h1": dict({
        "ansible_host": host["ns"], "ansible_connection": "edgeft.failover.netns", "edgeft_persist": "none",
        "ansible_python_interpreter": "/usr/bin/python3", "edgeft_state_dir": str(host["dir"] / "state")}, **hostvars)}}}
    (host["dir"] / "hosts.yml").write_text(yaml.safe_dump(inventory))
    proc = subprocess.run(["ansible-playbook", "-i", str(host["dir"] / "hosts.yml"), str(host["dir"] / "play.yml"), *extra],
                          cwd=REPO, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    return proc.returncode, proc.stdout + proc.stderr


def links(host):
    out = subprocess.run(["ip", "-n", host["ns"], "-j", "-d", "link", "show"], check=True, capture_output=True, text=True)
    return [{k: link.get(k) for k in ("ifname", "flags", "master", "mtu", "linkinfo")} for link in json.loads(out.stdout)]


def test_no_bonds_changes_nothing(host):
    before = links(host)
    rc, out = play(host, {})
    assert rc == 0, out
    assert "changed=0" in out and "failed=0" in out
    assert links(host) == before and not (host["dir"] / "state").exists()


def test_bonds_are_all_refused_before_any_change(host):
    """Several bonds: a validation pass over all of them comes before the first is created."""
    before = links(host)
    bonds = [{"name": "bond0", "ports": ["fab0"], "primary": "fab0"}, {"name": "bond1", "ports": ["fab1"], "primary": "fab1"}]
    rc, out = play(host, {"edgeft_bonds": bonds, "edgeft_persist": "none"})
    assert rc != 0
    assert "Validate every bond before changing any" in out and NO_DRIVER in out
    assert "Create, change or remove the bonds" not in out
    assert links(host) == before


def test_a_single_bond_is_refused_before_any_change(host):
    """One bond: no separate pass, the module refuses it before changing anything."""
    before = links(host)
    rc, out = play(host, {"edgeft_bonds": [{"name": "bond0", "ports": ["fab0", "fab1"], "primary": "fab0"}], "edgeft_persist": "none"})
    assert rc != 0
    assert "Create, change or remove the bonds" in out and NO_DRIVER in out
    assert links(host) == before


def test_bad_bond_options_name_the_option(host):
    rc, out = play(host, {"edgeft_bonds": [{"name": "bond0", "ports": ["fab0"], "mode": "802.3ad", "primary": "fab0"}]})
    assert rc != 0 and "primary: only used in modes active-backup, balance-tlb, balance-alb" in out


def test_the_argument_spec_checks_entries(host):
    rc, out = play(host, {"edgeft_bonds": [{"ports": ["fab0"]}]})
    assert rc != 0 and "missing required arguments: name found in bond_bonds" in out


def test_persistence_uses_file_names_of_its_own(host):
    """The bonds' plan goes to edgeft.failover.network_persist under the prefix 61-edgeft-bond: the
    bond files it no longer needs go, the files of multihome's prefix (60-edgeft) stay. Written
    under a scratch root (network_persist_root), never the machine's /etc."""
    root = host["dir"] / "root"
    (root / "sbin").mkdir(parents=True)
    (root / "sbin/ifup").write_text("")
    (root / "sbin/ifup").chmod(0o755)
    (root / "etc/network/interfaces.d").mkdir(parents=True)
    (root / "etc/network/interfaces").write_text("source /etc/network/interfaces.d/*\n")
    stale = root / "etc/network/interfaces.d/61-edgeft-bond-bond9"
    stale.write_text("auto bond9\n")
    theirs = root / "etc/network/interfaces.d/60-edgeft-fab0"
    theirs.write_text("auto fab0\n")
    rc, out = play(host, {"edgeft_bonds": [{"name": "bond9", "state": "absent"}], "edgeft_persist": "ifupdown",
                          "network_persist_root": str(root)})
    assert rc == 0, out[-3000:]
    assert not stale.exists() and theirs.read_text() == "auto fab0\n"
