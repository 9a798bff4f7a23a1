# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The argument spec pieces several modules share, each the spec of a doc fragment in
plugins/doc_fragments (ansible-test's validate-modules holds the two to each other), and the
checks of option values that the cores share.

A function each, so that every module gets dicts of its own.
"""

from __future__ import annotations

import re

from ansible_collections.edgeft.failover.plugins.module_utils import constants

_PERCENT = re.compile(r"^\s*(\d+)\s*%\s*$")


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


def batch_size(value, where, error, members, whole, verb, example):
    """One batch size as a play's `serial` takes it: a count of `members` (at least 1), returned
    as an int, or a percentage of `whole` as 'N%' (1 to 100), returned as that text; else
    `error` naming the option `where`, e.g. members ('host', 'hosts'), whole 'the fabric', verb
    'deploy', example '25%'."""
    match = _PERCENT.match(value) if isinstance(value, str) else None
    if match:
        percent = int(match.group(1))
        if not 0 < percent <= 100:
            raise error("%s: %s is not a percentage of %s from 1%% to 100%%" % (where, value, whole))
        return "%d%%" % percent
    if isinstance(value, str) and not value.strip().isdigit():
        raise error("%s: %r is neither a %s count nor a percentage such as %r" % (where, value, members[0], example))
    count = int_in_range(value, where, 0, 1 << 31, error)
    if count == 0:
        raise error("%s: 0 %s per batch would %s nothing; give at least 1, or a percentage such as %r"
                    % (where, members[1], verb, example))
    return count
