# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plane slots of the maps: which NIC each holds, and its UP/DRAINED/ROUTED flags."""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout


def configure_writes(maps, planes, routed=frozenset()) -> list:
    """Plane slot writes (index, ifindex, flags) that make the maps match planes.

    A plane gets its ifindex and UP when it is new or its NIC changed; a plane
    that is already configured keeps its flags: UP belongs to the agent (link
    and probe state) and DRAINED to plane_state, and a re-run must not undo
    either. ROUTED follows the declaration (`routed`: plane indexes). Slots of
    planes no longer declared are cleared.
    """
    writes = []
    for index in range(layout.PLANE_SLOTS):
        cur = maps.planes.get(index)
        if index < len(planes):
            ifindex = planes[index]["ifindex"]
            routed_flag = layout.PLANE_ROUTED if index in routed else 0
            if cur.ifindex != ifindex:
                writes.append((index, ifindex, layout.PLANE_UP | (cur.flags & layout.PLANE_DRAINED) | routed_flag))
            elif cur.flags & layout.PLANE_ROUTED != routed_flag:
                writes.append((index, ifindex, (cur.flags & ~layout.PLANE_ROUTED) | routed_flag))
        elif cur.ifindex or cur.flags:
            writes.append((index, 0, 0))
    return writes


def flags_view(flags: int) -> dict:
    return {"up": bool(flags & layout.PLANE_UP), "drained": bool(flags & layout.PLANE_DRAINED)}


def usable(plane) -> bool:
    """Configured, up and not drained: may carry steered traffic (edgeft_plane_ok)."""
    return bool(plane.ifindex) and (plane.flags & (layout.PLANE_UP | layout.PLANE_DRAINED)) == layout.PLANE_UP
