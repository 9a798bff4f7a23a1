"""A real PyTorch DistributedDataParallel job (gloo on CPU) as a demo workload: one process
per lab host, each writing the step log of steplog.py.

    ip netns exec h1 .venv/bin/python demo/edgeft_demo/workloads/ddp_train.py \\
        --rank 0 --world 4 --master-addr 198.18.0.1 --master-port 29500 --ifname fab0 \\
        --steps 300 --timeout-s 120 --log out/rank-0.jsonl

The model is a small MLP on random data, so a step is mostly its gradient all-reduce
(--params-m million float32 parameters, all-reduced every step), and a broken
fabric shows up as slow steps, a gloo timeout or a reset connection rather than being hidden
behind compute. After the last step the ranks compare checksums of their parameters, which
DDP keeps identical.

Exit codes are those of steplog (0 done, 1 other error, 2 usage, 3 reset, 4 timeout); SIGTERM
and SIGINT end the process at once, even inside a blocked collective.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import time
import traceback
from datetime import timedelta
from typing import TYPE_CHECKING, NoReturn, Sequence

try:
    from . import steplog
except ImportError:  # run as a file (as the runner does): steplog lies beside this script
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import steplog  # type: ignore[no-redef]

if TYPE_CHECKING:
    import torch

WORKLOAD = "ddp"
# 3 M parameters: a 12 MB all-reduce a step, about 60 ms a step with 4 ranks on 2 cores over
# loopback, of which the ranks' compute is about a third.
DEFAULT_PARAMS_M = 3.0
BATCH_SIZE = 16  # small: compute stays a fraction of the all-reduce
MODEL_SEED = 1234  # every rank builds the same model (DDP also broadcasts rank 0's at start)
DATA_SEED = 5678  # plus the rank: each rank trains on its own batch
LEARNING_RATE = 0.01
# Parameters agree when their checksums differ by no more than this, relative to their size:
# DDP gives every rank the same averaged gradients, so replicas stay equal to rounding.
CHECKSUM_RTOL = 1e-6
ERROR_MESSAGE_LIMIT = 2000  # characters of an exception kept in the step log

TORCH_MISSING = "ddp_train: PyTorch is not installed: run the demo with --workload ddp, which installs torch==2.13.0 into .venv"

# Substrings (lower case) of gloo/c10d messages that name a connection the peer reset or closed;
# a switch that drops frames instead ends in a timeout (gloo's or TCP's "Connection timed out").
RESET_MARKERS = ("connection reset", "connection closed by peer", "broken pipe", "econnreset")
TIMEOUT_MARKERS = ("timed out", "timeout")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(steplog.EXIT_USAGE, f"{self.prog}: error: {message}\n")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = _Parser(description="PyTorch DDP (gloo, CPU) training job writing a step log.")
    parser.add_argument("--rank", type=int, required=True, help="this process's rank, 0 .. world-1")
    parser.add_argument("--world", type=int, required=True, help="number of ranks (at least 2)")
    parser.add_argument("--master-addr", required=True, help="address of rank 0's host (IPv4 or IPv6 literal, or a name)")
    parser.add_argument("--master-port", type=int, default=29500, help="rendezvous TCP port on the master (default: %(default)s)")
    parser.add_argument("--ifname", help="NIC gloo binds its connections to (GLOO_SOCKET_IFNAME), e.g. fab0")
    parser.add_argument("--steps", type=int, default=300, help="training steps (default: %(default)s)")
    parser.add_argument("--timeout-s", type=int, default=120, help="rendezvous and collective timeout in seconds (default: %(default)s)")
    parser.add_argument("--params-m", type=float, default=DEFAULT_PARAMS_M,
                        help="model size in millions of float32 parameters (default: %(default)s)")
    parser.add_argument("--log", required=True, help="step log to append to (JSON lines)")
    args = parser.parse_args(argv)
    problems = []
    if args.world < 2:
        problems.append(f"--world must be at least 2 (got {args.world})")
    elif not 0 <= args.rank < args.world:
        problems.append(f"--rank must be in [0, {args.world}) for --world {args.world} (got {args.rank})")
    if args.steps < 1:
        problems.append(f"--steps must be at least 1 (got {args.steps})")
    if args.timeout_s < 1:
        problems.append(f"--timeout-s must be at least 1 (got {args.timeout_s})")
    if not 1 <= args.master_port <= 65535:
        problems.append(f"--master-port must be in [1, 65535] (got {args.master_port})")
    if not (0 < args.params_m <= 1000 and math.isfinite(args.params_m)):
        problems.append(f"--params-m must be in (0, 1000] (got {args.params_m})")
    if not args.master_addr.strip("[]"):
        problems.append("--master-addr must not be empty")
    if problems:
        parser.error("; ".join(problems))
    return args


def init_method(master_addr: str, master_port: int) -> str:
    """The tcp:// rendezvous URL; an IPv6 literal goes in brackets."""
    host = master_addr.strip("[]")
    if ":" in host:
        host = f"[{host}]"
    return f"tcp://{host}:{master_port}"


