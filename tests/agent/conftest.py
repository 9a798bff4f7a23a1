"""Agent tests: a two-host lab per test, deployed with site.yml (+ the role's agent
tasks), one agent process per host namespace, killed by PID at teardown.

Nothing outside the lab's namespaces is touched: agents run with `ip netns exec`,
their metrics endpoints live on each namespace's own loopback, and every route,
rule or sysctl they set belongs to a lab host.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
if str(REPO / "lab") not in sys.path:
    sys.path.insert(0, str(REPO / "lab"))

from edgeft_lab import Lab  # noqa: E402

HOSTS = ("r1h1", "r2h1")
SYSTEM_PYTHON = "/usr/bin/python3"
METRICS_PORT = 9531
HELD_TABLE = 0xEDF7 + 1  # the agent's held routes (docs/agent.md, backup routes)


def run_playbook(inventory, playbook, *extra):
    """(returncode, output) of ansible-playbook from the checkout."""
    proc = subprocess.run(["ansible-playbook", "-i", str(inventory), str(playbook)] + list(extra), cwd=REPO,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False,
                          env=dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1"))
    return proc.returncode, proc.stdout + proc.stderr


def host_vars(inventory, host):
    import yaml

    with open(inventory) as f:
        return yaml.safe_load(f)["all"]["children"]["fabric"]["hosts"][host]


class Agents:
    """The agent processes of one lab, by host; only PIDs started here are ever signalled."""

    def __init__(self, lab, inventory, log_dir):
        self.lab = lab
        self.log_dir = Path(log_dir)
        self.procs = {}
        self.logs = {}
        self.hostvars = {h: host_vars(inventory, h) for h in HOSTS}

    def agent_dir(self, host):
        """Where the role's agent tasks installed the agent (lab_vars.yml)."""
        return Path(self.hostvars[host]["edgeft_src_dir"]) / "agent"

    def config(self, host):
        return str(Path(self.hostvars[host]["edgeft_state_dir"]) / "agent.json")

    def argv(self, host, *extra):
        return self.lab.exec_argv(host, [SYSTEM_PYTHON, str(self.agent_dir(host) / "edgeft-agent"), *extra])

    def start(self, host, *extra):
        n = sum(1 for k in self.logs if k.startswith(host))
        log = self.log_dir / ("%s.%d.log" % (host, n))
        self.logs["%s.%d" % (host, n)] = log
        with open(log, "w") as out:
            # `ip netns exec` execs the agent: the PID is the agent's own.
            proc = subprocess.Popen(self.argv(host, "run", "--config", self.config(host), *extra),
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.setdefault(host, []).append(proc)
        return proc

    def current(self, host):
        return self.procs[host][-1]

    def start_all(self, *extra):
        for host in HOSTS:
            self.start(host, *extra)
        for host in HOSTS:
            self.wait_ready(host)

    def get(self, host, path, timeout=1.0) -> bytes:
        """GET path from the agent's endpoint, from inside the host's namespace."""
        s = self.lab.socket(host, socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(("127.0.0.1", METRICS_PORT))
            s.sendall(b"GET %s HTTP/1.0\r\n\r\n" % path.encode())
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        finally:
            s.close()
        head, _sep, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 200"), head
        return body

    def status(self, host, timeout=1.0):
        return json.loads(self.get(host, "/status", timeout))

    def metrics(self, host):
        """{(name, frozenset(labels)): value} of GET /metrics."""
        from ansible_collections.edgeft.failover.plugins.module_utils.agent import exposition

        return exposition.parse(self.get(host, "/metrics").decode())

    def cli(self, host, *args):
        """`edgeft-agent <args> --config <host's>` in the host's namespace: (rc, stdout, stderr)."""
        r = subprocess.run(self.argv(host, *args, "--config", self.config(host)), capture_output=True, text=True,
                           timeout=30, check=False)
        return r.returncode, r.stdout, r.stderr

    def wait_ready(self, host, timeout=15.0):
        """Until every path of the agent answers its probes (and the agent is alive)."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            proc = self.current(host)
            if proc.poll() is not None:
                raise AssertionError("agent on %s exited with %s:\n%s" % (host, proc.returncode, self.tail(host)))
            try:
                st = self.status(host)
                paths = [p for peer in st["peers"] for p in peer["paths"].values()]
                if paths and all(p["alive"] and p["received"] > 0 for p in paths):
                    return st
                last = st
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        raise AssertionError("agent on %s not ready in %.0f s: %s\n%s" % (host, timeout, last, self.tail(host)))

    def tail(self, host, lines=30):
        out = []
        for name, path in sorted(self.logs.items()):
            if name.startswith(host) and path.exists():
                out.append("--- %s\n%s" % (name, "".join(path.read_text().splitlines(True)[-lines:])))
        return "\n".join(out)

    def kill(self, host, sig=signal.SIGKILL):
        proc = self.current(host)
        if proc.poll() is None:
            os.kill(proc.pid, sig)
            proc.wait(timeout=10)

    def stop_all(self):
        for procs in self.procs.values():
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
        for procs in self.procs.values():
            for proc in procs:
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def deploy_lab(inventory_dir):
    """A fresh lab of the agent topology with a unique name, deployed; torn down by the caller."""
    lab = Lab(HERE / "fabric.yml", name="ag-%s" % uuid.uuid4().hex[:6])
    inventory = Path(inventory_dir) / "hosts.yml"
    lab.up(inventory=inventory)
    lab.inventory_path = inventory
    rc, out = run_playbook(inventory, HERE / "deploy.yml", "-e", "@%s" % (HERE / "lab_vars.yml"))
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
                    maps.set_plane_flags(index, layout.PLANE_UP)
            for peer_id in maps.peer_ids():
                st = maps.state.get(peer_id)
                st.active_plane, st.down_mask, st.learned_mask, st.changed_ns = 0, 0, 0, 0
                maps.state.put(peer_id, st)
    matrix = lab.ping_matrix()
    assert matrix.ok, matrix.format()


@pytest.fixture(scope="module")
def shared_lab(tmp_path_factory):
    """One deployed lab for the module's tests, unless EDGEFT_AGENT_LAB_PER_TEST=1.

    A deployment costs 25-60 s on a 2-core machine; one per test would take the
    suite past its time budget. Each test still gets fresh agent processes and
    the data path state of a fresh deployment (neutral_state).
    """
    if os.geteuid() != 0:
        pytest.skip("the agent lab tests need root (namespaces, tc, bpf)")
    if os.environ.get("EDGEFT_AGENT_LAB_PER_TEST") == "1":
        yield None
        return
    lab = deploy_lab(tmp_path_factory.mktemp("inventory"))
    try:
        yield lab
    finally:
        lab.down()


@pytest.fixture
def agent_lab(shared_lab, tmp_path):
    """(lab, agents): a deployed lab in a neutral state; agents not started yet,
    killed by PID (and their logs printed) at teardown."""
    lab = shared_lab or deploy_lab(tmp_path)
    agents = None
    try:
        neutral_state(lab)
        agents = Agents(lab, lab.inventory_path, tmp_path)
        yield lab, agents
    finally:
        try:
            if agents is not None:
                agents.stop_all()
                for host in HOSTS:
                    print(agents.tail(host, lines=60))
        finally:
            if shared_lab is None:
                lab.down()
