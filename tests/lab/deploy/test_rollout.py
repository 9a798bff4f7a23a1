"""site.yml deploys in batches and stops at a host that does not become healthy.

On a lab of its own (this test is about deploying), r2h1's port on plane a drops every packet
while its link stays up: nothing a validation or preflight can see. The rollout runs a canary
(r1h1), then one host per batch: r1h1 and r1h2 are deployed and judged healthy, r2h1 is
deployed but its gate finds plane a silent towards the peers already deployed, so the rollout
stops there, naming r2h1 and why; r2h2, in the next batch, is left exactly as it was.
"""

import pytest
from deploy_helpers import ONE_LINE_RESULTS, failure_messages, pinned, run_playbook
from edgeft_lab import Fault
from edgeft_lab.agents import host_vars
from host_snapshot import differences, host_snapshot

NICS = ('lo', 'fab0', 'fab1')
ROLLOUT = ['-e', 'edgeft_rollout_canary=true', '-e', 'edgeft_rollout_batch=1', '-e', 'edgeft_rollout_gate_timeout=6']


@pytest.fixture
def rollout_lab(fresh_lab):
    fresh_lab.fault(Fault('loss', host='r2h1', plane='a', percent=100))
    try:
        yield fresh_lab
    finally:
        fresh_lab.repair_all()


def test_a_rollout_stops_at_the_first_unhealthy_host_and_leaves_the_next_batch_untouched(rollout_lab):
    lab = rollout_lab
    state_dir = host_vars(lab.inventory_path, 'r2h2')['edgeft_state_dir']
    before = host_snapshot(lab, 'r2h2', NICS, state_dir)

    rc, out, recap = run_playbook(lab.inventory_path, 'playbooks/site.yml', *ROLLOUT, env=ONE_LINE_RESULTS)

    assert rc != 0, out[-3000:]
    failures = failure_messages(out)
    assert list(failures) == ['r2h1'], out[-3000:]
    (message,) = failures['r2h1']
    assert message.startswith('r2h1 is not healthy 6 s after its deployment, so the rollout stops here'), message
    assert 'plane a: check probes unanswered or lost by 2 of 2 peers: r1h1, r1h2' in message, message
    assert 'plane b' not in message, message

    # The canary alone first (no peer deployed to answer it), then one host per batch.
    assert 'r1h1 is healthy: 2 planes, 3 peers, 0 of them answering, the agent not judged' in out, out[-3000:]
    assert 'r1h2 is healthy: 2 planes, 3 peers, 1 of them answering, the agent not judged' in out, out[-3000:]
    for host in ('r1h1', 'r1h2', 'r2h1'):
        assert pinned(lab, host), '%s was not deployed' % host
    assert 'r2h2' not in recap or recap['r2h2'] == (0, 0), recap
    changed = differences(before, host_snapshot(lab, 'r2h2', NICS, state_dir))
    assert not changed, 'the rollout touched r2h2 after stopping at r2h1:\n%s' % '\n'.join(changed)
