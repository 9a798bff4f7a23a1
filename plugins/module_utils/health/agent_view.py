# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The running agent's judgement, read from its /status (docs/agent.md), as problems.

The agent is a process of its own with its own layer: this reads what it serves over HTTP,
never its code, so the cores stay independent of it.
"""

from __future__ import annotations

import http.client
import json

from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError


def parse_endpoint(text) -> tuple:
    """(host, port) of `ADDRESS:PORT` (IPv6 with or without brackets), or OptionError naming agent_endpoint."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise OptionError("agent_endpoint: %r is not ADDRESS:PORT (the agent's metrics_listen, e.g. "
                          "127.0.0.1:9531)" % (text,))
    return host.strip("[]"), int(port)


def status_url(endpoint) -> str:
    host, port = endpoint
    return "http://%s:%d/status" % ("[%s]" % host if ":" in host else host, port)


def fetch_status(endpoint, timeout_s=2.0) -> dict:
    """The agent's /status; OSError when no agent answers, or answers with an error."""
    connection = http.client.HTTPConnection(*endpoint, timeout=timeout_s)
    try:
        connection.request("GET", "/status")
        answer = connection.getresponse()
        body = answer.read()
    except http.client.HTTPException as e:
        raise OSError("no valid HTTP answer (%s)" % (e.__class__.__name__,)) from None
    finally:
        connection.close()
    if answer.status != 200:
        raise OSError("HTTP %d %s" % (answer.status, answer.reason))
    return json.loads(body)


def problems(status: dict, planes, must_answer) -> list:
    """What the agent judges unhealthy: a plane of `planes` it judges down or suppresses, or a
    path to a peer of `must_answer` that is not up (peers deployed later are not judged)."""
    found = []
    seen = {p["name"]: p for p in status.get("planes", [])}
    for name in planes:
        plane = seen.get(name)
        if plane is None:
            found.append("agent: plane %s is not among the agent's planes" % name)
        elif not plane.get("judged_up"):
            found.append("agent: judges plane %s down (carrier %s)" % (name, plane.get("carrier")))
        elif plane.get("suppressed"):
            found.append("agent: plane %s flapped and is suppressed (penalty %s)" % (name, plane.get("penalty")))
    peers = {p["name"]: p for p in status.get("peers", [])}
    for name in sorted(must_answer):
        peer = peers.get(name)
        if peer is None:
            found.append("agent: has no paths to peer %s yet" % name)
            continue
        for plane in planes:
            path = peer.get("paths", {}).get(plane)
            if path is not None and path.get("state") != "up":
                found.append("agent: path to %s on plane %s is %s (%s probes missed)"
                             % (name, plane, path.get("state"), path.get("misses")))
    return found


def agent_problems(endpoint, planes, must_answer) -> tuple:
    """(problems, summary) of the agent behind `endpoint`; an agent that does not answer is one."""
    where = parse_endpoint(endpoint)
    try:
        status = fetch_status(where)
    except (OSError, ValueError) as e:
        return ["agent: no answer at %s (%s): is edgeft-agent running?" % (status_url(where), e)], {"answered": False}
    found = problems(status, planes, must_answer)
    agent = status.get("agent", {})
    return found, {"answered": True, "pid": agent.get("pid"), "uptime_ms": agent.get("uptime_ms"),
                   "session": agent.get("session")}
