"""A default-topology lab with a unique name for the multihome tests, torn down even when a test fails."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
for path in (REPO / "lab", Path(__file__).resolve().parent):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from edgeft_lab import Lab  # noqa: E402


@pytest.fixture(scope="module")
def mh_lab(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("the multihome lab tests need root (namespaces)")
    lab = Lab("default", name="mh-%s" % uuid.uuid4().hex[:6])
    inventory = tmp_path_factory.mktemp("mh-inv") / "hosts.yml"
    try:
        lab.up(inventory=inventory)
        lab.inventory_path = inventory
        yield lab
    finally:
        lab.down()
