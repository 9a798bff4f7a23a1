"""The rolling deployment's settings: the batches site.yml runs, and the refusals it makes on
every host before any change (filters rollout_serial and rollout_refusal)."""

from __future__ import annotations

import pytest
from ansible_collections.edgeft.failover.plugins.module_utils import rollout

DEFAULTS = {"canary": True, "batch": "25%", "max_fail_percentage": 0, "gate_timeout": 60}


def with_(**changes):
    return dict(DEFAULTS, **changes)


@pytest.mark.parametrize("values, batches", [
    (DEFAULTS, [1, "25%"]),
    ({}, [1, "25%"]),
    (with_(canary=False, batch="100%"), ["100%"]),
    (with_(canary="no", batch=10), [10]),
    (with_(batch="5"), [1, 5]),
    (with_(batch=" 50 % "), [1, "50%"]),
    (with_(canary="True"), [1, "25%"]),
])
def test_serial_is_a_canary_then_the_batches(values, batches):
    assert rollout.serial(values) == batches
    assert rollout.refusal(values) == ""


@pytest.mark.parametrize("values, names", [
    (with_(batch=0), ["edgeft_rollout_batch", "0 hosts"]),
    (with_(batch="0%"), ["edgeft_rollout_batch", "1% to 100%"]),
    (with_(batch="150%"), ["edgeft_rollout_batch", "150%"]),
    (with_(batch="-1"), ["edgeft_rollout_batch", "neither a host count nor a percentage"]),
    (with_(batch="a quarter"), ["edgeft_rollout_batch"]),
    (with_(batch=[1, 2]), ["edgeft_rollout_batch", "not an integer"]),
    (with_(canary="maybe"), ["edgeft_rollout_canary", "not a boolean"]),
    (with_(max_fail_percentage=101), ["edgeft_rollout_max_fail_percentage", "out of range"]),
    (with_(max_fail_percentage=-1), ["edgeft_rollout_max_fail_percentage"]),
    (with_(gate_timeout=0), ["edgeft_rollout_gate_timeout", "out of range (1 to 3600)"]),
    (with_(gate_timeout="soon"), ["edgeft_rollout_gate_timeout", "not an integer"]),
    (with_(gate_timeout=True), ["edgeft_rollout_gate_timeout", "not an integer"]),
])
def test_settings_that_cannot_work_are_refused_naming_the_variable(values, names):
    refusal = rollout.refusal(values)
    for name in names:
        assert name in refusal
    with pytest.raises(rollout.RolloutError):
        rollout.serial(values)
