# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What multihome owns on a host: state_dir/multihome.json.

The kernel cannot say who added an address, a route or a rule, nor what a sysctl
was before we changed it, so this file does: exact-set semantics remove only
what is recorded here, and state=absent puts recorded sysctls, MTUs and link
states back. One file per state_dir (the lab gives every host its own).

    {"version": 1,
     "interfaces": {"fab0": {"addresses": ["198.18.1.11/16"], "mtu_before": 1500, "down_before": false}},
     "routes": [{family, table, dst, gateway, dev, scope, metric}],
     "rules": [{family, from, table, priority, dev}],            # dev: the plane NIC the rule serves
     "sysctls": {"net.ipv4.conf.fab0.rp_filter": "0"}}      # the value before edgeft set it
"""

from __future__ import annotations

import contextlib
import os

from ansible_collections.edgeft.failover.plugins.module_utils import constants, jsonrecord
from ansible_collections.edgeft.failover.plugins.module_utils.multihome.spec import OptionError

DEFAULT_STATE_DIR = constants.STATE_DIR
STATE_FILE = "multihome.json"
LOCK_FILE = "multihome.lock"
VERSION = 1
ROUTE_KEYS = ("family", "table", "dst", "gateway", "dev", "scope", "metric")
RULE_KEYS = ("family", "from", "table", "priority", "dev")


def empty() -> dict:
    return {"version": VERSION, "interfaces": {}, "routes": [], "rules": [], "sysctls": {}}


def route_entry(route) -> dict:
    return {k: route.get(k) for k in ROUTE_KEYS}


def rule_entry(rule) -> dict:
    return {k: rule.get(k) for k in RULE_KEYS}


def is_empty(data) -> bool:
    return not (data["interfaces"] or data["routes"] or data["rules"] or data["sysctls"])


class Record(jsonrecord.Record):
    FILE, LOCK, WHAT = STATE_FILE, LOCK_FILE, "multihome record"

    def __init__(self, state_dir):
        super().__init__(state_dir, OptionError)
        self.state_dir = os.path.normpath(state_dir)
        self.path = os.path.join(self.state_dir, STATE_FILE)

    def load(self) -> dict:
        data = self.read()
        if not data:
            return empty()
        out = empty()
        for key in ("interfaces", "sysctls"):
            out[key] = dict(data.get(key) or {})
        out["routes"] = [route_entry(r) for r in data.get("routes") or []]
        out["rules"] = [rule_entry(r) for r in data.get("rules") or []]
        return out

    def save(self, data) -> None:
        """Atomically replace the record; an empty record removes the file."""
        if is_empty(data):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            return
        self.write(data)

    @contextlib.contextmanager
    def locked(self, create=True):
        """Serialise runs that write the record (hosts sharing state_dir too)."""
        with super().locked(create):
            yield self
