# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What edgeft left on a host, read from the records its modules keep in state_dir (and the
pins and maps), so the uninstall removes exactly that and does nothing on a host edgeft never
touched. Reads only: it never creates state_dir nor a lock file.

- programs: the attach points of datapath.json (the role's record of what it gave
  ebpf_program) and both hooks of every NIC whose clsact ebpf_program.json says it created;
- the peer table (peer_table.json, per pin root): planes, peers, neighbour entries;
- multihome.json, backup_routes.json and bond.json (per network namespace): whether each holds
  anything, and which bonds edgeft created (bond.json's `created`);
- `steering`: why removing the data path now would move traffic - a plane drained or not up, a
  peer steered off a plane - so the uninstall can refuse before it changes anything.
"""

from __future__ import annotations

import os

from ansible_collections.edgeft.failover.plugins.module_utils import jsonrecord, netlink
from ansible_collections.edgeft.failover.plugins.module_utils.backup_routes.record import RouteRecord
from ansible_collections.edgeft.failover.plugins.module_utils.bond.record import BondRecord
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import DatapathMaps
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.host.records import PeerTableRecord
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.record import Record as MultihomeRecord
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.record import is_empty
from ansible_collections.edgeft.failover.plugins.module_utils.planes.drain_record import DrainRecord
from ansible_collections.edgeft.failover.plugins.module_utils.program.record import StateStore

DIRECTIONS = ("egress", "ingress")
PEERS_MAP = "edgeft_peers_v1"


class FootprintError(EdgeftError, ValueError):
    pass


def check_options(params) -> None:
    if os.geteuid() != 0:
        raise FootprintError("this module must run as root (it reads edgeft's records and pinned maps): use become: true")
    jsonrecord.check_state_dir(params.get("state_dir"), FootprintError)
    for option in ("pin_root", "datapath_config"):
        value = params.get(option)
        if value is not None and not os.path.isabs(str(value)):
            raise FootprintError("%s: %r must be an absolute path" % (option, value))


def attach_points(datapath, clsact) -> list:
    """[{interface, direction}] to detach: the recorded arguments' points, then both hooks of
    every NIC whose clsact edgeft created. Pure."""
    out = []
    for point in (datapath.get("ebpf_program") or {}).get("attach") or []:
        entry = {"interface": point["interface"], "direction": point["direction"]}
        for key in ("priority", "handle"):
            if point.get(key) is not None:
                entry[key] = point[key]
        out.append(entry)
    known = {(p["interface"], p["direction"]) for p in out}
    for interface in sorted(clsact):
        out += [{"interface": interface, "direction": d} for d in DIRECTIONS if (interface, d) not in known]
    return out


def steering_problems(planes, peers, plane_names, peer_names) -> list:
    """Why detaching now would move traffic. planes: [(index, ifindex, flags)], peers:
    [(id, down_mask)]. Pure."""
    def plane(index):
        return plane_names[index] if index < len(plane_names) else str(index)

    out = []
    for index, ifindex, flags in planes:
        if not ifindex:
            continue
        if flags & layout.PLANE_DRAINED:
            out.append("plane %s is drained: its traffic would go back onto it with the data path removed; undrain it "
                       "first (playbooks/plane_state.yml -e edgeft_plane_state=active)" % plane(index))
        elif not flags & layout.PLANE_UP:
            out.append("plane %s is down (no carrier, or judged down by the agent): its traffic is steered onto another "
                       "plane and would be lost with the data path removed; repair it first" % plane(index))
    for peer_id, down_mask in peers:
        avoided = [plane(i) for i in range(layout.PLANE_SLOTS) if down_mask & (1 << i)]
        if avoided:
            out.append("peer %s is steered off plane %s (a failover or a drain in progress): wait for its failback or "
                       "undrain it first" % (peer_names.get(peer_id, "#%d" % peer_id), "+".join(avoided)))
    return out


def _read_json(path):
    data = jsonrecord.load(path, FootprintError, "datapath_config")
    return data if isinstance(data, dict) else {}


def _pins(pin_root):
    try:
        return sorted(os.listdir(pin_root))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _maps_state(pin_root, record):
    """(steering problems, peers in the maps), read from the pinned maps."""
    plane_names = [p["name"] for p in record.planes]
    peer_names = {pid: name for name, pid in record.peer_ids.items()}
    try:
        with DatapathMaps.open_pinned(pin_root) as maps:
            planes = [(i, p.ifindex, p.flags) for i, p in ((i, maps.planes.get(i)) for i in range(layout.PLANE_SLOTS))]
            peers = [(pid, maps.state.get(pid).down_mask) for pid in maps.peer_ids()]
    except (DatapathError, OSError) as e:
        raise FootprintError("pin_root: the maps pinned under %s cannot be read (%s): remove the pins by hand if they "
                             "are not edgeft's current layout" % (pin_root, e)) from None
    return steering_problems(planes, peers, plane_names, peer_names), len(peers)


def footprint(params, check_mode=False):
    """The footprint_info module: (result, warnings)."""
    check_options(params)
    state_dir, pin_root = params["state_dir"], params["pin_root"]
    datapath_config = params.get("datapath_config") or os.path.join(state_dir, "datapath.json")
    netns = netlink.netns_id()
    program = StateStore(state_dir)
    clsact = {r["interface"] for r in program.load()["clsact"] if r.get("netns") == program.netns}
    datapath = _read_json(datapath_config)
    record = PeerTableRecord(state_dir, pin_root)
    pins = _pins(pin_root)
    steering, map_peers = _maps_state(pin_root, record) if PEERS_MAP in pins else ([], 0)
    multihome = MultihomeRecord(state_dir).load()
    backup = RouteRecord(state_dir, netns).read_entry()
    bonds = BondRecord(state_dir)
    bonds.key = netns
    bonds = bonds.read_entry()
    result = {
        "changed": False,
        "state_dir_exists": os.path.isdir(state_dir),
        "attach": attach_points(datapath, clsact),
        "pins": pins,
        "maps_pinned": PEERS_MAP in pins,
        "peer_table": {"planes": record.planes, "peers": sorted(record.peer_ids), "map_peers": map_peers,
                       "neighbors": ["%s dev %s" % n for n in sorted(record.neighbors)]},
        "steering": steering,
        "multihome": not is_empty(multihome),
        "backup_routes": bool(backup.get("routes") or backup.get("sysctls")),
        "bonds_created": sorted(name for name, entry in bonds.items() if entry.get("created")),
        "bonds_kept": sorted(name for name, entry in bonds.items() if not entry.get("created")),
        "peer_drains": bool(DrainRecord(state_dir, pin_root).read_entry()),
    }
    warnings = ["bond %s existed before edgeft managed it: it is kept as it is now" % name for name in result["bonds_kept"]]
    return result, warnings
