"""The analysis rules on synthetic runs (tests/pure/demo/conftest.py works the numbers out)."""

from __future__ import annotations

import json

import pytest

from edgeft_demo.analysis import (
    analyze_run,
    baseline_step_ms,
    delay_threshold_ms,
    is_delayed,
    job_steps,
    longest_stall_ns,
    plane_throughput,
    throughput,
)
from edgeft_demo.record import Fault, Rank, Run, Step

S = 1_000_000_000


def phases_by_name(run: Run) -> dict:
    return {p.name: p for p in analyze_run(run).phases}


# --- job-level steps and the baseline ---------------------------------------------------


def test_job_step_is_the_slowest_rank(edgeft_run, ms_from_t0):
    steps = job_steps(edgeft_run)
    assert [s.step for s in steps] == list(range(1, 201))
    step_77 = steps[76]
    # rank 1 finished step 77 last, at exactly 6000 ms, with the full 90 ms
    assert step_77.t_ns == ms_from_t0(6000)
    assert step_77.step_ms == 90.0
    assert min(s.t_ns for s in edgeft_run.ranks[0].steps if s.step == 77) < ms_from_t0(6000)


def test_job_steps_only_count_steps_every_rank_finished(reset_run):
    # rank 0 got to step 45, the others to 40
    assert len(reset_run.ranks[0].steps) == 45
    assert [s.step for s in job_steps(reset_run)] == list(range(1, 41))


def test_baseline_is_the_median_of_all_steps(without_run, edgeft_run):
    assert analyze_run(without_run).job.baseline_ms == 60.0
    assert analyze_run(edgeft_run).job.baseline_ms == 60.0


def test_baseline_ignores_slow_warm_up_and_fault_steps(make_run):
    # a slow warm-up and a stuck step are a minority: the median is the healthy step
    run = make_run("edgeft", [150.0] * 3 + [60.0] * 10 + [8000.0])
    assert baseline_step_ms(job_steps(run)) == 60.0
    assert baseline_step_ms([]) == 0.0


def test_delay_threshold():
    assert delay_threshold_ms(60) == 120  # 2 x baseline beats baseline + 50
    assert delay_threshold_ms(20) == 70  # a fast job: baseline + 50
    assert not is_delayed(120, 60)
    assert is_delayed(120.1, 60)
    assert not is_delayed(70, 20)
    assert is_delayed(71, 20)


# --- per phase: steps -------------------------------------------------------------------


def test_edgeft_phase_steps(edgeft_run):
    phases = phases_by_name(edgeft_run)
    silent, off, on = phases["silent"], phases["power-off"], phases["power-on"]
    # silent: step 34 (150 ms) and 42 steps of 90 ms; step 77 finished at 6000 ms: power-off
    assert (silent.steps, silent.delayed, silent.largest_step_ms) == (43, 1, 150.0)
    assert silent.time_lost_s == pytest.approx(0.090 + 42 * 0.030)
    # power-off: 44 steps of 90 ms, then steps 121 and 122 of 60 ms
    assert (off.steps, off.delayed, off.largest_step_ms) == (46, 0, 90.0)
    assert off.time_lost_s == pytest.approx(44 * 0.030)
    assert (on.steps, on.delayed, on.largest_step_ms, on.time_lost_s) == (78, 0, 60.0, 0.0)
    assert [p.stalled for p in (silent, off, on)] == [False, False, False]


def test_a_step_counts_in_the_phase_it_finished_in(without_run):
    # step 34 began at 1980 ms (before silent) and finished at 9980 ms (power-off)
    phases = phases_by_name(without_run)
    silent, off, on = phases["silent"], phases["power-off"], phases["power-on"]
    assert (silent.steps, silent.delayed, silent.largest_step_ms, silent.time_lost_s) == (0, 0, 0.0, 0.0)
    assert (off.steps, off.delayed, off.largest_step_ms) == (1, 1, 8000.0)
    assert off.time_lost_s == pytest.approx(7.94)
    assert (on.steps, on.delayed) == (66, 0)


# --- per phase: stalls ------------------------------------------------------------------


