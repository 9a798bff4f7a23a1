"""What the rollout gate reads from the agent's /status: the problems it names, and the
endpoint it asks. The /status documents are shaped as plugins/module_utils/agent/report.py
writes them (a live agent's /status is judged in the VM scenario, where the agent runs as
its unit)."""

from __future__ import annotations

import socket
import threading

import pytest
from ansible_collections.edgeft.failover.plugins.module_utils.health import agent_view
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError


def status(planes=None, peers=None):
    planes = planes or [{"name": "a", "judged_up": True, "suppressed": False, "carrier": True},
                        {"name": "b", "judged_up": True, "suppressed": False, "carrier": True}]
    peers = peers if peers is not None else [
        {"name": "r1h2", "paths": {"a": {"state": "up", "misses": 0}, "b": {"state": "up", "misses": 0}}},
        {"name": "r2h1", "paths": {"a": {"state": "up", "misses": 0}, "b": {"state": "down", "misses": 7}}},
    ]
    return {"agent": {"pid": 1}, "planes": planes, "peers": peers}


def test_a_healthy_agent_has_no_problem_for_the_peers_that_must_answer():
    assert agent_view.problems(status(), ["a", "b"], ["r1h2"]) == []


def test_a_path_down_to_a_peer_that_must_answer_is_a_problem_naming_peer_and_plane():
    assert agent_view.problems(status(), ["a", "b"], ["r1h2", "r2h1"]) == [
        "agent: path to r2h1 on plane b is down (7 probes missed)"]


def test_planes_judged_down_suppressed_or_unknown_are_problems():
    planes = [{"name": "a", "judged_up": False, "carrier": False},
              {"name": "b", "judged_up": True, "suppressed": True, "penalty": 2500}]
    found = agent_view.problems(status(planes=planes, peers=[]), ["a", "b", "c"], [])
    assert found == ["agent: judges plane a down (carrier False)",
                     "agent: plane b flapped and is suppressed (penalty 2500)",
                     "agent: plane c is not among the agent's planes"]


def test_a_peer_the_agent_does_not_know_yet_is_a_problem():
    assert agent_view.problems(status(peers=[]), ["a"], ["r1h2"]) == ["agent: has no paths to peer r1h2 yet"]


@pytest.mark.parametrize("endpoint, where, url", [
    ("127.0.0.1:9531", ("127.0.0.1", 9531), "http://127.0.0.1:9531/status"),
    ("::1:9531", ("::1", 9531), "http://[::1]:9531/status"),
    ("[::1]:9531", ("::1", 9531), "http://[::1]:9531/status"),
])
def test_the_endpoint_is_the_agents_metrics_listen(endpoint, where, url):
    assert agent_view.parse_endpoint(endpoint) == where
    assert agent_view.status_url(where) == url


@pytest.mark.parametrize("endpoint", ["9531", "localhost", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:70000", ":9531"])
def test_a_bad_endpoint_is_refused_naming_the_option(endpoint):
    with pytest.raises(OptionError, match="agent_endpoint"):
        agent_view.parse_endpoint(endpoint)


def test_no_agent_answering_is_a_problem_not_an_error():
    # A listener of the test's own that closes every connection unanswered, as a dying agent would.
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]

        def close_unanswered():
            server.accept()[0].close()

        closer = threading.Thread(target=close_unanswered, daemon=True)
        closer.start()
        found, summary = agent_view.agent_problems("127.0.0.1:%d" % port, ["a"], [])
        closer.join(5)
    assert summary == {"answered": False}
    assert len(found) == 1 and found[0].startswith("agent: no answer at http://127.0.0.1:%d/status" % port)
