"""Background link flapper: `python -m edgeft_lab.flapper --netns NS --ifname IF --hz 5 --duration 10`.

Toggles one interface down/up `hz` times per second (one down and one up per cycle) for
`duration` seconds, then leaves it up. SIGTERM (what `repair` sends) also leaves it up.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from ipaddress import ip_address, ip_network

from pyroute2 import IPRoute
from pyroute2 import netns as pyroute2_netns
from pyroute2.netlink.exceptions import NetlinkError

from . import netns
from .fabric import install_routes
from .plan import Route

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def restore_routes(ipr: IPRoute, routes: list[Route]) -> None:
    try:
        install_routes(ipr, routes)
    except NetlinkError as exc:  # keep flapping; `repair` installs them again
        print(f"flapper: restoring routes failed: {exc}", file=sys.stderr)


def flap(ifname: str, hz: float, duration: float, routes: list[Route], ready_file: str | None = None) -> int:
    half_period = 1.0 / (2.0 * hz)
    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=ifname)
        if not found:
            print(f"flapper: no interface {ifname}", file=sys.stderr)
            return 1
        index = found[0]
        toggles = 0
        start = time.monotonic()
        try:
            while time.monotonic() - start < duration:
                going_up = toggles % 2 == 1
                ipr.link("set", index=index, state="up" if going_up else "down")
                if going_up:
                    restore_routes(ipr, routes)  # set down flushed them
                toggles += 1
                if toggles == 1 and ready_file:
                    # Tell the lab the flapping has begun, so `fault flap` returns only then.
                    with open(ready_file, "w") as ready:
                        ready.write(f"{os.getpid()}\n")
                # The stop signals are blocked, so waiting for them is the sleep: a netlink
                # request is never cut in half, and a stop is honoured at once.
                wait = max(0.0, start + toggles * half_period - time.monotonic())
                if signal.sigtimedwait(STOP_SIGNALS, wait) is not None:
                    break
        finally:
            ipr.link("set", index=index, state="up")
            restore_routes(ipr, routes)
    print(f"flapper: {ifname}: {toggles} toggles, left up", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    parser = argparse.ArgumentParser(prog="edgeft_lab.flapper")
    parser.add_argument("--netns", required=True)
    parser.add_argument("--ifname", required=True)
    parser.add_argument("--hz", type=float, required=True)
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--ready-file", help="written after the first toggle")
    parser.add_argument("--route", action="append", default=[], metavar="DST,VIA",
                        help="a route via the interface to restore after each up")
    args = parser.parse_args(argv)
    # This process does nothing else, so it simply moves itself into the namespace.
    fd = os.open(netns.path(args.netns), os.O_RDONLY)
    pyroute2_netns.setns(fd)
    os.close(fd)
    routes = []
    for text in args.route:
        dst, via = text.split(",")
        routes.append(Route(ip_network(dst), ip_address(via), args.ifname))
    return flap(args.ifname, args.hz, args.duration, routes, args.ready_file)


if __name__ == "__main__":
    sys.exit(main())
