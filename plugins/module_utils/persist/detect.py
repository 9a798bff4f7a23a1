# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which network configuration system restores a host's network at boot, and what it is installed with.

Everything is read from the filesystem under `root` (so an image being built, or a scratch
root in tests, is judged by what it holds); only for root = / are running services asked
about too (systemctl, nmcli), and only when systemd runs the host. Nothing is changed.

Detection order (docs/persistence.md): netplan if /etc/netplan holds YAML files; else
NetworkManager if it is running or enabled and does not leave the plan's NICs unmanaged;
else systemd-networkd if it is running or enabled; else ifupdown if /etc/network/interfaces
exists. A renderer counts only when it is installed.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess

RENDERERS = ("networkd", "ifupdown", "networkmanager", "netplan")
# What to install for each renderer (Debian/Ubuntu package names).
PACKAGES = {
    "networkd": "systemd",
    "ifupdown": "ifupdown",
    "networkmanager": "network-manager",
    "netplan": "netplan.io",
}
PROGRAMS = {
    "networkd": ("lib/systemd/systemd-networkd", "usr/lib/systemd/systemd-networkd"),
    "ifupdown": ("sbin/ifup", "usr/sbin/ifup"),
    "networkmanager": ("usr/sbin/NetworkManager",),
    "netplan": ("usr/sbin/netplan", "usr/bin/netplan"),
}
# Distributions that package systemd-networkd apart from systemd call the package after it.
PACKAGE_NOTES = {"networkd": " (or systemd-networkd where it is packaged apart)"}
UNITS = {"networkd": "systemd-networkd.service", "networkmanager": "NetworkManager.service"}
# ifenslave's hook turns the bond-* options of /etc/network/interfaces into a bond.
IFENSLAVE_HOOK = "etc/network/if-pre-up.d/ifenslave"
SOURCES_INTERFACES_D = re.compile(r"^\s*(source|source-directory)\s+\S*interfaces\.d", re.M)
SHARED_LIB_VERSION = re.compile(r"libsystemd-shared-(\d+)")
SYSTEMD_VERSION = re.compile(r"^systemd (\d+)", re.M)


def _path(root, rel):
    return os.path.join(root, rel)


def installed(root, renderer):
    """The renderer's program under root, or None."""
    for rel in PROGRAMS[renderer]:
        if os.path.isfile(_path(root, rel)):
            return "/" + rel
    return None


def unit_enabled(root, unit):
    """Enabled = linked into some target's .wants directory (what systemctl enable does)."""
    return bool(glob.glob(_path(root, "etc/systemd/system/*.wants/" + unit)))


def _run(argv):
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=15, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc


def systemd_runs(root):
    return root == "/" and os.path.isdir("/run/systemd/system")


def unit_active(root, unit):
    """True/False when systemd runs the host at root = /; None when that cannot be known."""
    if not systemd_runs(root):
        return None
    proc = _run(["systemctl", "is-active", "--quiet", unit])
    return None if proc is None else proc.returncode == 0


def networkd_version(root):
    """systemd's version as an int, from the program at root = /, else from libsystemd-shared-NNN under root."""
    program = installed(root, "networkd")
    if program and root == "/":
        proc = _run([program, "--version"])
        if proc is not None and proc.returncode == 0:
            match = SYSTEMD_VERSION.search(proc.stdout)
            if match:
                return int(match.group(1))
    for pattern in ("usr/lib/*/systemd/libsystemd-shared-*.so", "usr/lib/systemd/libsystemd-shared-*.so",
                    "lib/*/systemd/libsystemd-shared-*.so", "lib/systemd/libsystemd-shared-*.so"):
        for path in sorted(glob.glob(_path(root, pattern))):
            match = SHARED_LIB_VERSION.search(os.path.basename(path))
            if match:
                return int(match.group(1))
    return None


def netplan_files(root):
    return sorted("/etc/netplan/" + os.path.basename(p) for p in glob.glob(_path(root, "etc/netplan/*.yaml")) + glob.glob(_path(root, "etc/netplan/*.yml")))


def nm_unmanaged(root, nics):
    """The NICs NetworkManager reports unmanaged (running NetworkManager only), else None."""
    if not nics or unit_active(root, UNITS["networkmanager"]) is not True:
        return None
    proc = _run(["nmcli", "-t", "-f", "DEVICE,STATE", "device", "status"])
    if proc is None or proc.returncode != 0:
        return None
    states = dict(line.split(":", 1) for line in proc.stdout.splitlines() if ":" in line)
    return [nic for nic in nics if states.get(nic, "").startswith("unmanaged")]


def ifupdown_facts(root):
    interfaces = _path(root, "etc/network/interfaces")
    exists = os.path.isfile(interfaces)
    sources = False
    if exists:
        with open(interfaces, encoding="utf-8", errors="replace") as handle:
            sources = bool(SOURCES_INTERFACES_D.search(handle.read()))
    return {"interfaces_file": exists, "sources_interfaces_d": sources, "ifenslave": os.path.isfile(_path(root, IFENSLAVE_HOOK))}


def probe(root, nics=()):
    """Facts about every renderer under root."""
    facts = {}
    for renderer in RENDERERS:
        unit = UNITS.get(renderer)
        facts[renderer] = {
            "installed": installed(root, renderer) is not None,
            "program": installed(root, renderer),
            "package": PACKAGES[renderer],
            "enabled": unit_enabled(root, unit) if unit else None,
            "active": unit_active(root, unit) if unit else None,
        }
    facts["networkd"]["version"] = networkd_version(root) if facts["networkd"]["installed"] else None
    facts["netplan"]["config_files"] = netplan_files(root)
    facts["networkmanager"]["unmanaged"] = nm_unmanaged(root, list(nics)) if facts["networkmanager"]["installed"] else None
    facts["ifupdown"].update(ifupdown_facts(root))
    return facts


def choose(facts):
    """(renderer or None, reasons): the first renderer in detection order that applies, and why each did or did not."""
    reasons = []
    netplan = facts["netplan"]
    if netplan["config_files"] and netplan["installed"]:
        return "netplan", reasons + ["netplan: /etc/netplan holds %s" % ", ".join(netplan["config_files"])]
    reasons.append("netplan: %s" % ("not installed (package %s)" % netplan["package"] if not netplan["installed"] else "/etc/netplan holds no YAML file"))

    nm = facts["networkmanager"]
    if not nm["installed"]:
        reasons.append("networkmanager: not installed (package %s)" % nm["package"])
    elif not (nm["active"] or nm["enabled"]):
        reasons.append("networkmanager: installed but neither running nor enabled")
    elif nm["unmanaged"]:
        reasons.append("networkmanager: running but leaves %s unmanaged" % ", ".join(nm["unmanaged"]))
    else:
        return "networkmanager", reasons + ["networkmanager: %s" % ("running" if nm["active"] else "enabled")]

    networkd = facts["networkd"]
    if not networkd["installed"]:
        reasons.append("networkd: not installed (package %s)" % networkd["package"])
    elif not (networkd["active"] or networkd["enabled"]):
        reasons.append("networkd: installed but neither running nor enabled")
    else:
        return "networkd", reasons + ["networkd: %s" % ("running" if networkd["active"] else "enabled")]

    ifupdown = facts["ifupdown"]
    if not ifupdown["interfaces_file"]:
        reasons.append("ifupdown: /etc/network/interfaces does not exist")
    elif not ifupdown["installed"]:
        reasons.append("ifupdown: /etc/network/interfaces exists but ifupdown is not installed (package ifupdown)")
    else:
        return "ifupdown", reasons + ["ifupdown: /etc/network/interfaces exists"]
    return None, reasons
