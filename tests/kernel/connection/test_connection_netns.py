"""Runs tests/integration/targets/connection_netns/test_connection.yml against a host in a
throwaway network namespace, with pipelining on and off, and checks the play recap.

The namespace holds loopback and a veth pair created inside it: the machine's own interfaces are
never touched.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid

import pytest
from repo import REPO

ROOT = REPO
TARGET = ROOT / 'tests' / 'integration' / 'targets' / 'connection_netns'
VETH = ('itv0', 'itv1')
RECAP = re.compile(
    r'^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)\s+'
    r'failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)\s+rescued=(?P<rescued>\d+)\s+ignored=(?P<ignored>\d+)',
    re.MULTILINE)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason='network namespaces need root'),
    pytest.mark.skipif(shutil.which('ansible-playbook') is None, reason='ansible-playbook not on PATH'),
]


@pytest.fixture(scope='module')
def nsname():
    from pyroute2 import NetNS, netns

    name = f'eft-it-{uuid.uuid4().hex[:10]}'
    netns.create(name)
    try:
        with NetNS(name) as ns:
            ns.link('add', ifname=VETH[0], kind='veth', peer=VETH[1])
            for ifname in ('lo',) + VETH:
                ns.link('set', index=ns.link_lookup(ifname=ifname)[0], state='up')
            ns.addr('add', index=ns.link_lookup(ifname=VETH[0])[0], address='198.18.251.1', prefixlen=30)
        yield name
    finally:
        netns.remove(name)


def _collections_path() -> str:
    if ROOT.parent.parent.name == 'ansible_collections':
        return str(ROOT.parent.parent.parent)
    return str(ROOT / '.build' / 'collections')


def _env(nsname: str, pipelining: bool) -> dict[str, str]:
    env = dict(os.environ)
    paths = [_collections_path()] + [p for p in env.get('ANSIBLE_COLLECTIONS_PATH', '').split(os.pathsep) if p]
    env.update({
        'ANSIBLE_COLLECTIONS_PATH': os.pathsep.join(paths),
        'ANSIBLE_CONFIG': env.get('ANSIBLE_CONFIG') or str(ROOT / 'ansible.cfg'),
        'ANSIBLE_PIPELINING': '1' if pipelining else '0',
        'ANSIBLE_NOCOLOR': '1',
        'ANSIBLE_FORCE_COLOR': '0',
        'ANSIBLE_STDOUT_CALLBACK': 'ansible.builtin.default',
        'ANSIBLE_RETRY_FILES_ENABLED': '0',
        'EDGEFT_TEST_NETNS': nsname,
    })
    return env


@pytest.mark.parametrize('pipelining', [True, False], ids=['pipelining', 'no-pipelining'])
def test_playbook(nsname, tmp_path, pipelining):
    cmd = [
        'ansible-playbook', '-vvv',
        '-i', str(TARGET / 'inventory.yml'),
        str(TARGET / 'test_connection.yml'),
        '-e', f'netns_work_dir={tmp_path}',
        '-e', json.dumps({'netns_expected_interfaces': ['lo', *VETH]}),
    ]
    proc = subprocess.run(cmd, cwd=TARGET, env=_env(nsname, pipelining), capture_output=True,
                          text=True, errors='replace', timeout=600, check=False)
    out = proc.stdout + proc.stderr
    tail = out[-6000:]
    assert proc.returncode == 0, tail

    recap = {m['host']: {k: int(v) for k, v in m.groupdict().items() if k != 'host'} for m in RECAP.finditer(out)}
    assert set(recap) == {'localhost', 'netns_target'}, tail
    for host, counts in recap.items():
        assert counts['failed'] == counts['unreachable'] == counts['rescued'] == counts['ignored'] == 0, (host, tail)
    assert recap['netns_target']['ok'] >= 20, tail
    assert 'fatal:' not in out

    # The files made the round trip byte for byte (beyond the playbook's checksums).
    for name in ('all-bytes.bin', 'ünïcödé-名前.bin'):
        assert (tmp_path / 'fetched' / name).read_bytes() == (tmp_path / 'src' / name).read_bytes()

    # Pipelining really was on or off: without it, modules are uploaded (PUT ... AnsiballZ_setup.py).
    module_upload = re.search(r'PUT \S+ TO \S+/AnsiballZ_setup\.py', out)
    assert bool(module_upload) is not pipelining, tail
