# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the bond module changed, per network namespace and bond:

<state_dir>/bond.json:

    {"version": 1, "namespaces": {"<dev>:<inode>": {"bond0": {
        "created": true,                       # this module created the bond
        "ports": {"fab0": {"up": true}},       # admin state before it was enslaved
        "addresses": ["198.18.1.11/16"]}}}}    # the addresses it manages on the bond
"""

from __future__ import annotations

import contextlib
import os

from ansible_collections.edgeft.failover.plugins.module_utils import atomicfile, jsonrecord
from ansible_collections.edgeft.failover.plugins.module_utils.bond.spec import OptionError

STATE_FILE = "bond.json"
LOCK_FILE = "bond.lock"
VERSION = 1


class BondRecord:
    def __init__(self, state_dir):
        if not state_dir or not os.path.isabs(str(state_dir)):
            raise OptionError("state_dir: %r must be an absolute path" % (state_dir,))
        if os.path.exists(state_dir) and not os.path.isdir(state_dir):
            raise OptionError("state_dir: %s exists and is not a directory" % state_dir)
        self.state_dir = state_dir
        self.path = os.path.join(state_dir, STATE_FILE)
        self.key = None
        self.bonds = {}

    def _load(self):
        return jsonrecord.read(self.path, VERSION, "bond record", OptionError)

    def entry(self, name) -> dict:
        return dict(self.bonds.get(name, {}))

    def save(self, name, entry) -> None:
        """Atomically replace one bond's entry (None drops it)."""
        data = self._load() or {"version": VERSION}
        bonds = data.setdefault("namespaces", {}).setdefault(self.key, {})
        if entry is None:
            bonds.pop(name, None)
        else:
            bonds[name] = entry
        if not bonds:
            data["namespaces"].pop(self.key)
        jsonrecord.write(self.state_dir, self.path, data)
        self.bonds = dict(bonds)

    @contextlib.contextmanager
    def locked(self, key, create=True):
        """Load this namespace's bonds under an exclusive lock; check mode (create=False)
        never creates state_dir."""
        self.key = key
        with atomicfile.locked(self.state_dir, LOCK_FILE, create) as held:
            self.bonds = self._load().get("namespaces", {}).get(key, {}) if held else {}
            yield self
