"""The one namespace toolkit of the kernel tests: enter a network namespace, mount a private
bpffs, and run a module's main() in-process inside a namespace with Ansible's real argument
parsing; make a throwaway namespace of veth pairs. The two-host, multihome and ebpf_program
test environments are built on it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
import tempfile
import uuid
from unittest import mock

CLONE_NEWNET = 0x40000000
MNT_DETACH = 2


@contextlib.contextmanager
def in_netns(name: str):
    """Run the block in netns `name`, this thread only: sockets, children and /proc/sys/net
    made or read here belong to that namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open("/run/netns/%s" % name, os.O_RDONLY)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns %s" % name)
        yield
    finally:
        libc.setns(back, CLONE_NEWNET)
        os.close(back)
        os.close(target)


@contextlib.contextmanager
def bpffs(path: str | None = None):
    """A bpffs mounted at `path` (default: a new temporary directory) outside /sys, which
    `ip netns exec` remounts; detached and removed afterwards, also when the test fails."""
    path = str(path) if path else tempfile.mkdtemp(prefix="edgeft-bpffs-")
    os.makedirs(path, exist_ok=True)
    subprocess.run(["mount", "-t", "bpf", "bpf", path], check=True)
    try:
        yield path
    finally:
        ctypes.CDLL(None, use_errno=True).umount2(os.fsencode(path), MNT_DETACH)
        shutil.rmtree(path, ignore_errors=True)


def ip_ns(name: str, *args: str) -> str:
    """`ip -n name ARGS...`'s output; raises when it fails."""
    return subprocess.run(["ip", "-n", name, *args], check=True, capture_output=True, text=True).stdout


def create_veth_netns(prefix: str, veths, lo_up: bool = False) -> str:
    """A new network namespace `prefix-<random hex>`: for each (nic, far, addresses) of `veths`
    a veth pair nic/far, both ends inside and up, with `addresses` on nic (an IPv6 one without
    duplicate address detection); loopback up as well when `lo_up`. Nothing is added to the
    machine's own namespace. Removed again when building it fails; else the caller removes it
    (remove_netns)."""
    name = "%s-%s" % (prefix, uuid.uuid4().hex[:10])
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        if lo_up:
            ip_ns(name, "link", "set", "lo", "up")
        for nic, far, addresses in veths:
            ip_ns(name, "link", "add", nic, "type", "veth", "peer", "name", far)
            for address in addresses:
                ip_ns(name, "addr", "add", address, "dev", nic, *(["nodad"] if ":" in address else []))
            ip_ns(name, "link", "set", nic, "up")
            ip_ns(name, "link", "set", far, "up")
    except BaseException:
        remove_netns(name)
        raise
    return name


def remove_netns(name: str) -> None:
    """Remove namespace `name` and everything in it (no error when it is already gone)."""
    subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


@contextlib.contextmanager
def veth_netns(prefix: str, veths, lo_up: bool = False):
    """create_veth_netns for the block: yields the namespace's name, removed afterwards, also
    when the test fails."""
    name = create_veth_netns(prefix, veths, lo_up)
    try:
        yield name
    finally:
        remove_netns(name)


class ModuleExit(Exception):
    """exit_json or fail_json was called: the result, as Ansible would report it."""

    def __init__(self, result: dict, failed: bool) -> None:
        super().__init__(result.get("msg", ""))
        self.result = result
        self.failed = failed


def run_module(main, args: dict, netns: str, check_mode: bool = False, diff: bool = True) -> dict:
    """A module's main() run in this process inside `netns`, with the real argument parsing.

    Returns the result dict: `failed` is True after fail_json and False after exit_json, and
    `warnings` lists what the module returned or warned about.
    """
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args

    warnings = []

    def exit_json(self, **kwargs):
        kwargs.setdefault("failed", False)
        raise ModuleExit(kwargs, False)

    def fail_json(self, msg, **kwargs):
        raise ModuleExit(dict(kwargs, msg=msg, failed=True), True)

    def warn(self, warning, **_kw):
        warnings.append(warning)

    args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
    with patch_module_args(args), mock.patch.object(basic.AnsibleModule, "exit_json", exit_json), \
            mock.patch.object(basic.AnsibleModule, "fail_json", fail_json), \
            mock.patch.object(basic.AnsibleModule, "warn", warn), in_netns(netns):
        try:
            main()
        except ModuleExit as e:
            e.result["warnings"] = list(e.result.get("warnings") or []) + warnings
            return e.result
    raise AssertionError("the module returned without exit_json/fail_json")
