# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files edgeft writes for a host's network plan: where they go and how they are named.

Every renderer's directory is listed, so that the files of a renderer no longer used are
found as well. A file is edgeft's when its name matches the directory's pattern for the
prefix; nothing else in those directories is ever looked at twice.
"""

from __future__ import annotations

import fnmatch
import os
import re

# The prefix is also a glob: only characters without a meaning in globs (and that ifupdown's
# source-directory accepts in file names).
PREFIX = re.compile(r"^[A-Za-z0-9_-]+$")
LOCATIONS = (
    ("etc/systemd/network", ("{prefix}-*.network", "{prefix}-*.netdev")),
    ("etc/systemd/networkd.conf.d", ("{prefix}.conf",)),
    ("etc/network/interfaces.d", ("{prefix}-*",)),
    ("etc/NetworkManager/system-connections", ("{prefix}-*.nmconnection",)),
    ("etc/NetworkManager/conf.d", ("{prefix}.conf",)),
    ("etc/netplan", ("{prefix}.yaml",)),
    ("etc/sysctl.d", ("{prefix}.conf",)),
)


def edgeft_files(root, prefix):
    """(sorted paths of edgeft's files under root, {directory relative to root: exists})."""
    present, directories = [], {}
    for rel, patterns in LOCATIONS:
        path = os.path.join(root, rel)
        directories[rel] = os.path.isdir(path)
        if not directories[rel]:
            continue
        globs = [p.format(prefix=prefix) for p in patterns]
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            if any(fnmatch.fnmatchcase(name, g) for g in globs) and (os.path.isfile(full) or os.path.islink(full)):
                present.append(full)
    return present, directories
