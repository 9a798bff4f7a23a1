"""Shared test setup: resolve edgeft.failover.* the way Ansible does.

Ansible's collection finder is installed once for the whole suite (as ansible-test's
pytest plugin does), over .build/collections where scripts/bootstrap.sh links the
checkout, so module_utils import by their collection path exactly as on a target,
and the plugin loader finds edgeft.failover.netns. It happens when this file is
imported, before any conftest below it: those import module_utils at their top.
"""

import os
import sys
import warnings

from ansible.plugins.loader import init_plugin_loader
from ansible.utils.collection_loader import AnsibleCollectionConfig
from repo import collections_path

# The Ansible tools the tests run (ansible-playbook, ansible-galaxy, molecule...) are the
# ones installed beside this interpreter, as if its virtualenv were activated.
_TOOLS = os.path.dirname(sys.executable)
if _TOOLS not in os.environ.get('PATH', '').split(os.pathsep):
    os.environ['PATH'] = _TOOLS + os.pathsep + os.environ.get('PATH', '')

if AnsibleCollectionConfig.collection_finder is None:
    _paths = [collections_path()]
    _paths += [p for p in os.environ.get('ANSIBLE_COLLECTIONS_PATH', '').split(os.pathsep) if p]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        init_plugin_loader(_paths)


# Directories whose every test runs in the serial part of scripts/test.sh: the deployed labs and
# the scenarios measure gaps and losses against bounds written for a machine doing nothing else.
_SERIAL_DIRS = ('lab', 'scenarios')


def pytest_collection_modifyitems(config, items):
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        relative = os.path.relpath(str(item.path), tests_dir)
        if relative.split(os.sep, 1)[0] in _SERIAL_DIRS:
            item.add_marker('serial')