def test_stalls_without_edgeft(without_run):
    phases = phases_by_name(without_run)
    # no step finished in silent at all: its whole 4 s
    assert phases["silent"].stalled
    assert phases["silent"].longest_stall_s == pytest.approx(4.0)
    # power-off: from its start to step 34 at 9.98 s
    assert phases["power-off"].stalled
    assert phases["power-off"].longest_stall_s == pytest.approx(3.98)
    # power-on: steps every 60 ms until the job finished at 13.94 s, nothing after counts
    assert not phases["power-on"].stalled
    assert phases["power-on"].longest_stall_s == pytest.approx(0.06)


def test_no_stall_after_the_job_finished(make_run):
    # the job finishes at 1.2 s, before any fault phase starts
    phases = phases_by_name(make_run("edgeft", [60.0] * 20))
    assert [(p.stalled, p.longest_stall_s) for p in phases.values()] == [(False, 0.0)] * 3


def test_a_dead_job_stalls_until_the_run_ends(reset_run):
    phases = phases_by_name(reset_run)
    # last job step at 2.4 s: 3.6 s of silent, then all of power-off and power-on
    assert phases["silent"].longest_stall_s == pytest.approx(3.6)
    assert phases["power-off"].longest_stall_s == pytest.approx(4.0)
    assert phases["power-on"].longest_stall_s == pytest.approx(4.0)
    assert all(p.stalled for p in phases.values())


def test_longest_stall_counts_window_start_and_bound():
    assert longest_stall_ns([], 0, 3 * S) == 3 * S
    assert longest_stall_ns([int(0.5 * S), int(1.0 * S)], 0, int(1.2 * S)) == int(0.5 * S)
    assert longest_stall_ns([int(0.2 * S)], 0, int(2.5 * S)) == int(2.3 * S)
    assert longest_stall_ns([10 * S], 0, 5 * S) == 5 * S  # later steps do not end the stall
    assert longest_stall_ns([], 5 * S, 4 * S) == 0  # the job ended before the window


def test_a_stall_of_exactly_one_second_is_not_a_stall(make_run):
    run = make_run("edgeft", [100.0] * 19 + [1000.0] + [100.0] * 100, faults=[])
    run.faults = [Fault("silent", "fault", "", run.t0_ns + 1900_000_000, run.t0_ns + 2900_000_000)]
    phase = analyze_run(run).phases[0]
    assert phase.longest_stall_s == pytest.approx(1.0)
    assert not phase.stalled


# --- per phase: heartbeats, retransmissions, failures -----------------------------------


def test_outage_and_lost_heartbeats(without_run, edgeft_run):
    phases = phases_by_name(without_run)
    # the longest gap that began in the phase, of any heartbeat
    assert phases["silent"].outage_ms == 4100
    # a gap beginning at exactly 6000 ms belongs to power-off
    assert phases["power-off"].outage_ms == 120
    assert phases["power-on"].outage_ms is None
    assert phases["power-on"].gap_threshold_ms == 5.0
    # loss runs at 2090, 5990 and 2040 ms; 6050 ms
    assert [phases[n].lost for n in ("silent", "power-off", "power-on")] == [39 + 12 + 41, 5, 0]
    phases = phases_by_name(edgeft_run)
    assert [phases[n].outage_ms for n in ("silent", "power-off", "power-on")] == [130, None, None]
    assert [phases[n].lost for n in ("silent", "power-off", "power-on")] == [19, 0, 0]


def test_no_heartbeats(hung_run):
    phase = analyze_run(hung_run).phases[0]
    assert (phase.outage_ms, phase.gap_threshold_ms, phase.lost) == (None, None, 0)


def test_retrans_deltas(without_run, edgeft_run):
    phases = phases_by_name(without_run)
    # 7 + rank segments each, all reported by step 34 just before 10 s
    assert [phases[n].retrans for n in ("silent", "power-off", "power-on")] == [0, 7 * 4 + 0 + 1 + 2 + 3, 0]
    phases = phases_by_name(edgeft_run)
    assert [phases[n].retrans for n in ("silent", "power-off", "power-on")] == [8, 0, 0]


