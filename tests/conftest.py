"""Shared test setup: resolve edgeft.failover.* the way Ansible does.

Ansible's collection finder is installed once for the whole suite (as ansible-test's
pytest plugin does), over .build/collections where scripts/bootstrap.sh links the
checkout, so module_utils import by their collection path exactly as on a target,
and the plugin loader finds edgeft.failover.netns.
"""

import os
import warnings

from repo import collections_path


def pytest_configure(config):
    from ansible.plugins.loader import init_plugin_loader
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if AnsibleCollectionConfig.collection_finder is None:
        paths = [collections_path()]
        paths += [p for p in os.environ.get('ANSIBLE_COLLECTIONS_PATH', '').split(os.pathsep) if p]
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            init_plugin_loader(paths)
