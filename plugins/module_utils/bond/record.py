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

from ansible_collections.edgeft.failover.plugins.module_utils import jsonrecord
from ansible_collections.edgeft.failover.plugins.module_utils.bond.spec import OptionError


class BondRecord(jsonrecord.Record):
    FILE, LOCK, WHAT, SECTION = "bond.json", "bond.lock", "bond record", "namespaces"

    def __init__(self, state_dir):
        super().__init__(state_dir, OptionError)
        self.bonds = {}

    def entry(self, name) -> dict:
        return dict(self.bonds.get(name, {}))

    def save(self, name, entry) -> None:
        """Atomically replace one bond's entry (None drops it)."""
        bonds = dict(self.read_entry())
        if entry is None:
            bonds.pop(name, None)
        else:
            bonds[name] = entry
        self.write_entry(bonds)
        self.bonds = bonds

    @contextlib.contextmanager
    def locked_namespace(self, key, create=True):
        """Load this namespace's bonds under an exclusive lock; check mode (create=False)
        never creates state_dir."""
        self.key = key
        with super().locked(create) as held:
            self.bonds = self.read_entry() if held else {}
            yield self
