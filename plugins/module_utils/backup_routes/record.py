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
import os

from ansible_collections.edgeft.failover.plugins.module_utils import atomicfile, jsonrecord
from ansible_collections.edgeft.failover.plugins.module_utils.backup_routes.spec import OptionError

STATE_FILE = "backup_routes.json"
LOCK_FILE = "backup_routes.lock"
VERSION = 1


class RouteRecord:
    def __init__(self, state_dir, key):
        if not state_dir or not os.path.isabs(str(state_dir)):
            raise OptionError("state_dir: %r must be an absolute path" % (state_dir,))
        if os.path.exists(state_dir) and not os.path.isdir(state_dir):
            raise OptionError("state_dir: %s exists and is not a directory" % state_dir)
        self.state_dir = state_dir
        self.path = os.path.join(state_dir, STATE_FILE)
        self.key = key
        self.entry = {}

    def _load(self):
        return jsonrecord.read(self.path, VERSION, "backup_routes record", OptionError)

    @property
    def routes(self) -> list:
        return list(self.entry.get("routes", []))

    @property
    def sysctls(self) -> dict:
        return dict(self.entry.get("sysctls", {}))

    def save(self, routes, sysctls) -> None:
        """Atomically replace this namespace's entry; an empty entry is dropped."""
        data = self._load() or {"version": VERSION}
        spaces = data.setdefault("namespaces", {})
        entry = {"routes": sorted(routes, key=lambda r: (r["family"], r["dst"], r["metric"])), "sysctls": dict(sorted(sysctls.items()))}
        if routes or sysctls:
            spaces[self.key] = entry
        else:
            spaces.pop(self.key, None)
        jsonrecord.write(self.state_dir, self.path, data)
        self.entry = entry

    @contextlib.contextmanager
    def locked(self, create=True):
        """Load this namespace's entry under an exclusive lock; check mode (create=False)
        never creates state_dir."""
        with atomicfile.locked(self.state_dir, LOCK_FILE, create) as held:
            self.entry = self._load().get("namespaces", {}).get(self.key, {}) if held else {}
            yield self
