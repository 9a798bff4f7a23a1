"""Fixtures for the namespace lab tests.

Every lab gets a unique name (t-<hex>), so the tests never touch a developer's running lab
or another test run, and is torn down with `down` even when the test fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest


from edgeft_lab import Lab
from lab_helpers import assert_nothing_left, unique_name, wait_for


@pytest.fixture
def make_lab() -> Iterator[Callable[..., Lab]]:
    """Factory for labs that are always torn down (and checked to be gone) afterwards."""
    made: list[Lab] = []

    def make(topology: str = "default", name: str | None = None) -> Lab:
        lab = Lab(topology, name=name or unique_name())
        made.append(lab)
        return lab

    yield make
    for lab in made:
        lab.down()
        assert_nothing_left(lab.name)


def _module_lab(topology: str) -> Iterator[Lab]:
    lab = Lab(topology, name=unique_name())
    try:
        lab.up()
        yield lab
    finally:
        lab.down()
        assert_nothing_left(lab.name)


@pytest.fixture(scope="module")
def default_lab() -> Iterator[Lab]:
    yield from _module_lab("default")


@pytest.fixture(scope="module")
def routed_lab() -> Iterator[Lab]:
    yield from _module_lab("routed")


@pytest.fixture
def healthy(default_lab: Lab) -> Iterator[Lab]:
    """The module's default lab, with every fault repaired after the test."""
    yield default_lab
    default_lab.repair_all()
    assert wait_for(lambda: default_lab.ping_matrix(timeout=0.5).ok, timeout=5)
