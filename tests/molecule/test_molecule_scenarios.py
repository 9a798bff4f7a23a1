"""The molecule scenarios, run as they are in a user's CI: `molecule test -s NAME`."""

import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_molecule_default_scenario():
    if os.geteuid() != 0:
        pytest.skip('the namespace lab needs root')
    proc = subprocess.run(['molecule', 'test', '-s', 'default'], cwd=ROOT, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=900, check=False)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-8000:]
    # The idempotence step must have run and found nothing to change.
    assert 'idempotence' in log
