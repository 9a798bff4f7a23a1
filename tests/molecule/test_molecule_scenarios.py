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


@pytest.mark.slow
def test_molecule_maintenance_scenario():
    """Rolling maintenance of every ToR, each powered off while drained, under UDP and TCP traffic."""
    if os.geteuid() != 0:
        pytest.skip('the namespace lab needs root')
    proc = subprocess.run(['molecule', 'test', '-s', 'maintenance'], cwd=ROOT, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=1500, check=False)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-12000:]
    # The streams and the report, as the verify step printed them.
    assert 'Require no datagram lost and every TCP connection intact' in log
    assert '4 switch(es), 0 packets lost (counters), 0 failed' in log
