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

import pytest
from nshost import veth_netns
from repo import REPO, playbook_env

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
    with veth_netns('eft-it', [(VETH[0], VETH[1], ['198.18.251.1/30'])], lo_up=True) as name:
        yield name


def _env(nsname: str, pipelining: bool) -> dict[str, str]:
    return playbook_env(ANSIBLE_PIPELINING='1' if pipelining else '0', EDGEFT_TEST_NETNS=nsname)


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
