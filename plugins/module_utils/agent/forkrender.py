# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Answers to /metrics and /status, rendered and sent by a forked child, off the probe loop.

A render walks every path (5-16 ms for /metrics, 0.5 s for /status at 4,096 peers), longer
than the gaps between probes. The loop only forks: the child gets a copy-on-write image of the
whole agent as of that instant (a consistent snapshot, for the cost of copying page tables,
0.7-2 ms at 4,096 peers), renders from it, writes the answers and exits.
A thread would not do: a pure-Python render holds the GIL, and the loop waits for it at every
wake-up (benchmarks/README.md). The child drops real-time scheduling, so it never competes with
the loop at its priority, and a client that does not read holds up the child, never the loop.

At most one child runs at a time; requests that complete meanwhile wait and are answered together
by the next one (each route rendered once for them all).
"""

from __future__ import annotations

import gc
import os
import signal

SEND_TIMEOUT_S = 2.0  # in the child: a client that does not read within this loses its answer


def http_answer(method: str, status: str, ctype: str, body: bytes) -> bytes:
    """Status line, headers and (except for HEAD) the body its Content-Length announces."""
    head = ("HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
            % (status, ctype, len(body))).encode()
    return head + (b"" if status == "200 OK" and method == "HEAD" else body)


class ForkedRenders:
    def __init__(self, log=None):
        self.log = log
        self.pid = None  # the running child
        self.errors = 0  # forks that failed (answered 503 by the loop)
        self.forks = 0
        self.handed = 0  # requests handed to a child

    @property
    def busy(self) -> bool:
        return self.pid is not None

    def start(self, batch, keep_closed) -> bool:
        """Fork a child that answers batch [(conn, method, handler)]; the loop's copies of the
        connections are closed here. keep_closed: sockets the child must close first (the
        listening socket, other clients' connections), so that none stays open in it.
        False when the fork failed: the caller still owns the connections."""
        # While the child lives, a full collection in the loop would write to every object's
        # header and so copy the whole heap away from the child: keep the collector off the
        # objects the snapshot shares until the child is gone (reap() unfreezes).
        gc.freeze()
        try:
            pid = os.fork()
        except OSError as e:
            gc.unfreeze()
            self.errors += 1
            if self.log is not None:
                self.log.warning("metrics endpoint: cannot fork a render: %s", e)
            return False
        if pid == 0:
            _child(batch, keep_closed)  # never returns
        self.pid = pid
        self.forks += 1
        self.handed += len(batch)
        for conn, _method, _handler in batch:
            conn.close()
        return True

    def reap(self) -> bool:
        """True when the child has exited (or none runs): the next batch may start."""
        if self.pid is None:
            return True
        try:
            pid, _status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid = self.pid
        if pid == 0:
            return False
        self.pid = None
        gc.unfreeze()
        return True

    def close(self) -> None:
        """The agent stops: end the render under way, if any (its clients see the connection close)."""
        if self.pid is None:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        self.pid = None
        gc.unfreeze()


def _child(batch, keep_closed) -> None:
    """Render and answer, then exit without ever returning into the agent's loop."""
    status = 0
    try:
        # The loop's handlers write to its wake-up pipe; systemd's SIGTERM to the unit ends us plainly.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        gc.disable()  # short-lived: a collection would copy pages of the snapshot for nothing
        _lower_priority()
        for sock in keep_closed:
            sock.close()  # never selector.unregister() here: the epoll instance is the loop's too
        bodies = {}
        for conn, method, handler in batch:
            try:
                if handler not in bodies:
                    bodies[handler] = handler()
                ctype, body = bodies[handler]
                payload = http_answer(method, "200 OK", ctype, body)
            except Exception as e:  # noqa: BLE001 - the client gets the error, the loop never sees it
                status = 1
                payload = http_answer(method, "500 Internal Server Error", "text/plain", ("render failed: %s\n" % e).encode())
            try:
                conn.settimeout(SEND_TIMEOUT_S)
                conn.sendall(payload)
            except OSError:
                pass
            conn.close()
    except BaseException:  # noqa: BLE001 - whatever happens, this process must not go on as the agent
        status = 1
    finally:
        os._exit(status)


def _lower_priority() -> None:
    """Ordinary scheduling and a lower priority than the loop, which may run SCHED_RR
    (ebpf_failover_agent_realtime); leaving real time needs no privilege."""
    try:
        if os.sched_getscheduler(0) != os.SCHED_OTHER:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        os.nice(10)  # without real time (or next to other work) the loop still gets ~10 times its share
    except OSError:
        pass
