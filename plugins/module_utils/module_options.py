# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The argument spec pieces several modules share, each the spec of a doc fragment in
plugins/doc_fragments (ansible-test's validate-modules holds the two to each other), and the
checks of option values that the cores share.

A function each, so that every module gets dicts of its own.
"""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils import constants


def pin_root() -> dict:
    """edgeft.failover.pin_root: the directory of the pinned maps."""
    return dict(type='path', required=True)


def state_dir() -> dict:
    """edgeft.failover.state_dir: the directory of edgeft's records."""
    return dict(type='path', default=constants.STATE_DIR)


def planes(required=False, **suboptions) -> dict:
    """edgeft.failover.planes.*: a list of planes, each with a name and a NIC, then `suboptions`."""
    spec = dict(type='list', elements='dict', options=dict(
        name=dict(type='str', required=True),
        interface=dict(type='str', required=True),
        **suboptions
    ))
    if required:
        spec['required'] = True
    return spec


def plane_addresses() -> dict:
    """The planes suboptions ipv4 and ipv6 (edgeft.failover.planes.addresses and .multihome)."""
    return dict(ipv4=dict(type='str'), ipv6=dict(type='str'))


def int_in_range(value, where, low, high, error) -> int:
    """value (an int, or decimal text) as an int in low..high; else `error` (the caller's option
    error class) naming the option `where`."""
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value), 10)
        except ValueError:
            raise error("%s: %r is not an integer" % (where, value)) from None
    if not low <= value <= high:
        raise error("%s: %d is out of range (%d to %d)" % (where, value, low, high))
    return value
