"""/metrics and /status are rendered off the agent's loop (agent/forkrender.py): the loop hands a
complete request to a forked child, which renders from its snapshot of the agent and answers.

What is asserted is behaviour, not timing (benchmarks/probe_jitter.py measures the timing): an
answer is what the renderers return, the snapshot is the agent as of the handover, and clients
that send nothing or never read do not stop the loop from sending its probes. Each test has a
bound on loop turns only so that a broken endpoint fails instead of hanging.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import time

import pytest
from metrics_scale import synthetic_agent

from ansible_collections.edgeft.failover.plugins.module_utils.agent import exposition, forkrender, metrics, report
from ansible_collections.edgeft.failover.plugins.module_utils.agent.agent import Agent
from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import Config
from ansible_collections.edgeft.failover.plugins.module_utils.agent.endpoint import Endpoint

MAX_TURNS = 100000  # a hang guard, not a timing assertion
REQUEST = "GET %s HTTP/1.0\r\n\r\n"


def pump(selector, endpoint, until, clock=time.monotonic_ns):
    """Turn a loop of the endpoint alone until until() holds."""
    for _turn in range(MAX_TURNS):
        if until():
            return
        for key, _mask in selector.select(0.001):
            key.data(key.fileobj)
        endpoint.expire(clock())
    raise AssertionError("the endpoint never got there")


def ask(endpoint, path):
    client = socket.create_connection(endpoint.sock.getsockname()[:2])
    client.sendall((REQUEST % path).encode())
    return client


def answer(client):
    """(status line, headers, body) of the whole answer; the connection must end with it."""
    client.settimeout(60)  # a hang guard
    data = b"".join(iter(lambda: client.recv(1 << 16), b""))
    client.close()
    head, _sep, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert int(headers["Content-Length"]) == len(body)
    return lines[0], headers, body


@pytest.fixture
def served():
    """An endpoint of a 1,000-peer agent (10 failed over) and its selector."""
    agent = synthetic_agent(1000, failed=10)
    selector = selectors.DefaultSelector()
    routes = {"/metrics": lambda: (exposition.CONTENT_TYPE, metrics.metrics(agent).encode())}
    endpoint = Endpoint(("127.0.0.1", 0), selector, routes, clock=time.monotonic_ns)
    yield agent, selector, endpoint
    endpoint.close()
    selector.close()


def handed_over(endpoint):
    return lambda: endpoint.renders.busy and not endpoint.waiting


def test_a_scrape_answers_exactly_what_the_loop_rendered_before(served):
    agent, selector, endpoint = served
    client = ask(endpoint, "/metrics")
    pump(selector, endpoint, handed_over(endpoint))
    status, headers, body = answer(client)
    assert status == "HTTP/1.0 200 OK"
    assert headers["Content-Type"] == exposition.CONTENT_TYPE
    assert body == metrics.metrics(agent).encode()  # the synthetic agent's clock stands still
    assert len(exposition.parse(body.decode())) == 76 + 29 * 10


def test_the_answer_is_the_agent_as_of_the_handover(served):
    agent, selector, endpoint = served
    before = metrics.metrics(agent).encode()
    client = ask(endpoint, "/metrics")
    pump(selector, endpoint, handed_over(endpoint))
    # The loop goes on changing the agent while the child renders: none of it may show, and
    # no half of it (every per-plane sum is over the paths as they were).
    agent.totals["failovers"] += 100
    for path in agent.paths.values():
        path.sent += 7
    agent.paths.clear()
    assert answer(client)[2] == before


def test_requests_that_come_during_a_render_wait_and_share_the_next_one(served, monkeypatch):
    monkeypatch.setattr(forkrender, "SEND_TIMEOUT_S", 600.0)  # the child waits for the reader however slow this machine
    agent, selector, endpoint = served
    big = b"x" * (16 << 20)  # far more than the socket buffers hold: the first child waits for its reader
    endpoint.routes["/big"] = lambda: ("text/plain", big)
    stalled = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(endpoint.sock.getsockname()[:2])
    stalled.sendall((REQUEST % "/big").encode())
    pump(selector, endpoint, handed_over(endpoint))
    others = [ask(endpoint, "/metrics") for _client in range(3)]
    pump(selector, endpoint, lambda: len(endpoint.waiting) == 3)
    assert answer(stalled)[2] == big
    pump(selector, endpoint, lambda: endpoint.renders.handed == 4)
    assert endpoint.renders.forks == 2
    expected = metrics.metrics(agent).encode()
    for client in others:
        assert answer(client)[2] == expected


def test_metrics_renders_are_spaced_and_a_request_in_between_waits_for_the_next(served):
    """With a spacing for /metrics (the agent's metrics_min_interval_ms), a scrape that comes
    sooner after the last render waits until the spacing has passed, then gets a fresh render;
    /status, which has none, is rendered at once. The clock is the test's: no timing is asserted."""
    agent, selector, endpoint = served
    endpoint.routes["/status"] = lambda: ("application/json", b"{}")
    endpoint.spacing["/metrics"] = 1000 * 1000000
    now = [5 * 10 ** 9]
    first = ask(endpoint, "/metrics")
    pump(selector, endpoint, handed_over(endpoint), clock=lambda: now[0])
    assert answer(first)[0] == "HTTP/1.0 200 OK"
    pump(selector, endpoint, endpoint.renders.reap, clock=lambda: now[0])
    assert endpoint.next_due() is None  # nothing waits
    agent.totals["failovers"] += 1  # what the next render must show
    second, status = ask(endpoint, "/metrics"), ask(endpoint, "/status")
    pump(selector, endpoint, lambda: endpoint.renders.handed == 2 and [w[2] for w in endpoint.waiting] == ["/metrics"],
         clock=lambda: now[0])
    assert answer(status)[2] == b"{}"  # not held back by the /metrics spacing
    pump(selector, endpoint, endpoint.renders.reap, clock=lambda: now[0])
    assert endpoint.next_due() == now[0] + 1000 * 1000000  # the loop wakes up for it, probes or not
    now[0] += 999 * 1000000
    for _turn in range(100):
        endpoint.expire(now[0])
    assert [w[2] for w in endpoint.waiting] == ["/metrics"] and endpoint.renders.forks == 2
    now[0] += 1000000
    pump(selector, endpoint, handed_over(endpoint), clock=lambda: now[0])
    assert endpoint.renders.forks == 3
    assert answer(second)[2] == metrics.metrics(agent).encode()


def test_the_agent_spaces_metrics_renders_as_configured():
    planes = [{"name": "a", "interface": "fab0"}]
    assert Config({"planes": planes}).metrics_min_interval_ms == 1000
    assert Config({"planes": planes, "metrics_min_interval_ms": 0}).metrics_min_interval_ms == 0
    for bad, message in ((-1, "must be at least 0"), (60001, "must be at most 60000"), ("1000", "expected an integer")):
        with pytest.raises(ValueError, match="^metrics_min_interval_ms: " + message):
            Config({"planes": planes, "metrics_min_interval_ms": bad})
    agent = Agent(Config({"planes": planes, "state_dir": None, "metrics_min_interval_ms": 250}), maps=None, planes=[], log=None)
    try:
        agent.endpoint = agent.open_endpoint(("127.0.0.1", 0))
        assert agent.endpoint.spacing == {"/metrics": 250 * 1000000}
    finally:
        agent.close()


def quiet_agent():
    """A real Agent with no planes and no peers, its loop's probes stood in for by a timer that
    sends one UDP datagram per turn to `receiver`."""
    cfg = Config({"planes": [{"name": "a", "interface": "fab0"}], "state_dir": None})
    agent = Agent(cfg, maps=None, planes=[], log=None)
    agent.endpoint = agent.open_endpoint(("127.0.0.1", 0))
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.setblocking(False)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def probe(now):
        sender.sendto(b"probe", receiver.getsockname())
        agent.wheel.schedule(now + agent.wheel.tick_ns, probe)

    agent.wheel.schedule(agent.clock(), probe)
    return agent, receiver, sender


def received(sock):
    n = 0
    while True:
        try:
            sock.recv(64)
        except BlockingIOError:
            return n
        n += 1


def test_status_is_the_agents_with_its_own_pid():
    agent, receiver, sender = quiet_agent()
    with receiver, sender:
        try:
            client = ask(agent.endpoint, "/status")
            for _turn in range(MAX_TURNS):
                if agent.endpoint.renders.busy and not agent.endpoint.waiting:
                    break
                agent.turn()
            doc = json.loads(answer(client)[2])
        finally:
            agent.close()
    mine = report.status(agent)
    assert doc["agent"]["pid"] == os.getpid() == mine["agent"]["pid"]
    for volatile in ("now_ns", "uptime_ms"):  # the child's clock ran on a little
        doc["agent"].pop(volatile)
        mine["agent"].pop(volatile)
    assert doc == json.loads(json.dumps(mine, sort_keys=True))


def test_clients_that_send_nothing_or_never_read_do_not_stop_the_probes(monkeypatch):
    monkeypatch.setattr(forkrender, "SEND_TIMEOUT_S", 600.0)  # the child waits for the reader however slow this machine
    agent, receiver, sender = quiet_agent()
    big = b"x" * (16 << 20)  # far more than the socket buffers hold
    agent.endpoint.routes["/big"] = lambda: ("text/plain", big)
    with receiver, sender:
        try:
            silent = socket.create_connection(agent.endpoint.sock.getsockname()[:2])  # connects, sends nothing
            stalled = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.connect(agent.endpoint.sock.getsockname()[:2])
            stalled.sendall((REQUEST % "/big").encode())  # ... and reads nothing for now
            probes = 0
            for _turn in range(MAX_TURNS):
                agent.turn()
                if agent.endpoint.renders.busy:
                    probes += received(receiver)
                if probes >= 50:
                    break
            assert probes >= 50, "the loop stopped sending while a client did not read"
            assert agent.endpoint.renders.busy  # the child is still writing to the reader that does not read
            status, _headers, body = answer(stalled)
            assert status == "HTTP/1.0 200 OK" and body == big  # late, but whole
            silent.close()
        finally:
            agent.close()
