"""Run a network configuration tool for real, in namespaces that die with it.

Every script runs as root in new mount, network and PID namespaces (`unshare`): /run is a
fresh tmpfs (so no socket of the machine's D-Bus, udev or services is reachable), sysfs is
remounted read-only for the new network namespace (so systemd-networkd, seeing no udev, does
not wait for it), and every process is killed when the script ends or times out. The links
are veth pairs created inside; the machine's interfaces, routes, rules and sysctls are never
visible, let alone touched.

state() reads what the kernel of the namespace holds afterwards, as `ip -j` prints it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

PRELUDE = r"""
mount -t tmpfs tmpfs /run
mount -t sysfs -o ro sysfs /sys
ip link set lo up
add_links() {
  for nic in "$@"; do
    ip link add "$nic" type veth peer name "p-$nic"
    ip link set "p-$nic" up
  done
}
dump() {
  echo "@@addr";  ip -j -d address show
  echo "@@route4"; ip -j -d -4 route show table all
  echo "@@route6"; ip -j -d -6 route show table all
  echo "@@rule4"; ip -j -4 rule show
  echo "@@rule6"; ip -j -6 rule show
  echo "@@end"
}
"""


def problem():
    """Why the sandbox cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network and mount namespaces)"
    for tool in ("unshare", "ip"):
        if shutil.which(tool) is None:
            return "%s is missing (util-linux, iproute2)" % tool
    return None


def run(script: str, timeout: float = 90) -> subprocess.CompletedProcess:
    argv = ["unshare", "--mount", "--net", "--pid", "--fork", "--kill-child", "--mount-proc", "--propagation", "private",
            "sh", "-euc", PRELUDE + script]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL)


def state(stdout: str) -> dict:
    """The kernel state dump() printed: {addr, route4, route6, rule4, rule6} as parsed JSON."""
    parts, name, lines = {}, None, []
    for line in stdout.splitlines():
        if line.startswith("@@"):
            if name:
                parts[name] = json.loads("".join(lines) or "[]")
            name, lines = line[2:], []
            if name == "end":
                name = None
        elif name:
            lines.append(line)
    missing = {"addr", "route4", "route6", "rule4", "rule6"} - set(parts)
    assert not missing, "no state dump (%s missing) in:\n%s" % (", ".join(sorted(missing)), stdout[-3000:])
    return parts


NETWORKD = "/lib/systemd/systemd-networkd"
# A configuration file systemd-networkd could not read cleanly: "<file>:<line>: <complaint>".
NETWORKD_PARSE_WARNING = r"^/(etc|run)/systemd/\S+:\d+: "


def networkd_problem():
    if problem():
        return problem()
    if not os.access(NETWORKD, os.X_OK):
        return "%s is missing (package systemd)" % NETWORKD
    return None


def run_networkd(config: dict, links, wait_for, setup: str = "", after: str = "", after_wait=(), timeout_s: int = 15):
    """Start the real systemd-networkd in a sandbox whose /etc/systemd and /run/systemd hold only `config`.

    config maps a directory networkd reads (/etc/systemd/network, /etc/systemd/networkd.conf.d,
    /run/systemd/network) to a local directory whose files are copied there; the vendor
    directory /usr/lib/systemd/network is hidden. `setup` runs before networkd starts, `after`
    once every link of wait_for is configured (then the links of after_wait are waited for).
    Returns (state, log) at the end, or after timeout_s per wait.
    """
    copies = "\n".join('mkdir -p "%s"\ncp -R "%s"/. "%s"/' % (target, source, target) for target, source in config.items())
    script = r"""
mount -t tmpfs tmpfs /etc/systemd
mount -t tmpfs tmpfs /usr/lib/systemd/network
%(copies)s
mkdir -p /run/systemd/netif/links /run/systemd/netif/leases /run/systemd/netif/lldp
chown -R systemd-network:systemd-network /run/systemd/netif
wait_configured() {
  for i in $(seq 1 %(ticks)d); do
    done_links=0
    for link in "$@"; do
      grep -q "^$link: State changed: configuring -> \(configured\|failed\)" /run/networkd.log && done_links=$((done_links + 1))
    done
    [ "$done_links" -eq $# ] && break
    sleep 0.1
  done
}
add_links %(links)s
%(setup)s
SYSTEMD_LOG_LEVEL=debug %(networkd)s > /run/networkd.log 2>&1 &
wait_configured %(wait_for)s
%(after)s
wait_configured %(after_wait)s
sleep 0.3
dump
echo "@@log"
grep -v "Failed to update" /run/networkd.log || true
""" % dict(copies=copies, links=" ".join(links), setup=setup, networkd=NETWORKD, ticks=timeout_s * 10,
           wait_for=" ".join(wait_for), after=after, after_wait=" ".join(after_wait))
    proc = run(script, timeout=2 * timeout_s + 30)
    assert proc.returncode == 0, "sandbox failed (%d): %s\n%s" % (proc.returncode, proc.stderr[-2000:], proc.stdout[-2000:])
    log = proc.stdout.split("@@log\n", 1)[1] if "@@log\n" in proc.stdout else ""
    return state(proc.stdout), log
