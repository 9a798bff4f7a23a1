# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plane_refusal filter (documented in plane_refusal.yml)."""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError, normalize_planes


def plane_refusal(planes, defines=None, option="edgeft_planes", defines_option="ebpf_failover_defines"):
    """Why every edgeft module would refuse this host's plane declaration, or '' when none would:
    the plane model's rules (host/planes.py), and no more planes than the data path is built for."""
    try:
        normalize_planes(planes, option=option)
    except OptionError as e:
        return str(e)
    try:
        limit = layout.tunables(defines or {})["EDGEFT_MAX_PLANES"]
    except (TypeError, ValueError, AttributeError) as e:
        return "%s: %s" % (defines_option, e)
    if len(planes) > limit:
        return ("%s: %d planes, but the data path is built for %d (EDGEFT_MAX_PLANES); declare at most %d, or set "
                "%s.EDGEFT_MAX_PLANES to %d" % (option, len(planes), limit, limit, defines_option, len(planes)))
    return ""


class FilterModule:
    def filters(self):
        return {"plane_refusal": plane_refusal}
