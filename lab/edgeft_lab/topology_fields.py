"""The topology file's field checks, each naming the file and key path it rejects, and the
strict YAML loader (a duplicate key is an error, not a silent override)."""

from __future__ import annotations

import re
from typing import Any

import yaml

from .errors import TopologyError

IFNAME_MAX = 15  # IFNAMSIZ - 1
IFNAME_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


def integer(source: str, where: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TopologyError(source, where, f"must be an integer, not {value!r}")
    if not low <= value <= high:
        raise TopologyError(source, where, f"must be between {low} and {high}, not {value}")
    return value


def check_keys(source: str, where: str, doc: dict, allowed: set[str], required: tuple[str, ...]) -> None:
    prefix = f"{where}." if where else ""
    for key in doc:
        if key not in allowed:
            raise TopologyError(
                source, f"{prefix}{key}", f"unknown key (allowed: {', '.join(sorted(allowed))})"
            )
    for key in required:
        if key not in doc:
            raise TopologyError(source, f"{prefix}{key}", "required key is missing")


def check_ifname(source: str, where: str, name: Any) -> None:
    if not isinstance(name, str) or not name:
        raise TopologyError(source, where, "must be an interface name")
    if len(name) > IFNAME_MAX:
        raise TopologyError(
            source, where, f"interface name {name!r} is {len(name)} characters; Linux allows at most {IFNAME_MAX}"
        )
    if not IFNAME_RE.match(name) or name in (".", "..", "lo"):
        raise TopologyError(source, where, f"{name!r} is not a usable interface name")


class DuplicateKey(Exception):
    def __init__(self, key: str, line: int) -> None:
        super().__init__(key)
        self.key = key
        self.line = line


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys instead of silently keeping the last."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:  # type: ignore[override]
        seen: set[Any] = set()
        for key_node, _value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise DuplicateKey(str(key), key_node.start_mark.line + 1)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)
