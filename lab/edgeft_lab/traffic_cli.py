"""`edgeft-lab traffic udp|tcp --from HOST --to HOST ...`: one measured stream, then its figures."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

from .errors import LabError
from .lab import Lab
from .traffic import TcpStream, UdpStream

RATE_SUFFIXES = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}


def _positive(kind: Callable[[str], float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
        return value

    parse.__name__ = getattr(kind, "__name__", "value")  # argparse names the type in its messages
    return parse


def parse_rate(text: str) -> int:
    """Bits per second: 50M, 1.5G, 800k, 0 (unlimited)."""
    number, suffix = text.strip(), ""
    if number and number[-1].lower() in RATE_SUFFIXES:
        number, suffix = number[:-1], number[-1].lower()
    try:
        value = float(number) * RATE_SUFFIXES[suffix]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a rate: {text!r} (e.g. 50M, 1G, 0 for unlimited)") from None
    if value != 0 and value < 8_000:
        raise argparse.ArgumentTypeError(f"rate {text} is below 8k bit/s")
    return int(value)


def add_parser(sub: argparse._SubParsersAction) -> None:
    traffic = sub.add_parser("traffic", help="run a measured UDP or TCP stream between two hosts")
    kinds = traffic.add_subparsers(dest="proto", required=True, metavar="PROTO")
    udp = kinds.add_parser("udp", help="fixed-rate UDP stream: loss, gaps, reordering")
    _common_arguments(udp)
    udp.add_argument("--pps", type=_positive(int), default=10_000, help="packets per second (default 10000)")
    udp.add_argument("--size", type=_positive(int), default=64, help="datagram payload bytes (default 64)")
    tcp = kinds.add_parser("tcp", help="bulk TCP stream: goodput, stalls, resets")
    _common_arguments(tcp)
    tcp.add_argument("--rate", type=parse_rate, default=parse_rate("50M"),
                     help="bits/s, e.g. 50M, 1G; 0 = unlimited (default 50M)")
    tcp.add_argument("--reconnect", action="store_true", help="reconnect after a broken connection")


def _common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", dest="src", required=True, metavar="HOST", help="sending host, e.g. r1h1")
    parser.add_argument("--to", dest="dst", required=True, metavar="HOST", help="receiving host, e.g. r2h1")
    parser.add_argument("--plane", help="plane of the destination address (default: the first plane)")
    parser.add_argument("--family", type=int, choices=(4, 6), default=4, help="IP version (default 4)")
    parser.add_argument("--address", help="destination address (default: the host's on --plane/--family)")
    parser.add_argument("--duration", type=_positive(float), default=5.0, help="seconds (default 5)")
    parser.add_argument("--json", action="store_true", help="the full result (with timeline) as JSON")
    parser.add_argument("--stop-file", type=Path, metavar="PATH",
                        help="stop as soon as PATH exists (--duration is then the longest run)")


def run(lab: Lab, args: argparse.Namespace) -> int:
    if not lab.is_up():
        raise LabError(f"lab {lab.name} is not up (run: edgeft-lab --name {lab.name} up)")
    where = {"address": args.address, "plane": args.plane, "family": args.family}
    stream: UdpStream | TcpStream
    if args.proto == "udp":
        stream = UdpStream(lab, args.src, args.dst, pps=args.pps, size=args.size, **where)
    else:
        stream = TcpStream(lab, args.src, args.dst, rate_bps=args.rate or None, reconnect=args.reconnect, **where)
    with stream:
        deadline = time.monotonic() + args.duration
        while time.monotonic() < deadline:
            if args.stop_file is not None and args.stop_file.exists():
                break
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    result = stream.result()
    print(json.dumps(result.as_dict()) if args.json else result.summary())
    return 0
