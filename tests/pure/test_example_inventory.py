"""inventories/production.example.yml is a working inventory: read by Ansible, its planes pass
the plane model, every host has peers, and the switch playbooks' model finds every switch and
its hosts from the planes, with no group but fabric and switches."""

from __future__ import annotations

from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader

from ansible_collections.edgeft.failover.plugins.filter.planes import plane_refusal
from ansible_collections.edgeft.failover.plugins.module_utils.maintenance import model
from repo import REPO

EXAMPLE = REPO / "inventories" / "production.example.yml"


def _inventory():
    inv = InventoryManager(loader=DataLoader(), sources=[str(EXAMPLE)])
    groups = {name: [h.name for h in g.get_hosts()] for name, g in inv.groups.items()}
    return {"groups": groups, "hostvars": {h.name: dict(h.get_vars()) for h in inv.get_hosts()}}


def test_only_fabric_and_switches_are_written():
    inv = _inventory()
    assert sorted(g for g in inv["groups"] if g not in ("all", "ungrouped")) == ["fabric", "switches"]
    assert len(inv["groups"]["fabric"]) >= 4


def test_every_host_declares_planes_the_modules_accept():
    inv = _inventory()
    for host in inv["groups"]["fabric"]:
        assert plane_refusal(inv["hostvars"][host]["edgeft_planes"]) == "", host


def test_the_switch_playbooks_find_every_switch_and_its_hosts():
    inv = _inventory()
    assert model.known_switches(inv) == ["spine-a", "spine-b", "tor-r01-a", "tor-r01-b", "tor-r02-a", "tor-r02-b"]
    tor = model.maintenance_plan("tor-r01-a", inv)["plans"]["tor-r01-a"]
    assert (tor["role"], tor["plane"], tor["hosts"], tor["peers"]) == (
        "tor", "a", ["gpu-r01-n01", "gpu-r01-n02"], ["gpu-r02-n01", "gpu-r02-n02"])
    spine = model.maintenance_plan("spine-b", inv)["plans"]["spine-b"]
    assert (spine["role"], spine["hosts"], spine["peers"]) == ("spine", inv["groups"]["fabric"], [])
