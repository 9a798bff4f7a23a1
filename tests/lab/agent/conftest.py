"""Agent tests: a two-host lab per topology for the whole run, deployed with site.yml (+ the
role's agent tasks) and reset between tests; one agent process per host namespace, killed by
PID at teardown.

Nothing outside the lab's namespaces is touched: agents run with `ip netns exec`,
their metrics endpoints live on each namespace's own loopback, and every route,
rule or sysctl they set belongs to a lab host.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest
from deployed import SHARED, held, report_rebuild
from edgeft_lab import Lab
from edgeft_lab.agents import Agents, run_playbook  # shared with the benchmarks

from ansible_collections.edgeft.failover.plugins.module_utils.constants import HELD_TABLE

HERE = Path(__file__).resolve().parent

HOSTS = ("r1h1", "r2h1")


def deploy_lab(inventory_dir, topology="fabric.yml"):
    """A fresh lab of an agent topology with a unique name, deployed; torn down by the caller
    (or here, when the deployment fails)."""
    lab = Lab(HERE / topology, name="ag-%s" % uuid.uuid4().hex[:6])
    inventory = Path(inventory_dir) / "hosts.yml"
    try:
        lab.up(inventory=inventory)
        lab.inventory_path = inventory
        rc, out = run_playbook(inventory, HERE / "deploy.yml", "-e", "@%s" % (HERE / "lab_vars.yml"))
    except BaseException:
        lab.down()
        raise
    if rc != 0:
        lab.down()
        raise AssertionError("deployment of lab %s failed:\n%s" % (lab.name, out[-6000:]))
    return lab


def neutral_state(lab):
    """Back to what a fresh deployment leaves: no fault, every plane UP, no peer steered.

    The next test's agents then start from the same state a new lab would give them.
    """
    from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
    from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import DatapathMaps

    lab.repair_all()
    for host in HOSTS:
        ns = lab.netns(host)
        # The held table (planes judged down) goes; flaps leave neighbour entries INCOMPLETE
        # with a 1 s retry: start them over as the peer table made them (managed).
        for family in ("-4", "-6"):
            subprocess.run(["ip", "-n", ns, family, "route", "flush", "table", str(HELD_TABLE)], capture_output=True, check=False)
        for nic in ("fab0", "fab1"):
            subprocess.run(["ip", "-n", ns, "neigh", "flush", "dev", nic], capture_output=True, check=False)
        with DatapathMaps.open_pinned(str(lab.pin_root(host))) as maps:
            for peer_id in maps.peer_ids():
                peer = maps.get_peer(peer_id)
                for plane, nic in enumerate(("fab0", "fab1")):
                    for addr in (peer["v4"][plane], peer["v6"][plane]):
                        if addr:
                            subprocess.run(["ip", "-n", ns, "neigh", "replace", addr, "dev", nic, "managed"], check=True)
    for host in HOSTS:
        with DatapathMaps.open_pinned(str(lab.pin_root(host))) as maps:
            for index in range(layout.PLANE_SLOTS):
                slot = maps.planes.get(index)
                if slot.ifindex:
                    maps.set_plane_flags(index, layout.PLANE_UP | (slot.flags & layout.PLANE_ROUTED))
            for peer_id in maps.peer_ids():
                st = maps.state.get(peer_id)
                st.active_plane, st.down_mask, st.learned_mask, st.changed_ns = 0, 0, 0, 0
                maps.state.put(peer_id, st)
    matrix = lab.ping_matrix()
    assert matrix.ok, matrix.format()


class SharedLab:
    """One deployed lab of a topology for every agent test of the run, reset between tests.

    A test that leaves it broken (the reset cannot bring it back to a neutral state) is
    reported loudly and the lab is rebuilt, so the next test never inherits the damage.
    """

    def __init__(self, inventory_dir, topology):
        self.inventory_dir, self.topology = inventory_dir, topology
        self.lab = None
        SHARED.append(self)

    def neutral(self):
        """The lab, in the state a fresh deployment leaves (neutral_state), rebuilt if need be."""
        if self.lab is None:
            self.lab = deploy_lab(self.inventory_dir, self.topology)
        try:
            neutral_state(self.lab)
        except Exception as broken:  # noqa: BLE001  (whatever the reset hit, the lab is not fit)
            report_rebuild("%s (%s)" % (self.lab.name, self.topology), "%s: %s" % (type(broken).__name__, broken))
            self.release()
            self.lab = deploy_lab(self.inventory_dir, self.topology)
            neutral_state(self.lab)
        return self.lab

    def release(self):
        if self.lab is not None:
            lab, self.lab = self.lab, None
            lab.down()


def _shared_lab(tmp_path_factory, topology):
    if os.geteuid() != 0:
        pytest.skip("the agent lab tests need root (namespaces, tc, bpf)")
    if os.environ.get("EDGEFT_AGENT_LAB_PER_TEST") == "1":
        yield None
        return
    yield from held(SharedLab(tmp_path_factory.mktemp("inventory"), topology))


@pytest.fixture(scope="session")
def shared_lab(tmp_path_factory):
    """One deployed lab for every agent test of the run, unless EDGEFT_AGENT_LAB_PER_TEST=1.

    A deployment costs 25-60 s on a 2-core machine; one per test would take the
    suite past its time budget. Each test still gets fresh agent processes and
    the data path state of a fresh deployment (SharedLab.neutral).
    """
    yield from _shared_lab(tmp_path_factory, "fabric.yml")


@pytest.fixture(scope="session")
def shared_routed_lab(tmp_path_factory):
    """As shared_lab, on the routed fabric (fabric_routed.yml): planes are routed
    leaf-spine networks, steering translates to failover addresses."""
    yield from _shared_lab(tmp_path_factory, "fabric_routed.yml")


def _agent_lab(shared, tmp_path, topology):
    lab = shared.neutral() if shared else deploy_lab(tmp_path, topology)
    agents = None
    try:
        if not shared:
            neutral_state(lab)
        agents = Agents(lab, lab.inventory_path, tmp_path, hosts=HOSTS)
        yield lab, agents
    finally:
        try:
            if agents is not None:
                agents.stop_all()
                for host in HOSTS:
                    print(agents.tail(host, lines=60))
        finally:
            if shared is None:
                lab.down()


@pytest.fixture
def agent_lab(shared_lab, tmp_path):
    """(lab, agents): a deployed lab in a neutral state; agents not started yet,
    killed by PID (and their logs printed) at teardown."""
    yield from _agent_lab(shared_lab, tmp_path, "fabric.yml")


@pytest.fixture
def routed_agent_lab(shared_routed_lab, tmp_path):
    """agent_lab on the routed fabric."""
    yield from _agent_lab(shared_routed_lab, tmp_path, "fabric_routed.yml")
