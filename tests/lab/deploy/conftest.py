"""A lab that is up and not deployed, shared by this directory's tests about deploying."""

import pytest

from deployed import undeployed_lab


@pytest.fixture(scope='module')
def fresh_lab(tmp_path_factory):
    with undeployed_lab(tmp_path_factory.mktemp('deploy'), 't', 'the deploy tests') as lab:
        yield lab
