# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What backup_routes installed, so that it removes only that.

<state_dir>/backup_routes.json, one entry per network namespace (the lab's
hosts may share a directory):

    {"version": 1, "namespaces": {"<dev>:<inode>": {
        "routes": [<spec.py route without "where">, ...],
        "sysctls": {"net.ipv4.conf.fab0.ignore_routes_with_linkdown": "0"}}}}

"sysctls" holds the value each sysctl had before this module set it, to put
back when no declared route needs it any more.
"""

from __future__ import annotations

import contextlib

from ansible_collections.edgeft.failover.plugins.module_utils import jsonrecord
from ansible_collections.edgeft.failover.plugins.module_utils.backup_routes.spec import OptionError


class RouteRecord(jsonrecord.Record):
    FILE, LOCK, WHAT, SECTION = "backup_routes.json", "backup_routes.lock", "backup_routes record", "namespaces"

    def __init__(self, state_dir, key):
        super().__init__(state_dir, OptionError, key)
        self.entry = {}

    @property
    def routes(self) -> list:
        return list(self.entry.get("routes", []))

    @property
    def sysctls(self) -> dict:
        return dict(self.entry.get("sysctls", {}))

    def save(self, routes, sysctls) -> None:
        """Atomically replace this namespace's entry; an empty entry is dropped."""
        entry = {"routes": sorted(routes, key=lambda r: (r["family"], r["dst"], r["metric"])), "sysctls": dict(sorted(sysctls.items()))}
        self.write_entry(entry if routes or sysctls else None)
        self.entry = entry

    @contextlib.contextmanager
    def locked(self, create=True):
        """Load this namespace's entry under an exclusive lock; check mode (create=False)
        never creates state_dir."""
        with super().locked(create) as held:
            self.entry = self.read_entry() if held else {}
            yield self