def test_retrans_starts_from_a_ranks_first_value(make_run):
    # counts appear only from 3 s on, starting at 100: silent counts from 100, not from 0
    def counts(rank: int, t_ms: float) -> int | None:
        if rank != 0:
            return None
        return None if t_ms < 3000 else 100 + int(t_ms > 5000) * 10 + int(t_ms > 7000) * 5

    phases = phases_by_name(make_run("edgeft", [100.0] * 120, retrans=counts))
    assert [phases[n].retrans for n in ("silent", "power-off", "power-on")] == [10, 5, 0]


def test_retrans_unknown(hung_run):
    assert {p.retrans for p in analyze_run(hung_run).phases} == {None}


def test_resets_and_failures(reset_run):
    phases = phases_by_name(reset_run)
    assert phases["silent"].resets == 1
    assert phases["silent"].failures == ["r2h1: reset: connection reset by peer"]
    assert phases["power-off"].resets == 0
    assert phases["power-off"].failures == ["r1h1: timeout: step waited 5 s", "r1h2: timeout: step waited 5 s"]
    assert (phases["power-on"].resets, phases["power-on"].failures) == (0, [])


# --- the job ----------------------------------------------------------------------------


def test_edgeft_job_finished(edgeft_run):
    job = analyze_run(edgeft_run).job
    assert job.verdict == "finished"
    assert (job.steps_done, job.steps_total, job.finished, job.died, job.unfinished) == (200, 200, True, None, [])
    assert job.job_s == pytest.approx(14.67)
    assert job.healthy_s == pytest.approx(12.0)
    assert job.delay_s == pytest.approx(2.67)
    assert job.time_lost_s == pytest.approx(2.67)
    assert job.largest_step_ms == 150.0
    assert (job.stall_phase, job.longest_stall_s) == (None, pytest.approx(0.15))  # no stall: under 1 s


def test_without_job_finished_but_stalled(without_run):
    job = analyze_run(without_run).job
    assert job.verdict == "stalled"
    assert job.finished
    # one stall across the silent and power-off phases, named by the first it overlaps
    assert (job.stall_phase, job.longest_stall_s) == ("silent", pytest.approx(8.0))
    assert job.job_s == pytest.approx(13.94)
    assert job.delay_s == pytest.approx(7.94)
    assert job.largest_step_ms == 8000.0


def test_job_died(reset_run):
    job = analyze_run(reset_run).job
    assert job.verdict == "died"
    assert not job.finished
    assert job.died == {
        "host": "r2h1", "rank": 2, "kind": "reset", "error": "connection reset by peer", "step": 41, "at_s": 3.0,
    }
    assert job.unfinished == ["r2h2"]
    assert (job.steps_done, job.steps_total) == (40, 100)
    assert job.job_s == pytest.approx(14.0)  # to the end of the run
    assert job.healthy_s == pytest.approx(6.0)
    assert job.delay_s is None


def test_job_hung(hung_run):
    job = analyze_run(hung_run).job
    assert job.verdict == "hung"
    assert (job.died, job.delay_s, job.steps_done) == (None, None, 40)
    assert job.unfinished == ["r1h1", "r1h2", "r2h1", "r2h2"]
    assert job.job_s == pytest.approx(14.0)


def test_analysis_is_json_serializable(without_run, reset_run):
    for run in (without_run, reset_run):
        doc = analyze_run(run).to_dict()
        assert json.loads(json.dumps(doc)) == doc
        assert [p["name"] for p in doc["phases"]] == ["silent", "power-off", "power-on"]


def test_analysis_of_a_saved_run(tmp_path, without_run):
    path = tmp_path / "run.json"
    without_run.save(path)
    assert analyze_run(Run.load(path)) == analyze_run(without_run)


# --- throughput -------------------------------------------------------------------------


