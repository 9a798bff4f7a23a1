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
import re
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


# The kernel's answer when a neighbour table holds gc_thresh3 entries (one table per family,
# shared by every network namespace of the machine).
TABLE_FULL = "No buffer space available"


class NeighbourTableFull(IpCommandError):
    """The kernel refused a neighbour entry because its table is at net.ipv{4,6}.neigh.default.gc_thresh3."""


def neigh_managed_all(entries) -> None:
    """Create (or convert to) managed entries for every (address, device): the kernel resolves them
    and keeps them fresh. One `ip -batch` run for all of them (a process per entry costs minutes at
    thousands of peers); it stops at the first entry that fails and names it."""
    entries = list(entries)
    if not entries:
        return
    script = "".join("neigh replace %s dev %s managed\n" % (address, device) for address, device in entries)
    proc = subprocess.run([ip_binary(), "-batch", "-"], input=script, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    if proc.returncode != 0:
        raise batch_error(entries, proc.stderr, proc.returncode)


def batch_error(entries, stderr, returncode) -> IpCommandError:
    """The error of a failed neigh_managed_all run, naming the entry that failed and why: a full
    table names its limit, anything else the kernel and iproute2 the entries need."""
    error = stderr.strip() or "exit %d" % returncode
    failed = re.search(r"Command failed -:(\d+)", error)
    done = int(failed.group(1)) - 1 if failed and 0 < int(failed.group(1)) <= len(entries) else None
    where = "neigh replace %s dev %s managed" % entries[done] if done is not None else "ip -batch"
    detail = error.splitlines()[0]
    count = "after %d of %d entries" % (done, len(entries)) if done is not None else "(%d entries)" % len(entries)
    if TABLE_FULL in error:
        family = 6 if done is not None and ":" in entries[done][0] else 4
        return NeighbourTableFull(
            "%s failed %s: %s: the kernel's IPv%d neighbour table is full (it holds at most "
            "net.ipv%d.neigh.default.gc_thresh3 entries, shared by every network namespace of the machine); raise "
            "it in the machine's initial namespace (peer_table's neighbor_limits=grow does so on a host)"
            % (where, count, detail, family, family))
    # What an old kernel (EINVAL, EOPNOTSUPP) or an old iproute2 ("managed" is garbage to it) answers.
    unsupported = any(s in error for s in ("Invalid argument", "not supported", "garbage", "Unknown"))
    return IpCommandError("%s failed %s: %s%s" % (where, count, detail, (
        " (managed neighbour entries need Linux >= 5.16 and iproute2 >= 5.16; an IPv6 entry also needs IPv6 "
        "enabled on the device)" if unsupported else "")))


def neigh_delete(address: str, device: str) -> bool:
    """Delete an entry; False if it was already gone."""
    try:
        run(["neigh", "del", address, "dev", device])
    except IpCommandError as e:
        if "No such file" in str(e) or "Cannot assign" in str(e):
            return False
        raise
    return True
