"""The module tests' shared fixtures. The ebpf_program tests' (ebpf_program_env.py): a host/peer
namespace pair and a private bpffs per test. The plane_state tests' (plane_state_env.py): two
hosts with the programs attached, built once for the session and reset for each test. Test files
with a lab of another shape define their own `lab`."""

from __future__ import annotations

import pytest

import hostlab
import nshost
import plane_state_env
from ebpf_program_env import Lab


@pytest.fixture
def lab():
    """A fresh host/peer namespace pair, up, removed after the test whatever happened."""
    lab = Lab()
    try:
        yield lab.up()
    finally:
        lab.down()


@pytest.fixture
def bpffs(tmp_path):
    """A private bpffs for the test, unmounted after it."""
    with nshost.bpffs(tmp_path / "bpffs") as path:
        yield path


@pytest.fixture(scope="session")
def plane_state_hosts(tmp_path_factory):
    """Two attached hosts for every plane_state test of the session, removed after the last."""
    with hostlab.attached_two_hosts(tmp_path_factory) as lab:
        yield lab


@pytest.fixture
def hosts(plane_state_hosts):
    """The plane_state tests' two hosts, reset (plane_state_env.reset)."""
    return plane_state_env.reset(plane_state_hosts)
