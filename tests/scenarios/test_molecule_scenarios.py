"""The molecule scenarios, run as they are in a user's CI: `molecule test -s NAME`."""

import os
import re
import signal
import subprocess

import pytest
from repo import REPO

ROOT = str(REPO)


def molecule_test(scenario, timeout):
    """`molecule test -s scenario`: (return code, stdout + stderr). molecule runs in a process
    group of its own: past the timeout the whole group (ansible-playbook, the lab's helpers) is
    ended and `molecule destroy` removes what the scenario built (labs, VMs), so nothing of a
    timed-out scenario keeps running beside the next test. The timeout then fails the test."""
    proc = subprocess.Popen(['molecule', 'test', '-s', scenario], cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _unused = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, _unused = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _unused = proc.communicate()
        destroyed = subprocess.run(['molecule', 'destroy', '-s', scenario], cwd=ROOT, stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True, timeout=600, check=False)
        pytest.fail('molecule test -s %s took more than %d s; destroyed (rc %d).\n%s' % (
            scenario, timeout, destroyed.returncode, (out or '')[-8000:]))


def assert_maintained_without_loss(log):
    """The streams and the report, as molecule/default/maintenance.yml printed them."""
    assert 'Require no datagram lost and every TCP connection intact' in log
    assert '4 switch(es), 0 packets lost (counters), 0 failed' in log


@pytest.mark.slow
def test_molecule_default_scenario():
    """site.yml converges and is idempotent on the namespace lab; verify checks every host, then
    maintains every ToR, a plane (two ToRs) at a time, each powered off while drained, under UDP
    and TCP traffic (what the scenario `maintenance` did on its own before: one lab and one
    converge for both)."""
    if os.geteuid() != 0:
        pytest.skip('the namespace lab needs root')
    rc, log = molecule_test('default', timeout=1500)
    assert rc == 0, log[-12000:]
    # The idempotence step must have run and found nothing to change.
    assert 'idempotence' in log
    assert_maintained_without_loss(log)


@pytest.mark.slow
def test_molecule_maintenance_routed_scenario():
    """The rolling maintenance on routed planes: traffic crosses the other plane translated."""
    if os.geteuid() != 0:
        pytest.skip('the namespace lab needs root')
    rc, log = molecule_test('maintenance_routed', timeout=1500)
    assert rc == 0, log[-12000:]
    assert_maintained_without_loss(log)


@pytest.mark.slow
def test_molecule_vm_scenario():
    """Two Debian VMs under qemu, each with a bond and the eBPF failover on the distro kernel,
    through a reboot and switch faults, then the uninstall of one, which must leave it as it was
    before site.yml. The image is built from Debian packages on first use, then cached by its
    inputs."""
    if os.geteuid() != 0:
        pytest.skip('the VM lab needs root')
    logs = '/var/log/edgeft-vm'
    before = set(os.listdir(logs)) if os.path.isdir(logs) else set()
    rc, log = molecule_test('vm', timeout=2400)
    kept = sorted(set(os.listdir(logs)) - before) if os.path.isdir(logs) else []
    assert rc == 0, log[-12000:] + '\nVM serial consoles kept in: ' + ', '.join(
        os.path.join(logs, k) for k in kept)
    # The idempotence check ran after the reboot of r1h1 (an eBPF and a bond host at once), and
    # verify failed sw-a and sw-c over twice (power-off, then silent).
    log = re.sub(r'\x1b\[[0-9;]*m', '', log)  # molecule colours its own lines
    assert log.index('The host did reboot') < log.index('idempotence: Executing'), log[-4000:]
    assert log.count('TASK [Every peer answers every ping while sw-a and sw-c stay down]') == 2, log[-4000:]
    # The uninstall ran on r2h1 after the faults and was compared with the snapshot from before site.yml.
    assert log.index('TASK [Take the host\'s snapshot]') < log.index('converge: Executing'), log[-4000:]
    assert log.index('TASK [Fail sw-a and sw-c]') < log.index('TASK [Require the host as it was before site.yml]'), log[-4000:]
