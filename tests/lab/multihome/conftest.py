"""A lab that is up and not deployed, for the multihome role's tests."""

import pytest

from deployed import undeployed_lab


@pytest.fixture(scope="module")
def mh_lab(tmp_path_factory):
    with undeployed_lab(tmp_path_factory.mktemp("multihome"), "mh", "the multihome lab tests") as lab:
        yield lab
