"""The collection builds into a clean tarball that ansible-galaxy installs."""

import os
import subprocess
import tarfile

from repo import REPO, collections_path

ROOT = str(REPO)

# What a user's install must not carry: build and test clutter.
FORBIDDEN_PREFIXES = ('.venv', '.build', '.git', '.ci', '.pytest_cache', '.ruff_cache', '.ansible', 'tests', 'pytest.ini')


def test_build_and_install(tmp_path):
    out = tmp_path / 'dist'
    subprocess.run(['ansible-galaxy', 'collection', 'build', '--output-path', str(out), ROOT],
                   check=True, capture_output=True, text=True)
    tarballs = list(out.glob('edgeft-failover-*.tar.gz'))
    assert len(tarballs) == 1
    with tarfile.open(tarballs[0]) as tar:
        names = tar.getnames()
    assert 'galaxy.yml' not in names and 'MANIFEST.json' in names
    for wanted in ('plugins/connection/netns.py', 'plugins/modules/plane_info.py', 'roles/preflight/tasks/main.yml',
                   'playbooks/site.yml', 'meta/runtime.yml', 'README.md'):
        assert wanted in names, wanted
    clutter = [n for n in names if n.startswith(FORBIDDEN_PREFIXES) or '__pycache__' in n or n.endswith('.pyc')]
    assert clutter == []

    dest = tmp_path / 'collections'
    # Only the fresh path is configured, so the checkout's own link does not count as installed.
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(dest))
    subprocess.run(['ansible-galaxy', 'collection', 'install', '--offline', '-p', str(dest), str(tarballs[0])],
                   check=True, capture_output=True, text=True, env=env)
    installed = dest / 'ansible_collections' / 'edgeft' / 'failover'
    assert (installed / 'MANIFEST.json').is_file()
    listing = subprocess.run(['ansible-galaxy', 'collection', 'list', '-p', str(dest), 'edgeft.failover'],
                             check=True, capture_output=True, text=True, env=env)
    assert 'edgeft.failover' in listing.stdout


def test_connection_plugin_documentation_renders():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path())
    out = subprocess.run(['ansible-doc', '-t', 'connection', 'edgeft.failover.netns'],
                         check=True, capture_output=True, text=True, env=env)
    assert 'network namespace' in out.stdout.lower()
