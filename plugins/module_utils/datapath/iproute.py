"""The few iproute2 (`ip`) calls the control plane needs: managed neighbours, and the
route, rule and address listings read with them.

Why `ip` rather than pyroute2: managed neighbour entries (NTF_EXT_MANAGED,
carried in NDA_FLAGS_EXT) are not supported by pyroute2 0.7.x (Debian 12 ships
0.7.2), and the data path needs them (docs/datapath.md). A host's links are read
once, with pyroute2 (host/nics.py). Argument lists only, no shell; JSON output
only (iproute2 >= 4.14).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError

# Where iproute2 lives when PATH is minimal (cron, some become methods).
_SBIN = ("/usr/sbin", "/sbin", "/usr/bin", "/bin")


class IpCommandError(DatapathError):
    """An `ip` command failed; the message has the command and its stderr."""


def ip_binary() -> str:
    found = shutil.which("ip") or shutil.which("ip", path=os.pathsep.join(_SBIN))
    if not found:
        raise IpCommandError("the ip command (iproute2) is not installed: install the iproute2 package")
    return found


def run(args, json_out: bool = False):
    cmd = [ip_binary()] + (["-j"] if json_out else []) + list(args)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    if proc.returncode != 0:
        raise IpCommandError("%s failed: %s" % (" ".join(cmd[1:]), proc.stderr.strip() or "exit %d" % proc.returncode))
    if not json_out:
        return proc.stdout
    return json.loads(proc.stdout) if proc.stdout.strip() else []


def neighbours() -> dict:
    """(address, device) -> {managed, state, lladdr} for every neighbour entry."""
    out = {}
    for family in ("-4", "-6"):
        for n in run([family, "neigh", "show"], json_out=True):
            if "dst" not in n or "dev" not in n:
                continue
            out[(n["dst"], n["dev"])] = {
                # iproute2 prints the flag as a key with a null value
                "managed": "managed" in n,
                "state": n.get("state", []),
                "lladdr": n.get("lladdr"),
            }
    return out


def neigh_managed(address: str, device: str) -> None:
    """Create (or convert to) a managed entry: the kernel resolves it and keeps it fresh."""
    try:
        run(["neigh", "replace", address, "dev", device, "managed"])
    except IpCommandError as e:
        raise IpCommandError(
            "%s (managed neighbour entries need Linux >= 5.16 and iproute2 >= 5.16; an IPv6 entry also "
            "needs IPv6 enabled on %s)" % (e, device)
        ) from None


def neigh_delete(address: str, device: str) -> bool:
    """Delete an entry; False if it was already gone."""
    try:
        run(["neigh", "del", address, "dev", device])
    except IpCommandError as e:
        if "No such file" in str(e) or "Cannot assign" in str(e):
            return False
        raise
    return True
