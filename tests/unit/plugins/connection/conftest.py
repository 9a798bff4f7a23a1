"""Make edgeft.failover.* importable through Ansible's collection loader in this pytest process."""

from __future__ import annotations

import os
import pathlib
import tempfile
import warnings

COLLECTION_ROOT = pathlib.Path(__file__).resolve().parents[4]


def _collections_path() -> str:
    # Checked out as .../ansible_collections/edgeft/failover (e.g. an ansible-test copy)?
    if COLLECTION_ROOT.parent.parent.name == 'ansible_collections':
        return str(COLLECTION_ROOT.parent.parent.parent)
    built = COLLECTION_ROOT / '.build' / 'collections'
    if (built / 'ansible_collections' / 'edgeft' / 'failover').exists():
        return str(built)
    # A bare checkout: link it into a throwaway collections tree.
    tmp = pathlib.Path(tempfile.mkdtemp(prefix='edgeft-collections-'))
    (tmp / 'ansible_collections' / 'edgeft').mkdir(parents=True)
    (tmp / 'ansible_collections' / 'edgeft' / 'failover').symlink_to(COLLECTION_ROOT)
    return str(tmp)


def pytest_configure(config):
    from ansible.plugins.loader import init_plugin_loader
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    if AnsibleCollectionConfig.collection_finder is None:
        paths = [_collections_path()]
        paths += [p for p in os.environ.get('ANSIBLE_COLLECTIONS_PATH', '').split(os.pathsep) if p]
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            init_plugin_loader(paths)
