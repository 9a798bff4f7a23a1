"""A training-like job: each step "computes" for --compute-ms, then all-reduces a gradient
buffer over TCP with the ring algorithm NCCL and gloo use (reduce-scatter, then all-gather,
each N-1 transfers of 1/N of the buffer to the right-hand neighbour). Every rank checks the
result against the sum it must be, so a failover that loses or reorders data fails the job.

    ring_allreduce.py --rank 0 --world 4 --addresses 198.18.1.11,198.18.1.12,... --port 29400 \\
                      --steps 300 --size-kb 1024 --compute-ms 40 --timeout-s 120 --log rank-0.jsonl

Rank r listens on its own address (addresses[r]) and connects to rank r+1's, the way a
collective library pins each rank to one NIC. A step that waits longer than --timeout-s fails
the job, like a collective's watchdog. Standard library only: it runs with the host's Python.

The buffer holds 32-bit lanes with values below 2**24, added as one big integer per chunk:
with at most 64 ranks no lane carries into the next, so Python's C-speed integer addition is a
lane-wise vector add with no NumPy.
"""

from __future__ import annotations

import argparse
import queue
import random
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from steplog import EXIT_OK, StepLog, tcp_retransmits  # noqa: E402

MAX_WORLD = 64  # keeps every lane's sum below 2**32 (see the module docstring)
MAX_STEPS = 1_000_000
LANE = 4
HEADER = struct.Struct("!IIB")  # step, transfer index, phase: catches a ring out of step
CLOSE = b"BYE!"


class JobError(Exception):
    """The job cannot go on; kind is a step log error kind (reset, timeout, other)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--addresses", required=True, help="every rank's address, comma-separated, in rank order")
    parser.add_argument("--port", type=int, default=29400)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--size-kb", type=int, default=1024, help="gradient buffer per step")
    parser.add_argument("--compute-ms", type=float, default=40.0, help="time each step computes before its all-reduce")
    parser.add_argument("--timeout-s", type=float, default=120.0, help="longest wait for a peer before the job fails")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log", required=True, help="step log (JSON lines)")
    args = parser.parse_args(argv)
    args.addresses = [a.strip() for a in args.addresses.split(",") if a.strip()]
    problems = []
    if not 2 <= args.world <= MAX_WORLD:
        problems.append(f"--world must be 2..{MAX_WORLD}, not {args.world}")
    elif not 0 <= args.rank < args.world:
        problems.append(f"--rank must be 0..{args.world - 1} for --world {args.world}, not {args.rank}")
    if len(args.addresses) != args.world:
        problems.append(f"--addresses lists {len(args.addresses)} address(es); --world {args.world} needs one per rank")
    if len(set(args.addresses)) != len(args.addresses):
        problems.append("--addresses must be distinct: each rank listens on its own address")
    if not 1 <= args.steps <= MAX_STEPS:
        problems.append(f"--steps must be 1..{MAX_STEPS}, not {args.steps}")
    if args.size_kb < 1 or args.size_kb * 1024 % (LANE * args.world):
        problems.append(f"--size-kb {args.size_kb} must be at least 1 and split into {args.world} whole 4-byte lanes")
    if not 1 <= args.port <= 65535:
        problems.append(f"--port must be 1..65535, not {args.port}")
    if args.compute_ms < 0 or args.timeout_s <= 0:
        problems.append("--compute-ms must be >= 0 and --timeout-s > 0")
    if problems:
        parser.error("; ".join(problems))
    return args


def chunk_bounds(size: int, world: int) -> list[tuple[int, int]]:
    """[start, end) of each rank's chunk: whole lanes, the first chunks one lane larger."""
    lanes = size // LANE
    base, extra = divmod(lanes, world)
    bounds, start = [], 0
    for index in range(world):
        end = start + (base + (index < extra)) * LANE
        bounds.append((start, end))
        start = end
    return bounds


class Gradients:
    """This rank's gradient chunks for a step, and the sum every rank must end up with.

    Rank r's buffer at step t is base + (r + t) in every lane, base being random lanes below
    2**24 shared by all ranks; so the all-reduced buffer is world * base + sum_r(r + t)."""

    def __init__(self, size: int, world: int, seed: int) -> None:
        rng = random.Random(seed)
        self.world = world
        self.bounds = chunk_bounds(size, world)
        self.base, self.ones = [], []
        for start, end in self.bounds:
            lanes = (end - start) // LANE
            low24 = int.from_bytes(b"\xff\xff\xff\x00" * lanes, "little")
            self.base.append(int.from_bytes(rng.randbytes(end - start), "little") & low24)
            self.ones.append(int.from_bytes(b"\x01\x00\x00\x00" * lanes, "little"))

    def of_rank(self, rank: int, step: int) -> list[int]:
        return [base + (rank + step) * ones for base, ones in zip(self.base, self.ones)]

    def expected(self, step: int) -> list[int]:
        total = self.world * (self.world - 1) // 2 + self.world * step
        return [self.world * base + total * ones for base, ones in zip(self.base, self.ones)]

    def length(self, index: int) -> int:
        start, end = self.bounds[index]
        return end - start


