"""playbooks/site.yml on a fresh lab: --check changes nothing, a run deploys, a second run changes nothing."""

from conftest import pinned, run_playbook, tc_filters

HOSTS = ('r1h1', 'r1h2', 'r2h1', 'r2h2')


def test_check_then_deploy_then_idempotent(fresh_lab):
    lab = fresh_lab

    rc, out, recap = run_playbook(lab.inventory_path, 'playbooks/site.yml', '--check')
    assert rc == 0, out[-6000:]
    assert set(recap) == set(HOSTS)
    assert all(changed > 0 for changed, _failed in recap.values()), recap
    assert 'would be rebuilt and replaced in place' in out
    for host in HOSTS:
        assert pinned(lab, host) == [], 'check mode pinned maps on %s' % host
        for ifname in ('fab0', 'fab1'):
            assert 'edgeft' not in tc_filters(lab, host, ifname, 'egress')

    rc, out, recap = run_playbook(lab.inventory_path)
    assert rc == 0, out[-6000:]
    for host in HOSTS:
        assert 'edgeft_peers_v1' in pinned(lab, host)
        for ifname in ('fab0', 'fab1'):
            for direction in ('egress', 'ingress'):
                assert 'edgeft:edgeft_%s' % direction in tc_filters(lab, host, ifname, direction)

    rc, out, recap = run_playbook(lab.inventory_path)
    assert rc == 0, out[-6000:]
    assert recap == {host: (0, 0) for host in HOSTS}, 'second run changed something:\n' + out[-6000:]

    # The fabric still works in both families on both planes with the programs attached.
    matrix = lab.ping_matrix()
    assert matrix.ok, matrix.format()
