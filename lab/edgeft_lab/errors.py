"""Exceptions for problems the user can fix; the CLI prints them as one line, no traceback."""

from __future__ import annotations


class LabError(Exception):
    """An expected operational problem (lab not up, unknown host, missing tool...)."""


class TopologyError(LabError):
    """A topology file is invalid. Raised before anything is created."""

    def __init__(self, source: str, key_path: str, reason: str) -> None:
        self.source = source
        self.key_path = key_path
        self.reason = reason
        where = f"{source}: {key_path}" if key_path else source
        super().__init__(f"{where}: {reason}")


class RefusedError(LabError):
    """Refused before anything was made: a bad option or a missing prerequisite (CLI exit 2)."""
