"""Deployed labs shared by the lab tests that only need one (not the tests about deploying):
one per topology for the whole run, built on first use, handed out reset to the state a
deployment leaves, rebuilt when a test left one broken (deployed.SharedDeployment), and
released once the last test of tests/lab is done."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from deployed import SHARED, SharedDeployment, held

HERE = Path(__file__).resolve().parent


def _shared(tmp_path_factory, topology, extra=()):
    if os.geteuid() != 0:
        pytest.fail('the deployed lab tests need root (namespaces, tc, bpf)')
    yield from held(SharedDeployment(tmp_path_factory.mktemp('inv-%s' % topology), 'sd', topology, extra))


@pytest.fixture(scope='session')
def shared_default_deployment(tmp_path_factory):
    """The default topology (2 racks x 2 hosts, L2 planes), deployed with site.yml."""
    yield from _shared(tmp_path_factory, 'default')


@pytest.fixture(scope='session')
def shared_default_bcc_deployment(tmp_path_factory):
    """The default topology deployed with the bcc loader (compiled on every host): the data path
    tests that must hold for both loaders take it too."""
    yield from _shared(tmp_path_factory, 'default', ('-e', 'ebpf_failover_loader=bcc'))


@pytest.fixture(scope='session')
def shared_routed_deployment(tmp_path_factory):
    """The routed topology (leaf-spine planes, failover addresses), deployed with site.yml."""
    yield from _shared(tmp_path_factory, 'routed')


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After the last lab test, bring the shared labs down: the scenarios that follow get the
    machine to themselves. After that test's own fixtures are torn down (a wrapper): they may
    still read the lab."""
    try:
        return (yield)
    finally:
        if nextitem is None or HERE not in Path(nextitem.path).parents:
            for shared in SHARED:
                shared.release()
