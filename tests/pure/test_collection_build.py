"""The collection builds into a clean tarball, and what it ships works from an installed copy.

Built with ansible-galaxy, installed into a temporary collections path, and used from outside
the checkout (a temporary working directory, only the installed path configured): every shipped
launcher answers --help, ansible-doc renders every module, plugin and role, and every shipped
playbook passes --syntax-check by its FQCN. The checkout's own tools (labs, molecule, bootstrap)
are left out of the tarball (galaxy.yml's build_ignore).
"""

import json
import os
import subprocess
import sys
import tarfile

import pytest
import yaml

from repo import REPO, collections_path

ROOT = str(REPO)

# What a user's install must not carry: build and test clutter, and the checkout's own tools.
FORBIDDEN_PREFIXES = ('.venv', '.build', '.git', '.ci', '.pytest_cache', '.ruff_cache', '.ansible', 'tests', 'pytest.ini',
                      'lab/', 'molecule/', 'scripts/', 'demo/', 'bin/edgeft-lab', 'bin/edgeft-demo', 'bin/edgeft-vm',
                      'inventories/lab', 'inventories/vm', 'ansible.cfg')


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    """(tarball member names, installed collection dir, environment with only the install configured)."""
    tmp = tmp_path_factory.mktemp('build')
    out = tmp / 'dist'
    subprocess.run(['ansible-galaxy', 'collection', 'build', '--output-path', str(out), ROOT],
                   check=True, capture_output=True, text=True)
    tarballs = list(out.glob('edgeft-failover-*.tar.gz'))
    assert len(tarballs) == 1
    with tarfile.open(tarballs[0]) as tar:
        names = tar.getnames()
    dest = tmp / 'collections'
    # Only the fresh path is configured, and no ansible.cfg of the checkout: what a user has.
    env = {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_')}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(dest), ANSIBLE_NOCOLOR='1', ANSIBLE_LOCAL_TEMP=str(tmp / 'ansible-tmp'))
    subprocess.run(['ansible-galaxy', 'collection', 'install', '--offline', '-p', str(dest), str(tarballs[0])],
                   check=True, capture_output=True, text=True, env=env, cwd=tmp)
    return names, dest / 'ansible_collections' / 'edgeft' / 'failover', env


def run(argv, env, cwd):
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, check=False, stdin=subprocess.DEVNULL)


def test_the_tarball_holds_the_collection_and_no_checkout_tools(installed):
    names, path, env = installed
    assert 'galaxy.yml' not in names and 'MANIFEST.json' in names
    for wanted in ('plugins/connection/netns.py', 'plugins/modules/plane_info.py', 'roles/preflight/tasks/main.yml',
                   'playbooks/site.yml', 'meta/runtime.yml', 'README.md', 'bin/edgeft-agent', 'bpf/failover_tc.c',
                   'monitoring/prometheus/edgeft-alerts.yml', 'inventories/production.example.yml'):
        assert wanted in names, wanted
    clutter = [n for n in names if n.startswith(FORBIDDEN_PREFIXES) or '__pycache__' in n or n.endswith('.pyc')]
    assert clutter == []
    listing = run(['ansible-galaxy', 'collection', 'list', 'edgeft.failover'], env, path.parent)
    assert 'edgeft.failover' in listing.stdout, listing.stdout + listing.stderr


def test_every_shipped_launcher_runs_from_the_install(installed, tmp_path):
    _names, path, env = installed
    launchers = sorted(os.listdir(path / 'bin'))
    assert launchers == ['edgeft-agent']
    for launcher in launchers:
        for argv in (['--help'], ['--version']):
            proc = run([sys.executable, str(path / 'bin' / launcher)] + argv, env, tmp_path)
            assert proc.returncode == 0 and proc.stdout, (launcher, argv, proc.stderr)
    assert run([sys.executable, str(path / 'bin' / 'edgeft-agent'), '--version'], env, tmp_path).stdout.startswith('edgeft-agent ')


def _plugins(path, kind, suffix):
    folder = path / 'plugins' / kind
    return sorted('edgeft.failover.' + f[:-len(suffix)] for f in os.listdir(folder)
                  if f.endswith(suffix) and not f.startswith('_'))


def test_ansible_doc_renders_every_plugin_and_role_of_the_install(installed, tmp_path):
    _names, path, env = installed
    kinds = {
        'module': _plugins(path, 'modules', '.py'),
        'connection': _plugins(path, 'connection', '.py'),
        'filter': _plugins(path, 'filter', '.yml'),
        'role': sorted('edgeft.failover.' + r for r in os.listdir(path / 'roles')),
    }
    for kind, plugins in kinds.items():
        assert plugins, kind
        proc = run(['ansible-doc', '-t', kind, '--json'] + plugins, env, tmp_path)
        assert proc.returncode == 0, (kind, proc.stderr[-3000:])
        docs = json.loads(proc.stdout)
        assert sorted(docs) == plugins, (kind, sorted(set(plugins) - set(docs)))
        assert not [name for name, doc in docs.items() if not doc], kind


def test_every_shipped_playbook_parses_by_its_fqcn(installed, tmp_path):
    _names, path, env = installed
    playbooks = sorted(f[:-4] for f in os.listdir(path / 'playbooks') if f.endswith('.yml'))
    assert 'site' in playbooks
    inventory = tmp_path / 'hosts.yml'
    inventory.write_text(yaml.safe_dump({'all': {'children': {'fabric': {'hosts': {'h1': None}}, 'switches': {}}}}))
    for playbook in playbooks:
        proc = run(['ansible-playbook', '-i', str(inventory), '--syntax-check', 'edgeft.failover.' + playbook], env, tmp_path)
        assert proc.returncode == 0, (playbook, proc.stdout[-2000:] + proc.stderr[-2000:])


def test_connection_plugin_documentation_renders():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path())
    out = subprocess.run(['ansible-doc', '-t', 'connection', 'edgeft.failover.netns'],
                         check=True, capture_output=True, text=True, env=env)
    assert 'network namespace' in out.stdout.lower()
