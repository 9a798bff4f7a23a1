"""A default-topology lab with a unique name for the multihome tests, torn down even when a test fails."""

from __future__ import annotations

import os
import uuid

import pytest


from edgeft_lab import Lab


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
