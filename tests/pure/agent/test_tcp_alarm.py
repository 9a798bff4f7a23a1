"""A retransmission of a TCP connection to a peer (the TCP program's record) raises an alarm on the
peer's paths: each is probed at once and then every confirm_interval_ms until it answers or is
judged down. The agent's own alarm (agent/tcp.py) and cadence (agent/cadence.py) on the test's
clock (probe_loop). The records themselves come from the kernel:
tests/kernel/modules/test_tcp_program.py."""

from __future__ import annotations

from probe_loop import MS, PEER, ProbeLoop


def Loop(active, silent, **settings):
    return ProbeLoop(active=active, silent=silent, idle_interval_ms=1000, **settings)


def test_a_retransmission_to_an_idle_peer_confirms_its_path_at_once():
    """A peer not (yet) counted as having traffic is probed every idle_interval_ms; its
    connection's first RTO (16 ms after the loss) starts the confirmation: down 6 ms later,
    instead of after the next idle probes."""
    loop = Loop(active=False, silent=lambda now: now >= MS).run(2000, alarm_at_ms=16)
    assert loop.sends == [0, 16, 18, 20, 22] and loop.down_at == 22 and loop.path.alarms == 1
    # Without the record: the next idle probe, a second later, goes unanswered, and is judged a
    # second after that.
    assert Loop(active=False, silent=lambda now: now >= MS).run(3000).down_at > 2000


def test_an_answered_alarm_costs_one_probe_and_the_cadence_resumes():
    loop = Loop(active=True, silent=lambda now: False).run(60, alarm_at_ms=15)
    assert loop.down_at is None and loop.sends == [0, 10, 15, 17, 27, 37, 47, 57]
    assert loop.path.alarms == 1 and not loop.path.alarm


def test_an_alarm_waits_for_the_probe_just_sent_and_a_second_changes_nothing():
    loop = Loop(active=True, silent=lambda now: False)
    loop.run(10)  # probes at 0 and 10
    loop.alarm(PEER, 11 * MS)
    assert loop.path.timer.deadline == 12 * MS  # the probe of 10 ms gets its confirmation step
    loop.alarm(PEER, 12 * MS)
    assert loop.path.timer.deadline == 12 * MS and loop.path.alarms == 1


def test_a_path_judged_down_is_not_alarmed():
    loop = Loop(active=True, silent=lambda now: False)
    loop.path.judge.fail(0)
    loop.alarm(PEER, 5 * MS)
    assert not loop.path.alarm and loop.path.alarms == 0
