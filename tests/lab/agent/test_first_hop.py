"""First-hop probes on a routed lab: the gateway (the rack's ToR) goes silent with its
links up; the agent sees its echo probes go unanswered and takes the whole plane down
within the detection time, then brings it back after the hold-down.

Only detection is asserted here: steering between routed planes (address translation)
is its own capability; on L2 planes the failover tests cover the traffic. The lab is the
routed agent tests' shared one (conftest.py: deployed once, reset to neutral before each test).
"""

from __future__ import annotations

import time

MS = 1000000
HOLD_DOWN_MS = 1000


def test_a_silent_gateway_takes_its_plane_down_and_back(routed_agent_lab):
    lab, agents = routed_agent_lab
    agents.start_all()
    planes = {p["name"]: p for p in agents.status("r1h1")["planes"]}
    assert planes["a"]["first_hop"]["address"] == "198.18.1.1" and planes["a"]["first_hop"]["alive"], planes["a"]
    assert planes["a"]["first_hop"]["received"] > 0

    fault = time.monotonic_ns()
    lab.silence("tor-r1-a")
    deadline = time.monotonic() + 2.0
    down = []
    while not down and time.monotonic() < deadline:
        down = agents.events("r1h1", "failover", fault)
        down = [e for e in down if e["scope"] == "plane" and e["plane"] == "a"]
        time.sleep(0.01)
    assert down and "first hop 198.18.1.1" in down[0]["reason"], agents.events("r1h1")
    detect_ms = (down[0]["t_ns"] - fault) / MS
    st = agents.status("r1h1")
    plane_a = [p for p in st["planes"] if p["name"] == "a"][0]
    assert not plane_a["up"] and plane_a["carrier"] and not plane_a["first_hop"]["alive"], plane_a

    time.sleep(0.5)
    repaired = time.monotonic_ns()
    lab.repair_all()
    deadline = time.monotonic() + 5.0
    back = []
    while not back and time.monotonic() < deadline:
        back = [e for e in agents.events("r1h1", "failback", repaired) if e["scope"] == "plane"]
        time.sleep(0.05)
    assert back, agents.events("r1h1")
    back_ms = (back[0]["t_ns"] - repaired) / MS
    print("\nsilent gateway tor-r1-a: plane a down %.1f ms after the fault call (%s); back %.0f ms after the repair"
          % (detect_ms, down[0]["reason"], back_ms))
    assert detect_ms <= 100.0
    assert HOLD_DOWN_MS <= back_ms <= HOLD_DOWN_MS + 500
    m = agents.metrics("r1h1")
    assert m[("edgeft_plane_first_hop_alive", frozenset({"plane": "a", "interface": "fab0", "gateway": "198.18.1.1"}.items()))] == 1
    assert [p["up"] for p in agents.status("r1h1")["planes"]] == [True, True]
