"""Running bond steps and undoing them; detecting the bonding driver.

The bonding driver does not exist on this test machine, so the netlink side is a
recording stand-in for pyroute2's IPRoute (FakeIPRoute): it proves which calls
the steps make, in which order, and that a failure undoes the completed ones.
Whether the real driver accepts them is checked in the project's VM scenario.
Driver detection reads files only; it runs on fake /sys, /proc and /lib/modules trees.
"""

from __future__ import annotations

import errno
import os

import pytest
from pyroute2.netlink.exceptions import NetlinkError

from ansible_collections.edgeft.failover.plugins.module_utils.bond import changes, kernel, spec


class FakeIPRoute:
    """Records link/addr calls; raises NetlinkError on the call numbered fail_at (1-based)."""

    def __init__(self, names, fail_at=None, code=errno.EBUSY):
        self.index = dict(names)
        self.calls = []
        self.fail_at, self.code = fail_at, code

    def link_lookup(self, ifname):
        return [self.index[ifname]] if ifname in self.index else []

    def _call(self, *call):
        self.calls.append(call)
        if len(self.calls) == self.fail_at:
            raise NetlinkError(self.code, "injected")

    def link(self, command, **kwargs):
        self._call("link", command, kwargs)
        if command == "add":
            self.index[kwargs["ifname"]] = 9

    def addr(self, command, **kwargs):
        self._call("addr", command, kwargs)


NAMES = {"fab0": 4, "fab1": 5}
LINKS = {"fab0": {"up": True}, "fab1": {"up": False}}


def create_steps():
    bond = spec.normalize_bond({"name": "bond0", "ports": ["fab0", "fab1"], "primary": "fab0", "addresses": ["198.18.1.11/16"]})
    return changes.present_steps(bond, None, LINKS, {})


def test_create_runs_the_steps_in_order_with_the_primary_resolved():
    ipr = FakeIPRoute(NAMES)
    kernel.run_steps(ipr, create_steps(), "bond0")
    assert [c[:2] for c in ipr.calls] == [("link", "add"), ("link", "set"), ("link", "set"), ("link", "set"), ("link", "set"),
                                          ("addr", "add")]
    add = ipr.calls[0][2]
    assert add["ifname"] == "bond0" and add["kind"] == "bond" and add["bond_mode"] == 1 and add["bond_primary"] == 4
    assert ipr.calls[1][2] == {"index": 4, "state": "down"}
    assert ipr.calls[2][2] == {"index": 4, "master": 9}
    assert ipr.calls[3][2] == {"index": 5, "master": 9}
    assert ipr.calls[4][2] == {"index": 9, "state": "up"}
    assert ipr.calls[5][2] == {"index": 9, "address": "198.18.1.11", "prefixlen": 16}


@pytest.mark.parametrize("fail_at", [2, 3, 4, 5, 6])
def test_a_failure_undoes_every_completed_step_newest_first(fail_at):
    ipr = FakeIPRoute(NAMES, fail_at=fail_at)
    with pytest.raises(kernel.KernelError) as err:
        kernel.run_steps(ipr, create_steps(), "bond0")
    assert str(err.value).endswith("rolled back, nothing was changed")
    assert str(err.value).startswith("bond bond0: ")
    done, undone = ipr.calls[:fail_at - 1], ipr.calls[fail_at:]
    # the bond is deleted last; before that every enslaved port is released, every port set down is up again
    assert undone[-1] == ("link", "del", {"index": 9})
    assert len(undone) == len(done)
    for call in done:
        if call[2].get("master"):
            assert ("link", "set", {"index": call[2]["index"], "master": 0}) in undone
        if call[2].get("state") == "down":
            assert ("link", "set", {"index": 4, "state": "up"}) in undone


def test_eopnotsupp_on_create_is_the_missing_driver():
    ipr = FakeIPRoute(NAMES, fail_at=1, code=errno.EOPNOTSUPP)
    with pytest.raises(kernel.DriverMissing) as err:
        kernel.run_steps(ipr, create_steps(), "bond0")
    assert str(err.value) == kernel.NO_DRIVER
    assert len(ipr.calls) == 1


def test_a_failing_undo_is_reported():
    class UndoFails(FakeIPRoute):
        def link(self, command, **kwargs):
            if command == "del":
                raise NetlinkError(errno.EBUSY, "busy")
            super().link(command, **kwargs)

    ipr = UndoFails(NAMES, fail_at=3)
    with pytest.raises(kernel.KernelError, match=r"rolling back failed for: create bond bond0 .*busy"):
        kernel.run_steps(ipr, create_steps(), "bond0")


def test_release_undo_enslaves_again_while_down():
    bond = spec.normalize_bond({"name": "bond0", "ports": ["fab0"]})
    cur = dict(spec.normalize_bond({"name": "bond0", "ports": ["fab0", "fab1"]}), ifindex=9, up=True, mtu=1500, addresses=[])
    steps = changes.present_steps(bond, cur, LINKS, {"ports": {"fab1": {"up": True}}})
    ipr = FakeIPRoute(dict(NAMES, bond0=9), fail_at=2)  # releasing works, bringing fab1 back up fails
    with pytest.raises(kernel.KernelError):
        kernel.run_steps(ipr, steps, "bond0")
    assert ipr.calls[0] == ("link", "set", {"index": 5, "master": 0})
    assert ipr.calls[2:] == [("link", "set", {"index": 5, "state": "down"}), ("link", "set", {"index": 5, "master": 9})]


# ------------------------------------------------------------ driver detection
def tree(tmp_path, bonding_masters=False, proc_modules=True, listing=None):
    (tmp_path / "sys/class/net").mkdir(parents=True)
    if bonding_masters:
        (tmp_path / "sys/class/net/bonding_masters").write_text("bond0\n")
    (tmp_path / "proc").mkdir()
    if proc_modules:
        (tmp_path / "proc/modules").write_text("")
    (tmp_path / "lib/modules/6.1.0-test").mkdir(parents=True)
    for name, text in (listing or {}).items():
        (tmp_path / "lib/modules/6.1.0-test" / name).write_text(text)
    return dict(sys_root=str(tmp_path / "sys"), proc_root=str(tmp_path / "proc"), modules_root=str(tmp_path / "lib/modules"),
                release="6.1.0-test")


def test_driver_loaded(tmp_path):
    assert kernel.driver_status(**tree(tmp_path, bonding_masters=True, proc_modules=False)) == "loaded"


def test_driver_loadable_from_modules_dep(tmp_path):
    dep = "kernel/drivers/net/bonding/bonding.ko.xz: kernel/net/tls/tls.ko.xz\nkernel/drivers/net/veth.ko.xz:\n"
    assert kernel.driver_status(**tree(tmp_path, listing={"modules.dep": dep})) == "loadable"


def test_driver_absent(tmp_path):
    # bonding.ko named only as another module's dependency does not count
    dep = "kernel/drivers/net/veth.ko.xz: kernel/drivers/net/bonding/bonding.ko.xz\n"
    assert kernel.driver_status(**tree(tmp_path, listing={"modules.dep": dep})) == "absent"
    assert kernel.driver_status(**tree(tmp_path / "x", proc_modules=False, listing={"modules.dep": dep})) == "absent"


@pytest.mark.skipif(os.path.exists("/sys/class/net/bonding_masters") or os.path.exists("/proc/modules"),
                    reason="this kernel has (or can load) a bonding driver")
def test_a_kernel_without_bonding_and_without_modules_is_absent():
    """The test machine's kernel (docs/decisions.md: no bonding driver, no loadable modules)."""
    assert kernel.driver_status() == "absent"
