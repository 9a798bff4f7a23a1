"""Helpers for the lab tests: probes of real namespaces and real packets."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from edgeft_lab import Lab
from edgeft_lab import cgroups as lab_cgroups
from edgeft_lab import netns as lab_netns
from edgeft_lab.ping import ping

from ansible_collections.edgeft.failover.plugins.module_utils.datapath.sockops import cgroup2_root

needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("ip", "nft", "ping")),
    reason="lab tests need root and iproute2, nftables, iputils-ping",
)


def unique_name() -> str:
    return f"t-{os.urandom(3).hex()}"


def assert_nothing_left(name: str) -> None:
    leftovers = [ns for ns in lab_netns.list_all() if ns.startswith(f"{name}-")]
    assert leftovers == [], f"namespaces left behind: {leftovers}"
    assert f" /run/edgeft-lab/{name}/" not in Path("/proc/self/mountinfo").read_text()
    assert not Path(f"/run/edgeft-lab/{name}").exists()
    top = cgroup2_root()
    assert top is None or not Path(top, lab_cgroups.PREFIX + name).exists(), f"cgroup left behind: {top}/{name}"


def wait_for(predicate: Callable[[], bool], timeout: float = 3.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)


IFF_UP = 0x1
SO_RCVBUFFORCE = 33  # Linux; not exported by the socket module


def fault_after(stream, lead_s: float) -> int:
    """After lead_s of traffic, the fault's moment: marked on the stream, returned (monotonic ns)."""
    time.sleep(lead_s)
    fault = time.monotonic_ns()
    stream.mark("fault")
    return fault


def link_info(lab: Lab, node: str, ifname: str) -> dict:
    """admin/carrier/operstate of an interface, read with pyroute2 (IFLA_CARRIER, IFLA_OPERSTATE)."""
    with lab.ipr(node) as sock:
        (link,) = sock.get_links(*sock.link_lookup(ifname=ifname))
        return {
            "admin_up": bool(link["flags"] & IFF_UP),
            "carrier": bool(link.get_attr("IFLA_CARRIER")),
            "operstate": link.get_attr("IFLA_OPERSTATE"),
        }


def address(lab: Lab, host: str, plane: str, family: int) -> str:
    port = lab.plan.host(host).port(plane)
    return str((port.ipv4 if family == 4 else port.ipv6).ip)


def reach(lab: Lab, src: str, dst: str, plane: str, family: int = 4, timeout: float = 0.5) -> bool:
    sent, received = ping(lab.netns(src), address(lab, dst, plane, family), count=1, timeout=timeout)
    return received > 0


def reach_all(lab: Lab, cases: list[tuple[str, str, str, int]], timeout: float = 0.5) -> dict:
    """{(src, dst, plane, family): reachable} for many cases at once (failures cost a timeout)."""
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = pool.map(lambda c: reach(lab, *c, timeout=timeout), cases)
        return dict(zip(cases, results))


def both_families(src: str, dst: str, plane: str) -> list[tuple[str, str, str, int]]:
    return [(src, dst, plane, 4), (src, dst, plane, 6)]


def udp_delivery(lab: Lab, src: str, dst: str, plane: str, count: int = 400) -> float:
    """Fraction of a UDP burst from src to dst's plane address that arrives."""
    target = address(lab, dst, plane, 4)
    # Resolve the neighbour first: packets queued behind ARP are not what is measured.
    assert wait_for(lambda: reach(lab, src, dst, plane, 4, timeout=0.2), timeout=10), "no path before burst"
    receiver = lab.socket(dst, socket.AF_INET, socket.SOCK_DGRAM)
    sender = lab.socket(src, socket.AF_INET, socket.SOCK_DGRAM)
    try:
        # Room for the whole burst: only the fault may drop packets, not a full socket buffer.
        receiver.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 << 20)
        receiver.bind((target, 0))
        receiver.settimeout(0.3)
        port = receiver.getsockname()[1]
        for i in range(count):
            sender.sendto(i.to_bytes(4, "big"), (target, port))
            if i % 50 == 49:
                time.sleep(0.002)  # stay far from any queue limit: only the fault may drop
        seen = set()
        try:
            while True:
                seen.add(int.from_bytes(receiver.recv(64), "big"))
        except TimeoutError:
            pass
        return len(seen) / count
    finally:
        sender.close()
        receiver.close()


def root_snapshot() -> dict:
    """The machine's own (root namespace) network configuration, minus counters and timers."""

    def ip_json(*args: str) -> list:
        return json.loads(subprocess.run(["ip", "-j", *args], capture_output=True, text=True, check=True).stdout)

    addresses = ip_json("address", "show")
    for link in addresses:
        for info in link.get("addr_info", []):
            info.pop("valid_life_time", None)
            info.pop("preferred_life_time", None)
    sysctls = {
        key: Path("/proc/sys", key.replace(".", "/")).read_text()
        for key in (
            "net.ipv4.ip_forward",
            "net.ipv6.conf.all.forwarding",
            "net.ipv6.conf.default.accept_dad",
            "net.ipv6.conf.default.keep_addr_on_down",
        )
    }
    return {
        "addresses": addresses,
        "routes4": ip_json("-4", "route", "show", "table", "all"),
        "routes6": ip_json("-6", "route", "show", "table", "all"),
        "rules4": ip_json("-4", "rule", "show"),
        "rules6": ip_json("-6", "rule", "show"),
        "nft": subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True, check=True).stdout,
        "sysctls": sysctls,
    }
