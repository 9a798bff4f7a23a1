"""A VM's fabric cables: tap devices created inside the switch namespaces and held open by qemu.

The tap is created by opening /dev/net/tun from a thread inside the switch's namespace, so it
exists only there (nothing appears in the machine's root namespace) and disappears when qemu,
the last holder of its file descriptor, exits.
"""

from __future__ import annotations

import fcntl
import os
import struct

from .. import netns
from ..errors import LabError

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000


def open_tap(switch_netns: str, ifname: str, bridge: str, mtu: int | None = None) -> int:
    """Create tap `ifname` in `switch_netns`, make it a port of `bridge`, set it up; return its fd."""

    def create() -> int:
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", ifname.encode(), IFF_TAP | IFF_NO_PI))
        except OSError:
            os.close(fd)
            raise
        return fd

    try:
        fd = netns.run_in(switch_netns, create)
    except OSError as exc:
        raise LabError(f"cannot create tap {ifname} in namespace {switch_netns}: {exc}") from None
    try:
        with netns.ipr(switch_netns) as sock:
            index = sock.link_lookup(ifname=ifname)[0]
            master = sock.link_lookup(ifname=bridge)[0]
            extra = {"mtu": mtu} if mtu else {}
            sock.link("set", index=index, master=master, state="up", **extra)
    except BaseException:
        os.close(fd)
        raise
    return fd
