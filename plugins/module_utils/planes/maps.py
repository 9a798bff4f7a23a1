# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host's pinned maps, opened for a module run with the pin directory locked."""

from __future__ import annotations

import contextlib
import os

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.handle import pin_dir_lock
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import DatapathMaps
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import OptionError

ATTACH_HINT = "attach the programs first with edgeft.failover.ebpf_program"


def maps_pinned(pin_root) -> bool:
    """Whether every map of the layout is pinned under pin_root (shape not checked; maps an
    earlier edgeft did not have may be missing)."""
    return os.path.isdir(pin_root) and all(os.path.exists(os.path.join(pin_root, m.name)) for m in layout.REQUIRED_MAPS)


class EmptyMaps:
    """Stands in for maps that are not pinned yet (check mode before the first
    attach): no peers, unconfigured planes, the header's default capacity."""

    class _Planes:
        @staticmethod
        def get(index):
            return layout.Plane()

    planes = _Planes()

    @staticmethod
    def capacity():
        t = layout.tunables()
        return {"peers": t["EDGEFT_MAX_PEERS"], "addresses": t["EDGEFT_MAX_ADDRS"]}

    @staticmethod
    def addresses():
        return {}

    @staticmethod
    def peer_ids():
        return []

    @staticmethod
    def get_peer(peer_id):
        return None

    @staticmethod
    def failovers():
        return {}


def require_pin_root(pin_root, option="pin_root", must_exist=True) -> None:
    """OptionError unless pin_root is an absolute path to an existing directory (or, without
    must_exist, one that may come later): the first thing to check, before options that name
    what is pinned there (planes, peers)."""
    if not pin_root or not os.path.isabs(pin_root):
        raise OptionError("%s: %r must be an absolute path" % (option, pin_root))
    if must_exist and not os.path.isdir(pin_root):
        raise OptionError("%s: %s does not exist: %s" % (option, pin_root, ATTACH_HINT))


@contextlib.contextmanager
def open_maps(pin_root, option="pin_root", allow_missing=False):
    """The host's pinned maps, with the pin dir locked against other writers.

    allow_missing (check mode): EmptyMaps when nothing is pinned yet.
    """
    require_pin_root(pin_root, option, must_exist=not allow_missing)
    if allow_missing and not maps_pinned(pin_root):
        yield EmptyMaps()
        return
    with pin_dir_lock(pin_root):
        try:
            maps = DatapathMaps.open_pinned(pin_root)
        except DatapathError as e:
            raise OptionError("%s: %s (%s)" % (option, e, ATTACH_HINT)) from None
        try:
            yield maps
        finally:
            maps.close()
