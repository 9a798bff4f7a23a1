"""The built-in ring all-reduce (demo/edgeft_demo/workloads/ring_allreduce.py), run as the demo
runs it: one process per rank under `ip netns exec`, here all in one namespace of the test's
own (ranks on 127.0.0.1-4 of its loopback), deleted afterwards even when a test fails."""

from __future__ import annotations

import importlib.util
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from edgeft_demo.workloads import steplog
from repo import REPO

SCRIPT = REPO / "demo" / "edgeft_demo" / "workloads" / "ring_allreduce.py"


def load_ring():
    """The script as a module (it imports steplog from its own folder when run as a file)."""
    sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("ring_allreduce", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ring = load_ring()


@pytest.fixture
def netns() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    name = f"edgeft-ring-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True, capture_output=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True)


def start_ranks(ns: str, tmp_path: Path, world: int, *extra: str) -> list[subprocess.Popen]:
    addresses = ",".join(f"127.0.0.{i + 1}" for i in range(world))
    return [
        subprocess.Popen(["ip", "netns", "exec", ns, "/usr/bin/python3", str(SCRIPT), "--rank", str(rank),
                          "--world", str(world), "--addresses", addresses, "--log", str(tmp_path / f"rank-{rank}.jsonl"),
                          *extra], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for rank in range(world)
    ]


def kill_all(procs: list[subprocess.Popen]) -> None:
    for proc in procs:  # only the processes this test started
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def finish(procs: list[subprocess.Popen], timeout: float = 60) -> list[int]:
    try:
        return [proc.wait(timeout=timeout) for proc in procs]
    finally:
        kill_all(procs)


def wait_for_a_step(log: Path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not any(r["event"] == "step" for r in steplog.read(str(log))):
        assert time.monotonic() < deadline, "the ring never made a step"
        time.sleep(0.05)


def test_chunks_are_whole_lanes_covering_the_buffer():
    bounds = ring.chunk_bounds(40, 3)  # 10 lanes: 4, 3, 3
    assert bounds == [(0, 16), (16, 28), (28, 40)]


def test_expected_sum_is_the_lane_wise_sum_of_every_rank():
    grads = ring.Gradients(size=64, world=3, seed=7)
    step = 5
    for index in range(3):
        lanes = [0] * (grads.length(index) // 4)
        for rank in range(3):
            data = grads.of_rank(rank, step)[index].to_bytes(grads.length(index), "little")
            for lane in range(len(lanes)):
                lanes[lane] += int.from_bytes(data[lane * 4:lane * 4 + 4], "little")
        assert all(value < 2**32 for value in lanes)  # no lane carries into the next
        expected = b"".join(value.to_bytes(4, "little") for value in lanes)
        assert grads.expected(step)[index].to_bytes(grads.length(index), "little") == expected


def test_four_ranks_all_reduce_with_verified_sums(netns, tmp_path):
    codes = finish(start_ranks(netns, tmp_path, 4, "--steps", "30", "--compute-ms", "5", "--size-kb", "256"))
    assert codes == [0, 0, 0, 0]
    for rank in range(4):
        records = steplog.read(str(tmp_path / f"rank-{rank}.jsonl"))
        assert records[0]["event"] == "start" and records[0]["workload"] == "ring"
        steps = [r for r in records if r["event"] == "step"]
        assert [r["step"] for r in steps] == list(range(1, 31))
        assert all(r["step_ms"] >= 5 and isinstance(r["retrans"], int) for r in steps)
        assert records[-1] == {**records[-1], "event": "done", "steps": 30}


def test_a_killed_rank_resets_its_neighbours(netns, tmp_path):
    procs = start_ranks(netns, tmp_path, 3, "--steps", "100000", "--compute-ms", "5", "--size-kb", "48")
    try:
        wait_for_a_step(tmp_path / "rank-1.jsonl")
        procs[1].send_signal(signal.SIGKILL)
        codes = finish(procs, timeout=30)
    finally:
        kill_all(procs)
    assert codes[0] == steplog.EXIT_RESET and codes[2] == steplog.EXIT_RESET
    end = steplog.read(str(tmp_path / "rank-0.jsonl"))[-1]
    assert end["event"] == "error" and end["kind"] == "reset" and end["step"] >= 2


def test_a_stopped_rank_times_the_job_out(netns, tmp_path):
    procs = start_ranks(netns, tmp_path, 3, "--steps", "100000", "--compute-ms", "5", "--size-kb", "48",
                        "--timeout-s", "2")
    try:
        wait_for_a_step(tmp_path / "rank-2.jsonl")
        procs[2].send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 15
        while procs[0].poll() is None or procs[1].poll() is None:
            assert time.monotonic() < deadline, "no rank timed out"
            time.sleep(0.1)
    finally:
        procs[2].send_signal(signal.SIGCONT)
        finish(procs, timeout=10)
    kinds = {steplog.read(str(tmp_path / f"rank-{r}.jsonl"))[-1].get("kind") for r in (0, 1)}
    assert "timeout" in kinds  # the rank waiting on the stopped one; the other may see it leave
    assert {procs[0].returncode, procs[1].returncode} <= {steplog.EXIT_TIMEOUT, steplog.EXIT_RESET}


@pytest.mark.parametrize("args, option", [
    (["--rank", "4", "--world", "4", "--addresses", "a,b,c,d"], "--rank"),
    (["--rank", "0", "--world", "3", "--addresses", "127.0.0.1,127.0.0.2"], "--addresses"),
    (["--rank", "0", "--world", "2", "--addresses", "127.0.0.1,127.0.0.1"], "--addresses"),
    (["--rank", "0", "--world", "2", "--addresses", "127.0.0.1,127.0.0.2", "--size-kb", "0"], "--size-kb"),
    (["--rank", "0", "--world", "1", "--addresses", "127.0.0.1"], "--world"),
])
def test_bad_arguments_are_refused_before_anything_starts(tmp_path, args, option):
    log = tmp_path / "rank.jsonl"
    proc = subprocess.run(["/usr/bin/python3", str(SCRIPT), *args, "--log", str(log)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=30, check=False)
    assert proc.returncode == steplog.EXIT_USAGE
    assert option in proc.stderr
    assert not log.exists()
