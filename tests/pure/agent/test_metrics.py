"""/metrics in a number of series that does not grow with the fabric (agent/metrics.py).

The agent is benchmarks/metrics_scale.py's synthetic one: the agent's own Path and Judge objects,
the pinned maps replaced by dicts (no BPF in the pure tests; tests/lab/agent reads the real
agent's /metrics).
"""

from __future__ import annotations

import io
from contextlib import redirect_stdout

import yaml
from metrics_scale import synthetic_agent

from ansible_collections.edgeft.failover.plugins.module_utils import constants
from ansible_collections.edgeft.failover.plugins.module_utils.agent import cli, exposition, metrics
from ansible_collections.edgeft.failover.plugins.module_utils.agent.agent import Agent
from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import Config, ConfigError
from ansible_collections.edgeft.failover.plugins.module_utils.agent.path import LOSS_WINDOW
from repo import REPO


def scrape(agent):
    return exposition.parse(metrics.metrics(agent))


def labels(**kw):
    return frozenset(kw.items())


def peers_shown(m):
    return sorted({dict(key)["peer"] for name, key in m if name == "edgeft_path_up"})


def test_a_small_fabric_shows_every_peer_and_the_build():
    m = scrape(synthetic_agent(4, failed=1))
    assert peers_shown(m) == ["host0000", "host0001", "host0002", "host0003"]
    assert m[("edgeft_build_info", labels(version=constants.VERSION))] == 1
    assert m[("edgeft_path_up", labels(peer="host0000", plane="a"))] == 0
    assert m[("edgeft_plane_paths", labels(plane="a", interface="fab0", state="down"))] == 1
    assert m[("edgeft_plane_paths", labels(plane="a", interface="fab0", state="up"))] == 3
    assert m[("edgeft_plane_peers_down", labels(plane="a", interface="fab0"))] == 1
    assert m[("edgeft_plane_probes_sent_total", labels(plane="b", interface="fab1"))] == 4 * 500
    assert m[("edgeft_plane_path_probe_loss_max_ratio", labels(plane="a", interface="fab0"))] == 3 / LOSS_WINDOW


def test_a_healthy_large_fabric_exports_the_same_few_series_at_every_scrape():
    agent = synthetic_agent(1000)
    first, second = scrape(agent), scrape(agent)
    assert peers_shown(first) == [] and set(first) == set(second)
    assert len(first) < 100
    assert first[("edgeft_agent_peers", labels())] == 1000
    assert first[("edgeft_plane_paths", labels(plane="a", interface="fab0", state="up"))] == 1000


def test_a_large_fabric_names_its_abnormal_peers_worst_first_up_to_the_limit():
    agent = synthetic_agent(1000, failed=3)
    assert peers_shown(scrape(agent)) == ["host0000", "host0001", "host0002"]
    # A healthy path missing its last probe is abnormal too, but less than a failed-over one.
    agent.paths[(500, 1)].misses = 1
    agent.cfg.metrics_peers = 3
    m = scrape(agent)
    assert peers_shown(m) == ["host0000", "host0001", "host0002"]
    assert m[("edgeft_agent_peers_shown", labels())] == 3
    agent.cfg.metrics_peers = 4
    assert peers_shown(scrape(agent)) == ["host0000", "host0001", "host0002", "host0500"]


def test_series_stay_bounded_at_4096_peers_all_failed_over():
    m = scrape(synthetic_agent(4096, failed=4096))
    assert len(peers_shown(m)) == 10
    assert len(m) <= 500


def test_plane_counters_keep_what_a_removed_peer_counted():
    agent = synthetic_agent(4)
    agent.by_address = {}
    before = scrape(agent)[("edgeft_plane_probes_sent_total", labels(plane="a", interface="fab0"))]
    Agent._drop_path(agent, agent.paths[(3, 0)])
    del agent.peers[3]
    m = scrape(agent)
    assert m[("edgeft_plane_probes_sent_total", labels(plane="a", interface="fab0"))] == before
    assert m[("edgeft_plane_paths", labels(plane="a", interface="fab0", state="up"))] == 3


def test_probe_loss_is_counted_as_probes_enter_and_leave_the_window():
    path = synthetic_agent(1).paths[(0, 0)]
    path.outcomes.clear()
    path.lost = 0
    for i in range(3 * LOSS_WINDOW + 7):
        path.next_probe(i)
        if i % 4:  # every fourth probe unanswered
            path.answered = path.seq
        path.check(i)
    assert path.lost == list(path.outcomes).count(False)
    assert path.loss_ratio() == path.lost / LOSS_WINDOW


def test_agent_version_is_the_collections():
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert constants.VERSION == galaxy["version"]
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(["--version"]) == 0
    assert out.getvalue() == "edgeft-agent %s\n" % galaxy["version"]


def test_the_units_log_under_their_own_names():
    templates = REPO / "roles" / "ebpf_failover" / "templates"
    assert "SyslogIdentifier=edgeft-agent\n" in (templates / "edgeft-agent.service.j2").read_text()
    assert "SyslogIdentifier=edgeft-datapath\n" in (templates / "edgeft-datapath.service.j2").read_text()


def test_metrics_peers_is_a_bounded_setting():
    planes = [{"name": "a", "interface": "fab0"}, {"name": "b", "interface": "fab1"}]
    assert Config({"planes": planes}).metrics_peers == 10
    assert Config({"planes": planes, "metrics_peers": 0}).metrics_peers == 0
    for bad in (-1, 4097, 1.5, "10", True):
        try:
            Config({"planes": planes, "metrics_peers": bad})
        except ConfigError as e:
            assert str(e).startswith("metrics_peers: ")
        else:
            raise AssertionError("metrics_peers %r accepted" % (bad,))
