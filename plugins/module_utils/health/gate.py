# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A deployed host's health as a rollout gate judges it (module host_health).

Healthy means: every declared plane is configured in the pinned maps, up and not drained;
the peer table holds exactly the peers the inventory gives; check probes on every plane
are answered by every peer that must answer (the peers already deployed: a peer that has
no data path yet cannot answer); and, when the agent's endpoint is given, the agent
answers and judges every plane and every path to those peers up.

An unhealthy host is a result, not an error: `problems` says what, one line each, so the
caller can stop a rollout and name the host and why. Options that cannot be right are
errors naming the option. Changes nothing: check probes leave no trace in the data path.
"""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils import plane_check
from ansible_collections.edgeft.failover.plugins.module_utils.health.agent_view import agent_problems, parse_endpoint
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError, normalize_planes
from ansible_collections.edgeft.failover.plugins.module_utils.host.records import PeerTableRecord
from ansible_collections.edgeft.failover.plugins.module_utils.module_options import int_in_range
from ansible_collections.edgeft.failover.plugins.module_utils.planes.maps import maps_pinned, open_maps
from ansible_collections.edgeft.failover.plugins.module_utils.planes.slots import flags_view

MAX_SHOWN = 5  # names listed per problem; a fabric-wide fault names the count, not every peer


def options(params) -> dict:
    """The module's options checked and normalised; OptionError names the one at fault."""
    declared = params.get("planes")
    if not declared:  # as plane_check names the planes: the declaration, else what peer_table recorded
        declared = PeerTableRecord(params["state_dir"], params["pin_root"]).planes
    planes = normalize_planes(declared, option="planes")
    if not planes:
        raise OptionError("planes: give this host's planes (edgeft_planes); none are declared, and peer_table recorded "
                          "none under %s" % params["pin_root"])
    peers = list(params["peers"])
    must_answer = peers if params.get("must_answer") is None else list(params["must_answer"])
    unknown = sorted(set(must_answer) - set(peers))
    if unknown:
        raise OptionError("must_answer: %s not in peers; only peers of the table can answer check probes"
                          % ", ".join(unknown))
    if params.get("agent_endpoint"):
        parse_endpoint(params["agent_endpoint"])
    return {
        "pin_root": params["pin_root"],
        "state_dir": params["state_dir"],
        "planes": planes,
        "peers": peers,
        "must_answer": sorted(set(must_answer)),
        "agent_endpoint": params.get("agent_endpoint") or None,
        "count": int_in_range(params.get("count", 3), "count", 1, plane_check.MAX_COUNT, OptionError),
        "max_loss_percent": int_in_range(params.get("max_loss_percent", 0), "max_loss_percent", 0, 100, OptionError),
    }


def _listed(names) -> str:
    names = sorted(names)
    shown = ", ".join(names[:MAX_SHOWN])
    return shown + (" and %d more" % (len(names) - MAX_SHOWN) if len(names) > MAX_SHOWN else "")


def datapath_problems(opts) -> tuple:
    """(problems, planes view) of the pinned maps and the peer table record."""
    if not maps_pinned(opts["pin_root"]):
        return ["data path: no maps pinned under %s (the programs are not attached)" % opts["pin_root"]], []
    found, view = [], []
    with open_maps(opts["pin_root"]) as maps:
        record = PeerTableRecord(opts["state_dir"], opts["pin_root"])
        for index, plane in enumerate(opts["planes"]):
            slot = maps.planes.get(index)
            flags = flags_view(slot.flags)
            view.append(dict(name=plane["name"], interface=plane["interface"], configured=bool(slot.ifindex), **flags))
            if not slot.ifindex:
                found.append("data path: plane %s is not configured in the maps" % plane["name"])
            elif flags["drained"]:
                found.append("data path: plane %s is drained" % plane["name"])
            elif not flags["up"]:
                found.append("data path: plane %s is down" % plane["name"])
        ids = record.peer_ids
        in_maps = set(maps.peer_ids())
    missing = [p for p in opts["peers"] if p not in ids or ids[p] not in in_maps]
    extra = sorted(set(ids) - set(opts["peers"]))
    if missing:
        found.append("peer table: %d of %d peers missing: %s" % (len(missing), len(opts["peers"]), _listed(missing)))
    if extra:
        found.append("peer table: %d peers not in the inventory: %s" % (len(extra), _listed(extra)))
    return found, view


def check_problems(opts, warnings) -> tuple:
    """(problems, checks by plane): check probes on every plane to the peers that must answer."""
    found, checks = [], {}
    for plane in opts["planes"]:
        result, plane_warnings = plane_check.plane_check({
            "pin_root": opts["pin_root"], "state_dir": opts["state_dir"], "plane": plane["name"],
            "planes": opts["planes"], "peers": opts["must_answer"], "family": "auto", "count": opts["count"],
            "interval_ms": 20, "timeout_ms": 500, "max_loss_percent": opts["max_loss_percent"]})
        warnings.extend("plane %s: %s" % (plane["name"], w) for w in plane_warnings if not w.startswith("no peer to check"))
        checks[plane["name"]] = {"checked": result["checked"], "unhealthy_peers": result["unhealthy_peers"]}
        if result["unhealthy_peers"]:
            found.append("plane %s: check probes unanswered or lost by %d of %d peers: %s" % (
                plane["name"], len(result["unhealthy_peers"]), result["checked"], _listed(result["unhealthy_peers"])))
    return found, checks


def host_health(params):
    """The host_health module: returns (result, warnings); an unhealthy host is not an error."""
    opts = options(params)
    warnings = []
    found, planes = datapath_problems(opts)
    checks = {}
    if not found:  # probes need configured planes and a complete table; say what is missing first
        if opts["must_answer"]:
            more, checks = check_problems(opts, warnings)
            found.extend(more)
        else:
            warnings.append("no peer must answer yet (none is deployed): the planes were not probed")
    agent = None
    if opts["agent_endpoint"]:
        more, agent = agent_problems(opts["agent_endpoint"], [p["name"] for p in opts["planes"]], opts["must_answer"])
        found.extend(more)
    return {
        "changed": False,
        "healthy": not found,
        "problems": found,
        "planes": planes,
        "checks": checks,
        "agent": agent,
        "must_answer": opts["must_answer"],
    }, warnings
