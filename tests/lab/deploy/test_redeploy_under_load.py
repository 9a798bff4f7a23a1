"""Redeploying a changed data path under load loses no packet (benchmarks/redeploy_under_load.py, shortened).

A lab deployed by site.yml is redeployed with changed compile-time defines while 10 kpps UDP
streams run r1h1 -> r2h1 and back: the programs are rebuilt (once on the controller for the
object loader, on every host for bcc) and every host replaces them in place (tc replace), and not
one packet may be lost, with either loader and through either playbook: the object loader's
redeploy runs playbooks/datapath.yml (the data path alone), bcc's runs site.yml (everything). The programs must really have been replaced: a new program id
at every attach point of every host, and a change reported by every host. Run with -s to see
the figures.
"""

from __future__ import annotations

import pytest
from redeploy_under_load import DATAPATH, SITE, format_table, run_benchmark  # benchmarks/

HOSTS = ('r1h1', 'r1h2', 'r2h1', 'r2h2')


@pytest.mark.slow
@pytest.mark.parametrize('loader, playbook', [('object', DATAPATH), ('bcc', SITE)], ids=['object', 'bcc'])
def test_redeploy_replaces_every_program_without_loss(loader, playbook):
    report = run_benchmark(pps=10_000, lead=0.5, tail=0.5, baseline=2.0, defines={'EDGEFT_SEEN_RES_NS': 200000},
                           loader=loader, playbook=playbook)
    print('\n' + format_table(report))

    redeploy = report['redeploy']
    assert set(redeploy['changed']) == set(HOSTS)
    assert all(changed > 0 for changed in redeploy['changed'].values()), redeploy['changed']
    for host in HOSTS:
        points = redeploy['programs'][host]
        # fab0/fab1 x ingress/egress, each with a new program id.
        assert len(points) == 4 and all(p['replaced'] for p in points.values()), (host, points)
    assert redeploy['all_replaced']

    for run in ('redeploy', 'baseline'):
        for stream in report['runs'][run]['streams']:
            assert stream['sent'] > 0 and stream['lost'] == 0 and stream['socket_drops'] == 0, (run, stream)
