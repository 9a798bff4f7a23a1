"""The module tests' shared fixtures. The ebpf_program tests' (ebpf_program_env.py): a host/peer
namespace pair and a private bpffs per test. The plane_state and plane_check tests': two hosts
with the programs attached, built once for the session, and reset for each test by `hosts`
(plane_state_env.reset). Test files with a lab of another shape define their own `lab`."""

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
def two_hosts(tmp_path_factory):
    """Two attached hosts (hostlab.attached_two_hosts) for every test of the session that takes
    them, removed after the last."""
    with hostlab.attached_two_hosts(tmp_path_factory) as lab:
        yield lab


@pytest.fixture
def hosts(two_hosts):
    """The two hosts, reset: both peer tables filled, counters zero, planes up and undrained,
    nothing learned or recorded, neighbours resolved (plane_state_env.reset)."""
    return plane_state_env.reset(two_hosts)