def classify(exc: BaseException) -> str:
    """The step-log error kind of a failure: "reset", "timeout" or "other". A reset is looked
    for first: its messages are specific, while "timeout" can appear in any c10d message that
    quotes the configured timeout."""
    text = f"{type(exc).__name__}: {exc}".lower()
    if any(marker in text for marker in RESET_MARKERS):
        return "reset"
    if isinstance(exc, TimeoutError) or any(marker in text for marker in TIMEOUT_MARKERS):
        return "timeout"
    return "other"


def hidden_width(params_m: float) -> int:
    """Width H of the MLP D -> H -> H -> D with D = H / 4: about 1.5 * H^2 parameters."""
    return max(16, round(math.sqrt(params_m * 1e6 / 1.5)))


def build_model(params_m: float) -> torch.nn.Module:
    import torch

    hidden = hidden_width(params_m)
    features = max(4, hidden // 4)
    torch.manual_seed(MODEL_SEED)
    return torch.nn.Sequential(
        torch.nn.Linear(features, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, features),
    )


def parameter_checksum(model: torch.nn.Module) -> torch.Tensor:
    """[sum, sum of squares] of every parameter, in float64."""
    import torch

    flat = torch.cat([p.detach().reshape(-1).to(torch.float64) for p in model.parameters()])
    return torch.stack([flat.sum(), (flat * flat).sum()])


def replicas_disagree(model: torch.nn.Module) -> str | None:
    """None when every rank holds the same parameters, else what differs."""
    import torch.distributed as dist

    checksum = parameter_checksum(model)
    highest, lowest = checksum.clone(), checksum.clone()
    dist.all_reduce(highest, op=dist.ReduceOp.MAX)
    dist.all_reduce(lowest, op=dist.ReduceOp.MIN)
    for name, hi, lo in zip(("sum", "sum of squares"), highest.tolist(), lowest.tolist()):
        if not abs(hi - lo) <= CHECKSUM_RTOL * max(1.0, abs(hi), abs(lo)):
            return f"replicas disagree after training: parameter {name} ranges from {lo!r} to {hi!r} across ranks"
    return None


class Progress:
    """The step in flight, for the error record: 0 while joining the job."""

    step = 0


def train(args: argparse.Namespace, log: steplog.StepLog, progress: Progress) -> int:
    """Join the job, run the steps, check the replicas; returns the exit code. Exceptions
    propagate to the caller, which logs them at progress.step."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # the ranks of the lab share two cores
    dist.init_process_group("gloo", init_method=init_method(args.master_addr, args.master_port), rank=args.rank,
                            world_size=args.world, timeout=timedelta(seconds=args.timeout_s))
    model = torch.nn.parallel.DistributedDataParallel(build_model(args.params_m))
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    loss_fn = torch.nn.MSELoss()
    features = model.module[0].in_features
    generator = torch.Generator().manual_seed(DATA_SEED + args.rank)
    inputs = torch.randn(BATCH_SIZE, features, generator=generator)
    targets = torch.randn(BATCH_SIZE, features, generator=generator)

    for step in range(1, args.steps + 1):
        progress.step = step
        started = time.monotonic()
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), targets)
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
        log.step(step, (time.monotonic() - started) * 1000.0, steplog.tcp_retransmits())

    mismatch = replicas_disagree(model)
    if mismatch:
        print(f"ddp_train: rank {args.rank}: {mismatch}", file=sys.stderr)
        return log.error("other", mismatch, args.steps)
    log.done(args.steps)
    try:
        dist.destroy_process_group()
    except Exception as exc:  # the job is done and logged: a teardown failure changes nothing
        print(f"ddp_train: rank {args.rank}: destroy_process_group: {exc}", file=sys.stderr)
    return steplog.EXIT_OK


def end_now(code: int) -> NoReturn:
    """Exit without Python's teardown: after a failed collective, gloo's threads can block
    interpreter shutdown (and destroy_process_group) until their own timeout."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:  # returns only for usage errors
    args = parse_args(argv)
    # Default dispositions: the kernel ends the process at once, even while the main thread
    # waits inside gloo, where a Python handler would not run until the collective returns.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its thread pool
    if args.ifname:
        os.environ["GLOO_SOCKET_IFNAME"] = args.ifname
    try:
        import torch  # noqa: F401 - loaded here so that a missing install is a usage error
    except ImportError:
        print(TORCH_MISSING, file=sys.stderr)
        return steplog.EXIT_USAGE

    log = steplog.StepLog(args.log, args.rank, args.world, WORKLOAD)
    log.start()
    progress = Progress()
    try:
        code = train(args, log, progress)
    except Exception as exc:  # every failure becomes an error record
        kind = classify(exc)
        message = f"{type(exc).__name__}: {exc}".strip()[:ERROR_MESSAGE_LIMIT]
        code = log.error(kind, message, progress.step)
        print(f"ddp_train: rank {args.rank}: step {progress.step}: {kind}: {message.splitlines()[0]}", file=sys.stderr)
        if kind == "other":  # not a network failure: the traceback shows where
            traceback.print_exc()
    log.close()
    # Also after success: C++ teardown of the process group's threads at interpreter exit
    # can abort ("terminate called without an active exception") once the log is complete.
    end_now(code)


if __name__ == "__main__":
    sys.exit(main())
