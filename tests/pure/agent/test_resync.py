"""The resync (agent.Agent.resync) works out paths and backup routes again only when a peer came,
went or changed an address: at 4,096 peers it runs every second, and a table whose peers only
changed their steering must cost a read and a compare. A real Agent; the maps are stood in for
by a table of views that keeps unchanged peers' views, as Steering.peers() does over the real
state map (tests/kernel/bpf/test_state_read.py)."""

from __future__ import annotations

from types import SimpleNamespace

from ansible_collections.edgeft.failover.plugins.module_utils.agent.agent import Agent
from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import Config

PLANES = [{"name": "a", "interface": "fab0", "ipv4": "198.18.1.11/16"},
          {"name": "b", "interface": "fab1", "ipv4": "198.19.1.11/16"}]


def view(n, learned=()):
    return {"v4": ["198.18.2.%d" % n, "198.19.2.%d" % n], "v6": [None, None], "down_planes": list(learned),
            "learned_planes": list(learned)}


class Table:
    """Steering's reads: the views as the test sets them, and the planes' flags."""

    def __init__(self, peers):
        self.table = dict(peers)

    def peers(self):
        return dict(self.table)

    def plane(self, _index):
        return SimpleNamespace(flags=0)


def resyncing_agent(peers):
    agent = Agent(Config({"planes": PLANES, "state_dir": None}), maps=None, planes=[{4: True}, {4: True}], log=None)
    agent.planes = {i: SimpleNamespace(index=i, name=p["name"], first_hop=None, flags=0) for i, p in enumerate(PLANES)}
    agent.steer = Table(peers)
    agent.routes_synced = 0

    def sync_routes():
        agent.routes_synced += 1

    agent.sync_routes = sync_routes
    agent.followed = []  # the resyncs that worked out the paths again
    follow = agent._follow_paths
    agent._follow_paths = lambda peers, now: (agent.followed.append(now), follow(peers, now))
    return agent


def test_paths_and_routes_follow_added_removed_and_readdressed_peers_only():
    agent = resyncing_agent({1: view(1), 2: view(2)})
    try:
        agent.resync(0)
        assert sorted(agent.paths) == [(1, 0), (1, 1), (2, 0), (2, 1)] and agent.routes_synced == 1
        first = dict(agent.paths)

        agent.resync(1)  # nothing changed
        agent.steer.table[2] = view(2, learned=[1])  # the data path learned: a new view, same addresses
        agent.resync(2)
        assert agent.followed == [0] and agent.routes_synced == 1
        assert agent.paths == first and agent.peers[2]["learned_planes"] == [1]

        agent.steer.table[3] = view(3)
        agent.resync(3)
        assert agent.followed == [0, 3] and agent.routes_synced == 2 and (3, 1) in agent.paths

        agent.steer.table[1] = dict(view(1), v4=["198.18.9.1", "198.19.2.1"])
        agent.resync(4)
        assert agent.routes_synced == 3 and agent.paths[(1, 0)].address == "198.18.9.1"
        assert agent.paths[(1, 1)] is first[(1, 1)]  # the unchanged plane keeps its path

        del agent.steer.table[2]
        agent.resync(5)
        assert agent.followed == [0, 3, 4, 5] and agent.routes_synced == 4 and sorted(agent.paths) == [(1, 0), (1, 1), (3, 0), (3, 1)]
    finally:
        agent.close()
