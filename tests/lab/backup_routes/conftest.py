"""A lab fabric for the backup route tests (tests/lab/backup_routes/routes_lab.py applies the routes).

The lab has a unique name, so a developer's running lab is never touched, and is torn
down even when a test fails.
"""

from __future__ import annotations

import os
import uuid

import pytest

from edgeft_lab import Lab


@pytest.fixture(scope="module")
def routes_lab(tmp_path_factory):
    """A default lab (2 racks x 2 hosts, two L2 planes), up, with its inventory, nothing deployed."""
    if os.geteuid() != 0:
        pytest.fail("the backup route lab tests need root (namespaces)")
    lab = Lab("default", name="br-%s" % uuid.uuid4().hex[:6])
    lab.work_dir = tmp_path_factory.mktemp("backup-routes")
    lab.inventory_path = lab.work_dir / "hosts.yml"
    try:
        lab.up(inventory=lab.inventory_path)
        yield lab
    finally:
        lab.down()
