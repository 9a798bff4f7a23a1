# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    """state_dir, the directory of edgeft's records, in every module that keeps or reads one; each
    module's description says what it records there. The argument spec is
    module_utils/module_options.state_dir()."""

    DOCUMENTATION = r'''
options:
  state_dir:
    description:
      - Directory of edgeft's records on this host, for what the kernel cannot hold - the peer names,
        peer ids and plane names M(edgeft.failover.peer_table) recorded, and what each module made, so
        that a later run changes or removes only that. The module's description says what it records
        or reads there.
      - Give each host its own directory when several hosts share a file system (the namespace lab).
    type: path
    default: /var/lib/edgeft
'''
