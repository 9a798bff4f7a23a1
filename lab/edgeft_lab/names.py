"""The lab's node names, derived from rack and host numbers and plane names.

Below both topology.py (which checks that generated names fit an interface name) and plan.py
(which derives the whole fabric from a topology).
"""

from __future__ import annotations


def host_name(rack: int, host: int) -> str:
    return f"r{rack}h{host}"


def tor_name(rack: int, plane: str) -> str:
    return f"tor-r{rack}-{plane}"


def spine_name(plane: str) -> str:
    return f"spine-{plane}"


def flat_switch_name(plane: str) -> str:
    return f"sw-{plane}"


def switch_names(topology, plane: str) -> list[str]:
    """The switches of a plane, for a topology (topology.py's Topology: kind and racks)."""
    if topology.kind == "flat":
        return [flat_switch_name(plane)]
    return [tor_name(r, plane) for r in range(1, topology.racks + 1)] + [spine_name(plane)]
