# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent's backup and held routes (fabric/routes.py): a part of Agent (agent.py).

Backup routes follow the peer table; held routes follow the agent's judgements: a plane
judged down or drained, or one peer's path failed over. Works on the agent's state
(cfg, planes, paths, peers, log).
"""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import iproute, layout
from ansible_collections.edgeft.failover.plugins.module_utils.fabric import routes


class RouteKeeper:
    def sync_routes(self) -> None:
        """Make the backup and held tables (routes.py) match the peers and our plane judgements."""
        br = self.cfg.backup_routes
        try:
            added_rules = routes.ensure_rules(br["table"], br["priority"])
            added_rules += ["ignore_routes_with_linkdown " + c for c in routes.ignore_linkdown(
                [p["interface"] for p in self.plane_specs])]
            prefixes = {(p["index"], f): net for p in self.plane_specs for f, net in p["prefixes"].items()}
            routed = {s.index for s in self.planes.values() if s.flags & layout.PLANE_ROUTED}
            self.route_want = routes.desired(self.peers, self.plane_specs, prefixes, routed)
            added, removed, errors = routes.reconcile(br["table"], self.route_want)
            # A drained plane's peer addresses are held too: plane_state put them there at the drain
            # (planes/drain_routes.py) and takes them out at the undrain. So are those of failed paths.
            failed = self._failed_path_addresses()
            held = {k: v for k, v in self.route_want.items() if self._held(k, v[3], failed)}
            held_added, held_removed, held_errors = routes.reconcile(br["table"] + 1, held)
            errors += held_errors
        except iproute.IpCommandError as e:
            added_rules, added, removed, held_added, held_removed, errors = [], [], [], [], [], [str(e)]
        if added_rules or added or removed or held_added or held_removed:
            self.log.info("backup routes (table %d): %s%d added, %d removed; held (table %d): %d added, %d removed",
                          br["table"], "rules added: %s; " % ", ".join(added_rules) if added_rules else "",
                          len(added), len(removed), br["table"] + 1, len(held_added), len(held_removed))
        self._route_errors(errors)

    def keep_local_addresses(self) -> None:
        """Our IPv6 address of each plane without carrier stays local (routes.keep_local): steered
        traffic to it arrives on another plane while its NIC is down."""
        want = {s.spec[6] for s in self.planes.values() if not s.carrier and s.spec.get(6)}
        try:
            added, removed, errors = routes.keep_local(want)
        except (OSError, iproute.IpCommandError) as e:
            added, removed, errors = [], [], [str(e)]
        if added or removed:
            self.log.info("local through lo while their NIC has no carrier: %s%s", "+" + ", +".join(added) if added else "",
                          (" " if added else "") + "-" + ", -".join(removed) if removed else "")
        if errors:
            self.log.warning("keeping IPv6 addresses of a NIC without carrier local failed: %s", errors[0])

    def _path_addresses(self, path) -> set:
        """(family, address) of the path's peer on the path's plane (both families)."""
        peer = self.peers.get(path.peer_id)
        if peer is None:
            return set()
        return {(family, peer[key][path.plane]) for family, key in ((4, "v4"), (6, "v6"))
                if path.plane < len(peer[key]) and peer[key][path.plane]}

    def _failed_path_addresses(self) -> set:
        """(family, address) of each peer address on a plane whose path to that peer is failed over."""
        return set().union(*(self._path_addresses(path) for path in self.paths.values() if not path.judge.up))

    def _held(self, key, native: int, failed=None) -> bool:
        """Whether the held table routes this peer address (its plane down or drained, or its path failed)."""
        plane = self.planes[native]
        if not plane.judge.up or plane.flags & layout.PLANE_DRAINED:
            return True
        return key in (self._failed_path_addresses() if failed is None else failed)

    def hold_routes(self, plane: int, held: bool) -> None:
        """Put (or take) the peers' addresses on plane into the held table: one `ip` run.
        Taking them out keeps the addresses that are still held for another reason."""
        self._hold_routes({key: entry for key, entry in self.route_want.items() if entry[3] == plane}, held)

    def hold_path_routes(self, path, held: bool) -> None:
        """Put (or take) one peer's addresses on the path's plane into the held table.

        A path fails over while its plane's link stays up (a silent switch): the data path
        steers the packets, but the kernel still resolves the peer's address on the plane
        first, and once that neighbour entry expires (tens of seconds) and its probes go
        unanswered, it drops every packet before tc sees it. The held route sends them
        through the other plane's NIC, whose neighbour resolves."""
        # The path's own entries, looked up: a dead peer's path fails over at every host that
        # probes it, and a walk of every peer's routes each time made that grow with the fabric.
        mine = {key: self.route_want[key] for key in self._path_addresses(path)
                if key in self.route_want and self.route_want[key][3] == path.plane}
        self._hold_routes(mine, held)

    def _hold_routes(self, entries: dict, held: bool) -> None:
        """Hold (or release) entries of route_want ({(family, dst): (gateway, dev, source, native
        plane)}) in the held table: one `ip` run."""
        if not self.cfg.backup_routes["enabled"] or not entries:
            return
        table = str(self.cfg.backup_routes["table"] + 1)
        failed = None if held else self._failed_path_addresses()
        commands = []
        tentative = None
        for (family, dst), (gateway, dev, source, native) in sorted(entries.items()):
            if not held and self._held((family, dst), native, failed):
                continue
            if held:
                # Our plane address stays the source: a routed plane translates only that one.
                # IPv6 refuses it while tentative (its NIC is down): then connected sockets
                # keep theirs and new ones pick the backup plane's address.
                if family == 6 and tentative is None:
                    tentative = self._tentative()
                src = ["src", source] if family == 4 or source not in tentative else []
                commands.append(["-%d" % family, "route", "replace", dst, "via", gateway, "dev", dev, "onlink"] + src
                                + ["table", table, "proto", routes.PROTO])
            else:
                commands.append(["-%d" % family, "route", "del", dst, "table", table])
        try:
            errors = routes.batch(commands)
        except OSError as e:
            errors = [str(e)]
        # Deleting what is already gone is fine (the kernel drops routes with their NIC).
        self._route_errors([e for e in errors if held or "No such process" not in e])

    def _tentative(self) -> set:
        try:
            return routes.tentative_addresses()
        except (OSError, iproute.IpCommandError) as e:
            self.log.warning("backup routes: cannot list tentative IPv6 addresses (%s): held IPv6 routes go without a source", e)
            return {source for (_gateway, _dev, source, _native) in self.route_want.values()}

    def _route_errors(self, errors) -> None:
        if errors and errors != self.route_errors:
            self.log.warning("backup routes: %s", errors[0])
        self.route_errors = errors
