"""The failover agent on a deployed lab: one process per host namespace (docs/agent.md).

The lab inventory sets `edgeft_agent_service: false` (no systemd per namespace), so the
role installs the agent's files and configuration per host and nothing runs it; tests and
benchmarks start it here. Only the PIDs started by an `Agents` object are ever signalled.

    rc, out = run_playbook(inventory, "playbooks/site.yml")
    agents = Agents(lab, inventory, log_dir)
    agents.start_all()
    agents.status("r1h1")["events"]
    agents.stop_all()
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from . import collection
from .errors import LabError
from .lab import Lab

REPO = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"  # targets run the agent with the system Python
METRICS_PORT = 9531  # the role's default metrics_listen, on each namespace's own loopback
METRICS_TIMEOUT = 5.0  # the agent's default spacing of /metrics renders (1 s), and the render


class AgentError(LabError):
    """An agent exited, did not answer, or answered with an error."""


def ansible_env() -> dict[str, str]:
    """The environment scripts/bootstrap.sh sets up, also for a caller that did not source it."""
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    env.setdefault("ANSIBLE_CONFIG", str(REPO / "ansible.cfg"))
    env.setdefault("ANSIBLE_COLLECTIONS_PATH", str(REPO / ".build" / "collections"))
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    return env


def run_playbook(inventory: Path | str, playbook: Path | str, *extra: str) -> tuple[int, str]:
    """(returncode, output) of ansible-playbook from the checkout."""
    proc = subprocess.run(["ansible-playbook", "-i", str(inventory), str(playbook), *extra], cwd=REPO,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False, env=ansible_env())
    return proc.returncode, proc.stdout + proc.stderr


def host_vars(inventory: Path | str, host: str) -> dict[str, Any]:
    """A host's variables in a lab inventory (bin/edgeft-lab inventory)."""
    with open(inventory) as f:
        return yaml.safe_load(f)["all"]["children"]["fabric"]["hosts"][host]


