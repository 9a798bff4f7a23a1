# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bonds in the kernel: is there a bonding driver, what a bond looks like now,
and running changes.py's steps with rollback (pyroute2, in the caller's
network namespace)."""

from __future__ import annotations

import errno
import ipaddress
import os

from ansible_collections.edgeft.failover.plugins.module_utils import netlink
from ansible_collections.edgeft.failover.plugins.module_utils.bond import changes, mapping
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.host import nics

NO_DRIVER = ("bond: this kernel has no bonding driver (CONFIG_BONDING); load the module `bonding` or use a kernel "
             "that has it")


class KernelError(EdgeftError, RuntimeError):
    """A kernel change or read failed; the message says which."""


class DriverMissing(KernelError):
    """The running kernel cannot make bonds."""

    def __init__(self):
        super().__init__(NO_DRIVER)


NetlinkError = netlink.NetlinkError
netns_id = netlink.netns_id


def open_ipr():
    return netlink.open_ipr(KernelError)


def driver_status(sys_root="/sys", modules_root="/lib/modules", proc_root="/proc", release=None) -> str:
    """'loaded' (bonds can be made now), 'loadable' (the first bond loads the module)
    or 'absent', without changing anything.

    The bonding driver creates /sys/class/net/bonding_masters when it loads. A
    kernel that loads modules (it has /proc/modules) and lists bonding.ko among
    its modules loads it on the first RTM_NEWLINK of kind bond.
    """
    if os.path.exists(os.path.join(sys_root, "class/net/bonding_masters")):
        return "loaded"
    if not os.path.exists(os.path.join(proc_root, "modules")):
        return "absent"
    base = os.path.join(modules_root, release or os.uname().release)
    for listing in ("modules.dep", "modules.builtin"):
        try:
            with open(os.path.join(base, listing)) as f:
                if any("/bonding.ko" in line.split(":", 1)[0] for line in f):
                    return "loadable"
        except OSError:
            continue
    return "absent"


# ------------------------------------------------------------------- read
def links(ipr) -> dict:
    """ifname -> {ifindex, kind, master, up, mtu, addresses, info_data}: host/nics.py's links()."""
    return nics.links(ipr)


def read_bond(name, links_) -> dict:
    """The bond `name` as spec.normalize_bond shapes it (plus ifindex, up), or None."""
    link = links_.get(name)
    if link is None or link["kind"] != "bond":
        return None
    ifnames = {entry["ifindex"]: ifname for ifname, entry in links_.items()}
    return {
        "name": name, "ifindex": link["ifindex"], "up": link["up"], "mtu": link["mtu"],
        "ports": sorted(p for p, entry in links_.items() if entry["master"] == name),
        "addresses": [a for a in link["addresses"] if not ipaddress.ip_interface(a).ip.is_link_local],
        "options": mapping.options_from_kernel(link["info_data"] or {}, ifnames),
    }


# ------------------------------------------------------------------ write
class Runner:
    """Runs steps; remembers how to undo each completed one."""

    def __init__(self, ipr):
        self.ipr = ipr
        self.undo = []  # (description, callable)

    def index(self, name) -> int:
        found = self.ipr.link_lookup(ifname=name)
        if not found:
            raise KernelError("interface %s disappeared" % name)
        return found[0]

    def _set(self, name, **kwargs):
        self.ipr.link("set", index=self.index(name), **kwargs)

    def _addr(self, command, name, address):
        iface = ipaddress.ip_interface(address)
        self.ipr.addr(command, index=self.index(name), address=str(iface.ip), prefixlen=iface.network.prefixlen)

    def run(self, step) -> None:
        op, text = step["op"], changes.step_text(step)
        if op == "create":
            try:
                self.ipr.link("add", ifname=step["name"], kind="bond", **self._resolved(step["args"]))
            except NetlinkError as e:
                if e.code == errno.EOPNOTSUPP:
                    raise DriverMissing() from None
                raise
            self.undo.append((text, lambda: self.ipr.link("del", index=self.index(step["name"]))))
        elif op == "set_options":
            self._set(step["name"], kind="bond", **self._resolved(step["args"]))
            self.undo.append((text, lambda: self._set(step["name"], kind="bond", **self._resolved(step["undo"]))))
        elif op in ("link_up", "link_down"):
            self._set(step["ifname"], state=op[5:])
            self.undo.append((text, lambda: self._set(step["ifname"], state="down" if op == "link_up" else "up")))
        elif op == "enslave":
            self._set(step["port"], master=self.index(step["bond"]))
            self.undo.append((text, lambda: self._set(step["port"], master=0)))
        elif op == "release":
            bond = step["bond"]
            self._set(step["port"], master=0)
            self.undo.append((text, lambda: (self._set(step["port"], state="down"),
                                             self._set(step["port"], master=self.index(bond)))))
        elif op == "mtu":
            self._set(step["ifname"], mtu=step["mtu"])
            if step["old"] is not None:
                self.undo.append((text, lambda: self._set(step["ifname"], mtu=step["old"])))
        elif op == "addr_add":
            self._addr("add", step["ifname"], step["address"])
            self.undo.append((text, lambda: self._addr("del", step["ifname"], step["address"])))
        elif op == "addr_del":
            self._addr("del", step["ifname"], step["address"])
            self.undo.append((text, lambda: self._addr("add", step["ifname"], step["address"])))
        elif op == "delete":
            self.ipr.link("del", index=self.index(step["name"]))
        else:
            raise KernelError("unknown step %r" % op)

    def _resolved(self, args):
        """bond_primary is carried by name until now: the port's index is looked up at run time."""
        out = dict(args)
        if isinstance(out.get("bond_primary"), str):
            out["bond_primary"] = self.index(out["bond_primary"])
        return out

    def rollback(self) -> list:
        failed = []
        for text, undo in reversed(self.undo):
            try:
                undo()
            except (NetlinkError, KernelError, OSError) as e:
                failed.append("%s (%s)" % (text, e))
        self.undo = []
        return failed


def run_steps(ipr, steps, bond_name) -> None:
    """Run the steps; on a failure undo the completed ones and raise KernelError
    (DriverMissing when the kernel has no bonding driver)."""
    runner = Runner(ipr)
    for step in steps:
        step.setdefault("bond", bond_name)
        try:
            runner.run(step)
        except (NetlinkError, KernelError, OSError) as e:
            failed = runner.rollback()
            if isinstance(e, DriverMissing) and not failed:
                raise
            cause = "%s: %s" % (changes.step_text(step), e)
            if failed:
                raise KernelError("bond %s: %s; rolling back failed for: %s. Check `ip -d link show` and run the task "
                                  "again" % (bond_name, cause, "; ".join(failed))) from None
            raise KernelError("bond %s: %s; rolled back, nothing was changed" % (bond_name, cause)) from None