class Ring:
    """The two connections of a rank (to its right, from its left) and a sender thread, so
    a transfer sends and receives at once, as the ring needs."""

    def __init__(self, right: socket.socket, left: socket.socket) -> None:
        self.right, self.left = right, left
        self._outbox: queue.Queue[bytes | None] = queue.Queue()
        self._error: JobError | None = None
        self._sender = threading.Thread(target=self._send_loop, name="ring-sender", daemon=True)
        self._sender.start()

    def _send_loop(self) -> None:
        while (data := self._outbox.get()) is not None:
            try:
                self.right.sendall(data)
            except OSError as e:
                self._error = classify(e, "sending to the right-hand rank")
                self._wake_receiver()
                return

    def _wake_receiver(self) -> None:
        try:
            self.left.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def send(self, data: bytes) -> None:
        self._check()
        self._outbox.put(data)

    def receive(self, length: int) -> bytes:
        view, got = bytearray(length), 0
        while got < length:
            try:
                n = self.left.recv_into(memoryview(view)[got:], length - got)
            except OSError as e:
                self._check()
                raise classify(e, "receiving from the left-hand rank") from None
            if n == 0:
                self._check()
                raise JobError("reset", "the left-hand rank closed its connection")
            got += n
        return bytes(view)

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        self._outbox.put(None)
        self._sender.join(timeout=5)
        for sock in (self.right, self.left):
            sock.close()


def classify(error: OSError, doing: str) -> JobError:
    if isinstance(error, socket.timeout):
        return JobError("timeout", f"no data for the timeout while {doing}")
    if isinstance(error, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        return JobError("reset", f"connection reset while {doing}: {error}")
    return JobError("other", f"{error} while {doing}")


def family_of(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def connect_ring(args: argparse.Namespace) -> Ring:
    """Listen on our address, connect to the right-hand rank (retrying until it listens),
    accept the left-hand one; all within --timeout-s."""
    deadline = time.monotonic() + args.timeout_s
    mine, right_address = args.addresses[args.rank], args.addresses[(args.rank + 1) % args.world]
    listener = socket.socket(family_of(mine), socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((mine, args.port))
    listener.listen(1)
    right = None
    while right is None:
        try:
            right = socket.create_connection((right_address, args.port), timeout=1.0, source_address=(mine, 0))
        except OSError as e:
            if time.monotonic() > deadline:
                raise JobError("timeout", f"rank {(args.rank + 1) % args.world} at {right_address} never listened: {e}") from None
            time.sleep(0.1)
    listener.settimeout(max(0.1, deadline - time.monotonic()))
    try:
        left = listener.accept()[0]
    except socket.timeout:
        raise JobError("timeout", f"rank {(args.rank - 1) % args.world} never connected") from None
    finally:
        listener.close()
    for sock in (right, left):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(args.timeout_s)
    return Ring(right, left)


def all_reduce(ring: Ring, chunks: list[int], grads: Gradients, rank: int, step: int) -> list[int]:
    """The ring all-reduce of this rank's chunks: every rank ends with every chunk summed."""
    world = grads.world

    def transfer(phase: int, index: int, send_chunk: int, receive_chunk: int) -> int:
        ring.send(HEADER.pack(step, index, phase) + chunks[send_chunk].to_bytes(grads.length(send_chunk), "little"))
        header = ring.receive(HEADER.size)
        if HEADER.unpack(header) != (step, index, phase):
            raise JobError("other", f"ring out of step: expected {(step, index, phase)}, got {HEADER.unpack(header)}")
        return int.from_bytes(ring.receive(grads.length(receive_chunk)), "little")

    for index in range(world - 1):  # reduce-scatter: after it, rank r holds chunk r+1 summed
        send_chunk, receive_chunk = (rank - index) % world, (rank - index - 1) % world
        chunks[receive_chunk] += transfer(0, index, send_chunk, receive_chunk)
    for index in range(world - 1):  # all-gather: pass the summed chunks around
        send_chunk, receive_chunk = (rank - index + 1) % world, (rank - index) % world
        chunks[receive_chunk] = transfer(1, index, send_chunk, receive_chunk)
    return chunks


def train(args: argparse.Namespace, log: StepLog) -> None:
    grads = Gradients(args.size_kb * 1024, args.world, args.seed)
    ring = connect_ring(args)
    try:
        for step in range(1, args.steps + 1):
            began = time.monotonic()
            time.sleep(args.compute_ms / 1000)
            summed = all_reduce(ring, grads.of_rank(args.rank, step), grads, args.rank, step)
            if summed != grads.expected(step):
                bad = [i for i, (got, want) in enumerate(zip(summed, grads.expected(step))) if got != want]
                raise JobError("other", f"step {step}: all-reduce result wrong in chunk(s) {bad}")
            log.step(step, (time.monotonic() - began) * 1000, tcp_retransmits())
        # Nobody closes before its right-hand rank has read everything.
        ring.send(CLOSE)
        if ring.receive(len(CLOSE)) != CLOSE:
            raise JobError("other", "the left-hand rank did not close cleanly")
    finally:
        ring.close()


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    log = StepLog(args.log, args.rank, args.world, "ring")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    log.start()
    try:
        train(args, log)
    except JobError as e:
        print(f"ring_allreduce: rank {args.rank}: {e.kind}: {e}", file=sys.stderr)
        return log.error(e.kind, str(e), log.last_step + 1)
    except OSError as e:
        return log.error("other", str(e), log.last_step + 1)
    log.done(args.steps)
    return EXIT_OK


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(128 + signal.SIGINT)
