# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    """pin_root of the modules that work on the maps edgeft.failover.ebpf_program pinned
    (peer_table, plane_state, plane_check). ebpf_program documents its own: it creates them.
    The argument spec is module_utils/module_options.pin_root()."""

    DOCUMENTATION = r'''
options:
  pin_root:
    description:
      - The bpffs directory of this host's pinned edgeft maps, the
        O(edgeft.failover.ebpf_program#module:pin_root) the programs were attached with. The maps
        must exist; attach the programs first with M(edgeft.failover.ebpf_program).
    type: path
    required: true
'''
