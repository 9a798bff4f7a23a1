# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""pyroute2, imported in one place, and the identity of the caller's network namespace.

At the bottom of the import graph with errors and constants: every core that talks netlink
takes IPRoute and NetlinkError from here, so a host without pyroute2 is reported the same way
by every module.
"""

from __future__ import annotations

import os

try:
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkError
    PYROUTE2_IMPORT_ERROR = None
except ImportError as exc:  # the modules report it with the package to install
    IPRoute = None
    PYROUTE2_IMPORT_ERROR = exc

    class NetlinkError(Exception):
        """Keeps `except NetlinkError` valid without pyroute2; never raised (nothing reaches
        netlink without it)."""

        code = 0

__all__ = ["HAS_PYROUTE2", "IPRoute", "MISSING", "NetlinkError", "PYROUTE2_IMPORT_ERROR", "netns_id", "netns_inode",
           "open_ipr", "require"]

HAS_PYROUTE2 = PYROUTE2_IMPORT_ERROR is None
MISSING = "pyroute2 is missing on the target (%s): install python3-pyroute2"


def require(error):
    """Raise `error` (the caller's error class) naming the package when pyroute2 is missing."""
    if not HAS_PYROUTE2:
        raise error(MISSING % PYROUTE2_IMPORT_ERROR)


def open_ipr(error):
    """An IPRoute bound to the caller's network namespace; `error` as in require()."""
    require(error)
    return IPRoute()


def netns_inode():
    """(device, inode) of this thread's network namespace (a caller may have entered another
    with setns, which changes only the thread's)."""
    path = "/proc/thread-self/ns/net"
    status = os.stat(path if os.path.exists(path) else "/proc/self/ns/net")
    return status.st_dev, status.st_ino


def netns_id():
    """The namespace as text, a key for records that several namespaces share."""
    return "%d:%d" % netns_inode()