def test_throughput_rates_at_interval_midpoints(make_run):
    run = make_run("edgeft", [60.0] * 10)
    t0 = run.t0_ns
    run.counters = {"r1h1": {"a": [
        [t0, 0, 0],
        [t0 + S, 125_000_000, 12_500_000],  # 1000 and 100 Mbit/s
        [t0 + 2 * S, 10, 5],  # the NIC was recreated: 0, not negative
        [t0 + 2 * S + S // 2, 62_500_010, 5],  # 1000 Mbit/s over half a second; rx idle
    ]}}
    series = plane_throughput(run, "r1h1", "a")
    assert series.t_s == [0.5, 1.5, 2.25]
    assert series.tx_mbps == [1000.0, 0.0, 1000.0]
    assert series.rx_mbps == [100.0, 0.0, 0.0]
    assert [(s.host, s.plane) for s in throughput(run)] == [("r1h1", "a")]


def test_throughput_of_every_host_and_plane(edgeft_run):
    series = throughput(edgeft_run)
    assert [(s.host, s.plane) for s in series] == [(h, p) for h in edgeft_run.hosts for p in ("a", "b")]
    plane_a = series[0]
    assert max(plane_a.tx_mbps) == pytest.approx(800.0)
    # plane a idle during the faults, plane b busy
    during = [i for i, t in enumerate(plane_a.t_s) if 2.1 < t < 9.9]
    assert {plane_a.tx_mbps[i] for i in during} == {0.0}
    assert [series[1].tx_mbps[i] for i in during] == pytest.approx([800.0] * len(during))


def test_start_up_before_the_first_step_is_not_a_stall(make_run, ms_from_t0):
    # DDP's rendezvous: 5 s before step 1 begins; then 60 ms steps through the faults
    run = make_run("edgeft", [60.0] * 200)
    for rank in run.ranks:
        for step in rank.steps:
            step.t_ns += 5000 * 1_000_000
        rank.end["t_ns"] += 5000 * 1_000_000
    run.end_ns += 5000 * 1_000_000
    job = analyze_run(run).job
    assert job.verdict == "finished"
    assert job.longest_stall_s < 0.1
    assert job.job_s == pytest.approx(12.0, abs=0.01)  # from step 1's start, not from t0


def test_retransmissions_from_the_sampled_counters_are_dated_by_the_samples(without_run, ms_from_t0):
    # the step logs only see retransmissions when a step finishes; the samples see them when they happen
    without_run.tcp_retrans = {
        "r1h1": [[ms_from_t0(t), count] for t, count in ((0, 0), (1000, 0), (3000, 5), (7000, 9), (12000, 40))],
        "r2h1": [[ms_from_t0(t), count] for t, count in ((0, 100), (3000, 101), (12000, 101))],
    }
    phases = {p.name: p for p in analyze_run(without_run).phases}
    assert [phases[name].retrans for name in ("silent", "power-off", "power-on")] == [6, 4, 31]


def test_stall_where():
    from edgeft_demo.analysis import stall_where

    class Job:
        stall_phase = "silent"

    assert stall_where(Job) == "from 'silent'"
    Job.stall_phase = None
    assert stall_where(Job) == "outside the fault phases"


def test_one_stall_seen_by_two_ranks_in_two_steps_is_lost_once(make_run, ms_from_t0):
    run = make_run("without-edgeft", [60.0] * 10)
    # rank 0 finishes step 5 at 300 ms then waits 8 s in step 6; rank 1 waited those 8 s in step 5
    fast = [Step(n, ms_from_t0(60 * n), 60.0) for n in range(1, 6)] + [Step(6, ms_from_t0(8360), 8060.0)]
    slow = [Step(n, ms_from_t0(60 * n), 60.0) for n in range(1, 5)] + [
        Step(5, ms_from_t0(8300), 8060.0), Step(6, ms_from_t0(8360), 60.0)]
    run.ranks = [Rank(0, "r1h1", "a0", fast, {"event": "done", "t_ns": ms_from_t0(8360)}),
                 Rank(1, "r1h2", "a1", slow, {"event": "done", "t_ns": ms_from_t0(8360)})]
    steps = job_steps(run)
    assert [s.step_ms for s in steps][-2:] == [8060.0, 8060.0]  # both steps were slow for some rank
    assert [round(s.interval_ms) for s in steps] == [60, 60, 60, 60, 8060, 60]
    assert analyze_run(run).job.time_lost_s == pytest.approx(8.0, abs=0.01)  # but 8 s were lost, not 16
