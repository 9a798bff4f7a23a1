"""The failover benchmark, shortened (benchmarks/failover_matrix.py): two faults in every mode,
on L2 planes and on routed planes (where edgeft steers by translating to failover addresses).

One lab per fabric, one deployment: a sender-side carrier loss and a silent receiver ToR,
each without protection, with kernel backup routes (L2 only: a routed plane b does not
carry plane a's prefixes) and with edgeft, under 10 kpps UDP and 50 Mbit/s TCP
r1h1 -> r2h1's plane-a address, plus a few seconds without a fault. It asserts what each
mode really does to the network's outage (the span of send times that lost every packet: a
sender paused on a loaded machine makes an arrival gap, not an outage): edgeft keeps it
within 10 ms (carrier loss) and 100 ms (silent switch) with the TCP connection intact;
backup routes handle the carrier loss only; no protection loses the fault's whole duration. Run with -s to see the table.
"""

from __future__ import annotations

import os

import pytest
from failover_matrix import format_table, run_benchmark  # benchmarks/

if os.geteuid() != 0:
    pytest.skip('the failover benchmark needs root (namespaces, tc, bpf)', allow_module_level=True)

FAULT_SECONDS = 1.0


@pytest.fixture(scope='module', params=['l2', 'routed'])
def report(request):
    report = run_benchmark(faults=['sender-link', 'silent-tor'], family=4, pps=10_000, lead=0.3,
                           fault_seconds=FAULT_SECONDS, tail=1.0, quiet=3.0, topology=request.param)
    print('\n' + format_table(report))
    return report


def run(report, fault, mode):
    [found] = [r for r in report['runs'] if r['fault'] == fault and r['mode'] == mode]
    return found


@pytest.mark.slow
def test_every_run_was_measured(report):
    baseline = [('sender-link', 'backup-routes'), ('silent-tor', 'backup-routes')] if report['fabric'] == 'l2' else []
    assert [(r['fault'], r['mode']) for r in report['runs']] == [
        ('sender-link', 'none'), ('silent-tor', 'none'), *baseline,
        ('no-fault', 'edgeft'), ('sender-link', 'edgeft'), ('silent-tor', 'edgeft'),
    ]
    for r in report['runs']:
        # The receiver kept up: the losses below are the network's.
        assert r['udp']['sent'] > 0 and r['udp']['socket_drops'] == 0, (r['fault'], r['mode'])


@pytest.mark.slow
def test_edgeft_keeps_the_gap_short_and_tcp_alive(report):
    link, silent = run(report, 'sender-link', 'edgeft'), run(report, 'silent-tor', 'edgeft')
    assert link['udp']['max_outage_ms'] <= 10.0, link['udp']
    assert silent['udp']['max_outage_ms'] <= 100.0, silent['udp']
    for r in (link, silent):
        assert r['tcp']['resets'] == 0 and r['tcp']['survived'], r['tcp']
        assert r['failovers'] >= 1, r['events']


@pytest.mark.slow
def test_no_failover_without_a_fault(report):
    quiet = run(report, 'no-fault', 'edgeft')
    assert quiet['failovers'] == 0, quiet['events']
    assert quiet['udp']['lost'] == 0, quiet['udp']


@pytest.mark.slow
def test_no_protection_loses_the_fault(report):
    for fault in ('sender-link', 'silent-tor'):
        udp = run(report, fault, 'none')['udp']
        # At 10 kpps the fault's duration alone is FAULT_SECONDS * 10000 packets.
        assert udp['lost'] >= 0.8 * FAULT_SECONDS * 10_000, (fault, udp['lost'])
        assert udp['max_outage_ms'] >= 0.8 * FAULT_SECONDS * 1000, (fault, udp['max_outage_ms'])


@pytest.mark.slow
def test_backup_routes_handle_carrier_loss_only(report):
    if report['fabric'] == 'routed':
        assert 'backup-routes' not in report['modes']  # not a routed technique: see the module docstring
        return
    link, silent = run(report, 'sender-link', 'backup-routes'), run(report, 'silent-tor', 'backup-routes')
    unprotected = run(report, 'sender-link', 'none')['udp']
    # Carrier loss on the sender's NIC: the kernel takes the fab1 route at once.
    assert link['udp']['max_outage_ms'] <= unprotected['max_outage_ms'] / 10, (link['udp']['max_outage_ms'], unprotected['max_outage_ms'])
    assert link['udp']['lost'] <= unprotected['lost'] / 10, (link['udp']['lost'], unprotected['lost'])
    # A silent switch leaves every carrier up: nothing moves, as without protection.
    assert silent['udp']['lost'] >= 0.8 * FAULT_SECONDS * 10_000, silent['udp']['lost']
    assert silent['udp']['max_outage_ms'] >= 0.8 * FAULT_SECONDS * 1000, silent['udp']['max_outage_ms']
