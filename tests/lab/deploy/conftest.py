"""A lab fabric deployed with playbooks/site.yml, shared by the tests of this directory.

The lab gets a unique name, so a developer's running lab is never touched, and is
torn down even when a test fails.
"""

from __future__ import annotations

import os
import uuid

import pytest


from edgeft_lab import Lab


@pytest.fixture(scope='module')
def fresh_lab(tmp_path_factory):
    """A lab that is up, with its inventory written, and nothing deployed."""
    if os.geteuid() != 0:
        pytest.fail('the deploy tests need root (namespaces, tc, bpf)')
    lab = Lab('default', name='t-%s' % uuid.uuid4().hex[:6])
    inventory = tmp_path_factory.mktemp('inv') / 'hosts.yml'
    try:
        lab.up(inventory=inventory)
        lab.inventory_path = inventory
        yield lab
    finally:
        lab.down()
