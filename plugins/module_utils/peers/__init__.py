# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's peer table (the peer_table module): validate a declared table, then make the
pinned maps equal it.

Exact-set semantics: peers and addresses that are not declared are removed,
and the neighbour entries this code created for them with them. Everything is
validated before the first write; writes are ordered so that a peer is never
half-present to the programs (docs/datapath.md, "Peer table").

spec: the module's options and the peers' validation (pure). changes: ids and
the ordered writes that make the maps equal the declaration (Plan). apply: the
writes, in that order. run: the module (validate, plan, apply, report).
Free of Ansible imports.
"""
