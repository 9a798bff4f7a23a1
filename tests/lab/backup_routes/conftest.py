"""A lab that is up and not deployed (2 racks x 2 hosts, two L2 planes) for the backup route
tests; tests/lab/backup_routes/routes_lab.py applies the routes."""

import pytest

from deployed import undeployed_lab


@pytest.fixture(scope="module")
def routes_lab(tmp_path_factory):
    with undeployed_lab(tmp_path_factory.mktemp("backup-routes"), "br", "the backup route lab tests") as lab:
        yield lab
