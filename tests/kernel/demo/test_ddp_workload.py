"""The PyTorch DDP workload (demo/edgeft_demo/workloads/ddp_train.py), run as the demo runner
runs it: one process per rank under `ip netns exec`, here all in one namespace of the test's
own (loopback only, master 127.0.0.1 inside it), deleted afterwards even when a test fails.

Needs root (network namespaces) and PyTorch: the test command installs torch==2.13.0 into
.venv; without it the training tests fail rather than skip, so a missing install is seen.
"""

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
from typing import Any

import pytest


from edgeft_demo.workloads import ddp_train, steplog
from repo import REPO

SCRIPT = REPO / "demo" / "edgeft_demo" / "workloads" / "ddp_train.py"
MASTER_PORT = 29500  # free: the namespace is new
FOUR_RANK_DEADLINE_S = 60


@pytest.fixture
def torch_installed() -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.fail(f"PyTorch must be installed for the DDP workload tests: {sys.executable} -m pip install torch==2.13.0 "
                    "(the test command installs it)", pytrace=False)


@pytest.fixture
def netns() -> Iterator[str]:
    """A fresh network namespace with only lo, up."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    name = f"edgeft-ddp-{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True, text=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True, capture_output=True, text=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False, capture_output=True, text=True)


class Job:
    """The ranks of one job, started in `ns`; every process still running is killed on exit."""

    def __init__(self, ns: str, workdir: Path) -> None:
        self.ns, self.workdir = ns, workdir
        self.procs: list[subprocess.Popen[bytes]] = []

    def log_path(self, rank: int) -> Path:
        return self.workdir / f"rank-{rank}.jsonl"

    def stderr(self, rank: int) -> str:
        return (self.workdir / f"rank-{rank}.err").read_text(errors="replace")

    def start(self, world: int, steps: int, timeout_s: int = 30, python: tuple[str, ...] = (sys.executable,)) -> None:
        for rank in range(world):
            cmd = ["ip", "netns", "exec", self.ns, *python, str(SCRIPT), "--rank", str(rank), "--world", str(world),
                   "--master-addr", "127.0.0.1", "--master-port", str(MASTER_PORT), "--ifname", "lo",
                   "--steps", str(steps), "--timeout-s", str(timeout_s), "--log", str(self.log_path(rank))]
            with open(self.workdir / f"rank-{rank}.err", "wb") as err:
                self.procs.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err))

    def records(self, rank: int) -> list[dict[str, Any]]:
        return steplog.read(str(self.log_path(rank)))

    def wait_for_steps(self, rank: int, steps: int, deadline_s: float = 60) -> None:
        deadline = time.monotonic() + deadline_s
        while sum(r["event"] == "step" for r in self.records(rank)) < steps:
            assert self.procs[rank].poll() is None, f"rank {rank} ended early: {self.records(rank)}\n{self.stderr(rank)}"
            assert time.monotonic() < deadline, f"rank {rank} made no {steps} steps in {deadline_s} s\n{self.stderr(rank)}"
            time.sleep(0.1)

    def wait(self, rank: int, timeout_s: float) -> int:
        try:
            return self.procs[rank].wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pytest.fail(f"rank {rank} still running after {timeout_s} s: {self.records(rank)[-3:]}\n{self.stderr(rank)}")

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()  # SIGKILL: also ends a stopped process
            proc.wait()


@pytest.fixture
def job(netns: str, tmp_path: Path) -> Iterator[Job]:
    started = Job(netns, tmp_path)
    try:
        yield started
    finally:
        started.kill_all()


def assert_complete_log(records: list[dict[str, Any]], rank: int, world: int, steps: int) -> None:
    assert records, f"rank {rank}: empty step log"
    start, *middle, done = records
    assert start["event"] == "start" and start["rank"] == rank and start["world"] == world and start["workload"] == "ddp", start
    assert done["event"] == "done" and done["steps"] == steps, done
    assert [r["event"] for r in middle] == ["step"] * steps, middle
    assert [r["step"] for r in middle] == list(range(1, steps + 1))
    for record in middle:
        assert record["step_ms"] > 0, record
        # /proc/net/snmp is readable in a namespace: a count, never None (nor a bool)
        assert isinstance(record["retrans"], int) and not isinstance(record["retrans"], bool), record
    times = [r["t_ns"] for r in records]
    assert times == sorted(times)


@pytest.mark.usefixtures("torch_installed")
@pytest.mark.parametrize("world", [2, 4])
def test_ranks_train_and_agree(job: Job, world: int) -> None:
    steps = 5
    job.start(world, steps)
    deadline = time.monotonic() + FOUR_RANK_DEADLINE_S  # one deadline for the whole job
    codes = [job.wait(rank, max(1.0, deadline - time.monotonic())) for rank in range(world)]
    assert codes == [steplog.EXIT_OK] * world, "\n".join(job.stderr(rank) for rank in range(world))
    for rank in range(world):
        assert_complete_log(job.records(rank), rank, world, steps)


@pytest.mark.usefixtures("torch_installed")
def test_killed_peer_is_a_reset(job: Job) -> None:
    job.start(2, steps=100_000)
    job.wait_for_steps(1, 3)
    job.procs[1].kill()
    assert job.wait(0, 30) == steplog.EXIT_RESET, job.stderr(0)
    error = job.records(0)[-1]
    assert error["event"] == "error" and error["kind"] == "reset" and error["step"] >= 3, error


@pytest.mark.usefixtures("torch_installed")
def test_stalled_peer_is_a_timeout(job: Job) -> None:
    job.start(2, steps=100_000, timeout_s=3)
    job.wait_for_steps(1, 3)
    job.procs[1].send_signal(signal.SIGSTOP)  # its sockets stay open: only gloo's timeout notices
    assert job.wait(0, 30) == steplog.EXIT_TIMEOUT, job.stderr(0)
    error = job.records(0)[-1]
    assert error["event"] == "error" and error["kind"] == "timeout" and error["step"] >= 3, error


@pytest.mark.usefixtures("torch_installed")
def test_sigterm_ends_a_rank_blocked_in_a_collective(job: Job) -> None:
    job.start(2, steps=100_000, timeout_s=120)
    job.wait_for_steps(1, 3)
    job.procs[1].send_signal(signal.SIGSTOP)
    time.sleep(1)  # rank 0 is now waiting in the all-reduce
    job.procs[0].terminate()
    assert job.wait(0, 5) == -signal.SIGTERM


@pytest.mark.parametrize(("args", "option"), [
    (["--rank", "2", "--world", "2"], "--rank"),
    (["--rank", "-1", "--world", "2"], "--rank"),
    (["--rank", "0", "--world", "1"], "--world"),
    (["--rank", "0", "--world", "2", "--steps", "0"], "--steps"),
    (["--rank", "0", "--world", "2", "--timeout-s", "0"], "--timeout-s"),
])
def test_bad_arguments_exit_2_naming_the_option(netns: str, tmp_path: Path, args: list[str], option: str) -> None:
    log = tmp_path / "rank.jsonl"
    cmd = ["ip", "netns", "exec", netns, sys.executable, str(SCRIPT), *args, "--master-addr", "127.0.0.1", "--log", str(log)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == steplog.EXIT_USAGE, result
    error_line = result.stderr.strip().splitlines()[-1]
    assert error_line.startswith("ddp_train.py: error:") and option in error_line, result.stderr
    assert not log.exists()  # nothing started, not even the step log


def test_missing_torch_is_a_usage_error_without_traceback(job: Job) -> None:
    # -S -I: no site-packages on the path, so torch cannot be imported whatever is installed
    job.start(2, steps=1, python=(sys.executable, "-I", "-S"))
    for rank in range(2):
        assert job.wait(rank, 30) == steplog.EXIT_USAGE
        assert job.stderr(rank).strip() == ("ddp_train: PyTorch is not installed: run the demo with --workload ddp, "
                                            "which installs torch==2.13.0 into .venv")
        assert not job.log_path(rank).exists()


@pytest.mark.parametrize(("message", "kind"), [
    # as gloo and c10d word them (torch 2.13)
    ("[gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:38067: Connection reset by peer. This is typically caused by "
     "a remote worker hanging or bugs in the application.", "reset"),
    ("[gloo/transport/tcp/pair.cc:598] Connection closed by peer [198.18.1.2]:40417", "reset"),
    ("[gloo/transport/tcp/pair.cc:446] Write error [198.18.1.2]:40417: Broken pipe", "reset"),
    ("[gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 3000ms for recv operation to complete", "timeout"),
    ("Timed out after 4 seconds waiting for clients. 1/2 clients joined.", "timeout"),
    ("Read error [198.18.1.2]:40417: Connection timed out", "timeout"),
    ("Expected all tensors to be on the same device", "other"),
])
def test_failures_map_to_step_log_kinds(message: str, kind: str) -> None:
    assert ddp_train.classify(RuntimeError(message)) == kind


@pytest.mark.parametrize(("master", "url"), [
    ("198.18.0.1", "tcp://198.18.0.1:29500"),
    ("fd00:18::1", "tcp://[fd00:18::1]:29500"),
    ("[fd00:18::1]", "tcp://[fd00:18::1]:29500"),
    ("h1", "tcp://h1:29500"),
])
def test_ipv6_masters_are_bracketed(master: str, url: str) -> None:
    assert ddp_train.init_method(master, 29500) == url