class Agents:
    """The agent processes of one lab, by host; only PIDs started here are ever signalled."""

    def __init__(self, lab: Lab, inventory: Path | str, log_dir: Path | str, hosts: list[str] | tuple[str, ...] | None = None,
                 realtime: bool = False):
        self.lab = lab
        # As the role's unit runs it (ebpf_failover_agent_realtime): SCHED_RR priority 1.
        self.realtime = realtime
        self.log_dir = Path(log_dir)
        self.hosts = tuple(hosts or [h.name for h in lab.plan.hosts])
        self.procs: dict[str, list[subprocess.Popen]] = {}
        self.logs: dict[str, Path] = {}
        self.hostvars = {h: host_vars(inventory, h) for h in self.hosts}

    def agent_dir(self, host: str) -> Path:
        """Where the role installed the agent (the inventory's edgeft_agent_dir)."""
        hv = self.hostvars[host]
        return Path(hv.get("edgeft_agent_dir") or Path(hv["edgeft_src_dir"]) / "agent")

    def config(self, host: str) -> str:
        hv = self.hostvars[host]
        return str(hv.get("edgeft_agent_config") or Path(hv["edgeft_state_dir"]) / "agent.json")

    def settings(self, host: str) -> dict[str, Any]:
        """The host's rendered agent configuration (agent.json)."""
        with open(self.config(host)) as f:
            return json.load(f)

    def argv(self, host: str, *extra: str) -> list[str]:
        rt = ["chrt", "--rr", "1"] if self.realtime else []
        return self.lab.exec_argv(host, [*rt, SYSTEM_PYTHON, str(self.agent_dir(host) / "edgeft-agent"), *extra])

    def start(self, host: str, *extra: str) -> subprocess.Popen:
        n = sum(1 for k in self.logs if k.startswith(host))
        log = self.log_dir / ("%s.%d.log" % (host, n))
        self.logs["%s.%d" % (host, n)] = log
        with open(log, "w") as out:
            # `ip netns exec` execs the agent: the PID is the agent's own.
            proc = subprocess.Popen(self.argv(host, "run", "--config", self.config(host), *extra),
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.setdefault(host, []).append(proc)
        return proc

    def current(self, host: str) -> subprocess.Popen:
        return self.procs[host][-1]

    def start_all(self, *extra: str) -> None:
        for host in self.hosts:
            self.start(host, *extra)
        for host in self.hosts:
            self.wait_ready(host)

    def get(self, host: str, path: str, timeout: float = 1.0) -> bytes:
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
        if not head.startswith(b"HTTP/1.0 200"):
            raise AgentError("agent on %s answered GET %s with %r" % (host, path, head[:200]))
        return body

    def status(self, host: str, timeout: float = 1.0) -> dict[str, Any]:
        return json.loads(self.get(host, "/status", timeout))

    def events(self, host: str, kind: str | None = None, since_ns: int = 0) -> list[dict[str, Any]]:
        """The agent's recent state changes (kind "failover", "failback"), at or after since_ns (CLOCK_MONOTONIC)."""
        return [e for e in self.status(host)["events"] if (kind is None or e["kind"] == kind) and e["t_ns"] >= since_ns]

    def metrics(self, host: str) -> dict[tuple[str, frozenset], float]:
        """{(name, frozenset(labels)): value} of GET /metrics. A scrape within metrics_min_interval_ms
        (1 s by default) of the last one waits for the next render: hence the longer timeout."""
        text = self.get(host, "/metrics", METRICS_TIMEOUT).decode()
        return _collection_module("plugins.module_utils.agent.exposition").parse(text)

    def cli(self, host: str, *args: str) -> tuple[int, str, str]:
        """`edgeft-agent <args> --config <host's>` in the host's namespace: (rc, stdout, stderr)."""
        r = subprocess.run(self.argv(host, *args, "--config", self.config(host)), capture_output=True, text=True,
                           timeout=30, check=False)
        return r.returncode, r.stdout, r.stderr

    def check_alive(self, host: str) -> None:
        """AgentError (with the end of its log) if the host's agent has exited."""
        proc = self.current(host)
        if proc.poll() is not None:
            raise AgentError("agent on %s exited with %s:\n%s" % (host, proc.returncode, self.tail(host)))

    def wait_ready(self, host: str, timeout: float = 15.0) -> dict[str, Any]:
        """Until every path of the agent answers its probes (and the agent is alive)."""
        return self._wait(host, ready, "ready", timeout)

    def wait_judged_up(self, timeout: float = 30.0) -> dict[str, dict[str, Any]]:
        """Until every agent judges every plane and path up: after a repair this takes the
        hold-down, longer while flap dampening suppresses a failback."""
        deadline = time.monotonic() + timeout
        return {host: self._wait(host, judged_up, "back up", deadline - time.monotonic()) for host in self.hosts}

    def _wait(self, host: str, condition: Any, what: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        last = None
        while True:  # at least one look, however short the timeout
            self.check_alive(host)
            try:
                st = self.status(host)
                if condition(st):
                    return st
                last = st
            except (OSError, ValueError):
                pass
            if time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        raise AgentError("agent on %s not %s in %.0f s: %s\n%s" % (host, what, timeout, last, self.tail(host)))

    def tail(self, host: str, lines: int = 30) -> str:
        out = []
        for name, path in sorted(self.logs.items()):
            if name.startswith(host) and path.exists():
                out.append("--- %s\n%s" % (name, "".join(path.read_text().splitlines(True)[-lines:])))
        return "\n".join(out)

    def kill(self, host: str, sig: int = signal.SIGKILL) -> None:
        proc = self.current(host)
        if proc.poll() is None:
            os.kill(proc.pid, sig)
            proc.wait(timeout=10)

    def stop_all(self) -> None:
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


def _paths(st: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for peer in st["peers"] for p in peer["paths"].values()]


def ready(st: dict[str, Any]) -> bool:
    """Every path of this agent has answered a probe and is alive."""
    paths = _paths(st)
    return bool(paths) and all(p["alive"] and p["received"] > 0 for p in paths)


def judged_up(st: dict[str, Any]) -> bool:
    """The agent's own judgement: every plane up with carrier, every path alive and judged up."""
    return (
        ready(st)
        and all(p["carrier"] and p["up"] and p["judged_up"] for p in st["planes"])
        and all(p["state"] == "up" for p in _paths(st))
    )


def steered(st: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Peers the data path keeps off a plane (judged or learned), by name: {active_plane, down_planes, learned_planes}."""
    return {peer["name"]: {k: peer[k] for k in ("active_plane", "down_planes", "learned_planes")}
            for peer in st["peers"] if peer["down_planes"]}


def settled(st: dict[str, Any]) -> bool:
    """Nothing failed over: judged up, and the data path sends every peer's traffic on its first plane."""
    first = st["planes"][0]["name"] if st["planes"] else None
    return judged_up(st) and not steered(st) and all(peer["active_plane"] == first for peer in st["peers"])


def clear_learned(lab: Lab, hosts: Iterable[str]) -> dict[str, dict[int, list[int]]]:
    """Clear every learned down bit in the hosts' maps, as an unlearning packet would; {host: {peer id: planes}}.

    Judged down bits (the agent's) stay. For a lab whose hosts learned each other's
    plane down and so never send natively on it again, which would unlearn it.
    """
    maps_module = _collection_module("plugins.module_utils.datapath.maps")
    cleared: dict[str, dict[int, list[int]]] = {}
    for host in hosts:
        with maps_module.DatapathMaps.open_pinned(str(lab.pin_root(host))) as maps:
            for peer_id in maps.peer_ids():
                learned = maps.get_peer(peer_id)["learned_planes"]
                for plane in learned:
                    maps.clear_down(peer_id, plane)
                if learned:
                    cleared.setdefault(host, {})[peer_id] = learned
    return cleared


def _collection_module(name: str) -> Any:
    """edgeft.failover's `name` (e.g. plugins.module_utils.agent.exposition)."""
    return collection.module(name, "reading the agents' metrics")
