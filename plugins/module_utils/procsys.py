# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writing /proc/sys values: one write, no trailing newline.

Some kernels report a one-byte write for any value of a sysctl (Linux 6.1's
net.ipv6.conf.<nic>.ignore_routes_with_linkdown returns 1 from its handler); a buffered
"1\\n" then reaches the kernel as a second write of the newline alone, which fails with
EINVAL although the value was set.
"""

from __future__ import annotations

import os


def write_value(path, value):
    """Set the sysctl at `path` (a /proc/sys file) to `value`; OSError as the kernel reports it."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, str(value).encode())
    finally:
        os.close(fd)
