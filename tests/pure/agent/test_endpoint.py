"""The agent's HTTP endpoint answers every request with a well-formed response: a status line, a
Content-Length and exactly that many bytes of body (none for HEAD).

The answers are written to one end of a socketpair; the endpoint's own listening socket is
bound to an ephemeral port on 127.0.0.1 and never connected to.
"""

from __future__ import annotations

import re
import selectors
import socket

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.agent.endpoint import Endpoint

STATUS = b'{"planes": []}\n'
CASES = [
    ("blank", b"\r\n\r\n", b"405", True),
    ("bare-newlines", b"\n\n", b"405", True),
    ("post", b"POST /status HTTP/1.0\r\n\r\n", b"405", True),
    ("no-path", b"GET\r\n\r\n", b"405", True),
    ("unknown-path", b"GET /nope HTTP/1.0\r\n\r\n", b"404", True),
    ("status", b"GET /status HTTP/1.0\r\n\r\n", b"200", True),
    ("head", b"HEAD /status HTTP/1.0\r\n\r\n", b"200", False),
]


@pytest.fixture
def endpoint():
    selector = selectors.DefaultSelector()
    ep = Endpoint(("127.0.0.1", 0), selector, {"/status": lambda: ("application/json", STATUS)}, clock=lambda: 0)
    yield ep
    ep.close()
    selector.close()


@pytest.mark.parametrize("request_bytes,status,with_body", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_answer_has_a_body_of_its_announced_length(endpoint, request_bytes, status, with_body):
    server, client = socket.socketpair()
    with client, client.makefile("rb") as reader:
        endpoint._answer(server, request_bytes)  # an error is written at once, a page queued for a render
        endpoint.expire(0)  # end of the loop's turn: the render child writes the page and closes its end
        answer = reader.read()
    head, separator, body = answer.partition(b"\r\n\r\n")
    assert separator and head.startswith(b"HTTP/1.0 " + status + b" "), answer
    length = int(re.search(rb"\r\nContent-Length: (\d+)\r\n", head + b"\r\n").group(1))
    assert length > 0
    assert len(body) == (length if with_body else 0), answer
