"""edgeft.failover.ebpf_program through ansible-playbook and the netns connection.

A throwaway namespace holds two veth pairs (the plane NICs); a private bpffs
outside /sys (which `ip netns exec` remounts) holds the pins. The module runs
on the target's interpreter (/usr/bin/python3, Debian's pyroute2 and bcc).
The playbook runs twice: the first run attaches (changed), the second finds
everything in place (changed=0, same program ids). A third run removes it all.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from ebpf_program_env import environment_problem
from nshost import bpffs, veth_netns
from repo import REPO, playbook_env

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import layout

RECAP = re.compile(r'^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)\s+'
                   r'failed=(?P<failed>\d+)', re.MULTILINE)
PROG_IDS = re.compile(r'EDGEFT_PROG_IDS=([0-9,]+)')

PLAYBOOK = '''
- name: Attach or remove the edgeft data path in a namespace
  hosts: target
  gather_facts: false
  tasks:
    - name: Run ebpf_program
      edgeft.failover.ebpf_program:
        state: "{{ ebpf_state }}"
        src: "{{ ebpf_src }}"
        pin_root: "{{ ebpf_pin_root }}"
        state_dir: "{{ ebpf_state_dir }}"
        unpin_maps: true
        attach:
          - {interface: fab0, direction: egress, plane: 0}
          - {interface: fab0, direction: ingress, plane: 0}
          - {interface: fab1, direction: egress, plane: 1}
          - {interface: fab1, direction: ingress, plane: 1}
      register: ebpf

    - name: Report the program ids
      ansible.builtin.debug:
        msg: "EDGEFT_PROG_IDS={{ ebpf.programs | map(attribute='prog_id') | join(',') }}"
      when: ebpf_state == 'present'

    - name: Check the result
      ansible.builtin.assert:
        that:
          - ebpf.programs | length == (4 if ebpf_state == 'present' else 0)
          - ebpf.pin_paths | length == ((ebpf_map_count | int) if ebpf_state == 'present' else 0)
'''

pytestmark = [
    pytest.mark.skipif(environment_problem() is not None, reason=environment_problem() or ''),
    pytest.mark.skipif(shutil.which('ansible-playbook') is None, reason='ansible-playbook not on PATH'),
]


@pytest.fixture
def nsname():
    with veth_netns('eft-it-ebpf', [('fab0', 'fab0p', []), ('fab1', 'fab1p', [])]) as name:
        yield name


def _playbook(tmp_path, nsname, bpffs, state):
    (tmp_path / 'inventory.yml').write_text(
        'all:\n  hosts:\n    target:\n      ansible_connection: edgeft.failover.netns\n'
        '      ansible_host: %s\n      ansible_python_interpreter: /usr/bin/python3\n' % nsname)
    (tmp_path / 'play.yml').write_text(PLAYBOOK)
    cmd = ['ansible-playbook', '-i', str(tmp_path / 'inventory.yml'), str(tmp_path / 'play.yml'),
           '-e', 'ebpf_state=%s' % state, '-e', 'ebpf_map_count=%d' % len(layout.MAPS), '-e', 'ebpf_src=%s' % (REPO / 'bpf' / 'failover_tc.c'),
           '-e', 'ebpf_pin_root=%s/host' % bpffs, '-e', 'ebpf_state_dir=%s' % (tmp_path / 'state')]
    proc = subprocess.run(cmd, cwd=tmp_path, env=playbook_env(), capture_output=True, text=True, errors='replace',
                          timeout=600, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    recap = {m['host']: m for m in RECAP.finditer(out)}
    assert set(recap) == {'target'}, out[-6000:]
    assert recap['target']['failed'] == '0' and recap['target']['unreachable'] == '0', out[-6000:]
    ids = PROG_IDS.search(out)
    return int(recap['target']['changed']), ids.group(1) if ids else None, out


def _tc(nsname, *args):
    return subprocess.run(['ip', 'netns', 'exec', nsname, 'tc'] + list(args), check=True,
                          capture_output=True, text=True).stdout


def test_playbook_attaches_then_is_idempotent_then_removes(nsname, tmp_path):
    with bpffs(tmp_path / 'bpffs') as pins:
        changed, first_ids, out = _playbook(tmp_path, nsname, pins, 'present')
        assert changed == 1, out[-6000:]
        assert first_ids and all(int(i) > 0 for i in first_ids.split(',')) and len(first_ids.split(',')) == 4
        for dev in ('fab0', 'fab1'):
            for direction in ('ingress', 'egress'):
                assert 'edgeft:edgeft_%s:' % direction in _tc(nsname, 'filter', 'show', 'dev', dev, direction)

        changed, second_ids, out = _playbook(tmp_path, nsname, pins, 'present')
        assert changed == 0, out[-6000:]
        assert second_ids == first_ids  # nothing was reloaded

        changed, _unused, out = _playbook(tmp_path, nsname, pins, 'absent')
        assert changed == 1, out[-6000:]
        for dev in ('fab0', 'fab1'):
            assert 'clsact' not in _tc(nsname, 'qdisc', 'show', 'dev', dev)
        assert not os.path.exists(os.path.join(pins, 'host'))
