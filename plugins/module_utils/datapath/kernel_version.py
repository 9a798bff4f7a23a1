# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The oldest kernel the data path runs on, checked before anything is loaded."""

from __future__ import annotations

import os
import re

from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError

# bpf_redirect_neigh with a next hop (5.10) and the BPF atomic compare-and-swap
# the programs use to claim a peer's change (5.12).
MINIMUM = (5, 12)
WHY = 'bpf_redirect_neigh with a next hop needs 5.10 and the BPF atomic compare-and-swap of the programs 5.12'


def parse(release: str):
    """(major, minor) of a release string such as 6.1.0-27-amd64, or None."""
    m = re.match(r'^(\d+)\.(\d+)', release or '')
    return (int(m.group(1)), int(m.group(2))) if m else None


def require(release: str = None) -> None:
    """DatapathError naming the release and the minimum unless the kernel is new enough."""
    release = release if release is not None else os.uname().release
    version = parse(release)
    if version is None:
        raise DatapathError('kernel release %r: cannot tell its version; edgeft needs %d.%d or newer (%s)'
                            % (release, MINIMUM[0], MINIMUM[1], WHY))
    if version < MINIMUM:
        raise DatapathError('kernel %s is older than %d.%d, the oldest the edgeft data path runs on (%s): '
                            'upgrade the kernel of this host' % (release, MINIMUM[0], MINIMUM[1], WHY))
