"""The ebpf_program tests' fixtures (ebpf_program_env.py): a host/peer namespace pair and a
private bpffs per test. Test files with a lab of another shape define their own `lab`."""

from __future__ import annotations

import pytest

import nshost
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
