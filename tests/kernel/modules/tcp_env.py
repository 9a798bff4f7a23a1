"""What the TCP program's kernel tests share: cgroup v2 directories of their own, a server process
on host 2 and a client process on host 1 (each in a cgroup if asked; the client reports its
connections' RTOs from TCP_INFO and, when told, keeps sending). Everything is removed after the
test."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid

import hostlab as L

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import objects, sockops

BPF_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "bpf")

# The client (started inside the cgroup: `ip netns exec` mounts a sysfs of its own, without it):
# connects to every target, prints each connection's tcpi_rto and
# tcpi_total_retrans (us, count) as JSON, then on "send" streams to the first target until its
# standard input closes, and prints the final figures.
CLIENT = r"""
import json, os, socket, struct, sys, threading, time
targets = json.loads(sys.argv[1])
socks = []
for family, addr, port in targets:
    s = socket.socket(socket.AF_INET if family == 4 else socket.AF_INET6, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect((addr, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    socks.append(s)
def info():
    out = []
    for s in socks:
        raw = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        out.append({"rto_us": struct.unpack_from("I", raw, 8)[0], "retrans": struct.unpack_from("I", raw, 100)[0]})
    return out
for _ in range(20):  # round trips: the accepting side's RTO converges over a few of them
    for s in socks:
        s.sendall(b"x" * 100)
    time.sleep(0.002)
time.sleep(0.1)
print(json.dumps(info()), flush=True)
stop = threading.Event()
def stream():
    socks[0].setblocking(False)
    while not stop.is_set():
        try:
            socks[0].send(b"y" * 1000)
        except (BlockingIOError, InterruptedError):
            pass
        time.sleep(0.001)
if sys.stdin.readline().strip() == "send":
    t = threading.Thread(target=stream, daemon=True)
    t.start()
    sys.stdin.readline()
    stop.set()
    t.join()
print(json.dumps(info()), flush=True)
"""


@contextlib.contextmanager
def cgroup():
    """A new cgroup v2 directory, removed after (once the processes in it ended)."""
    root = sockops.cgroup2_root()
    assert root, "no cgroup v2 hierarchy mounted here"
    path = os.path.join(root, "edgeft-test-%s" % uuid.uuid4().hex[:8])
    os.mkdir(path)
    try:
        yield path
    finally:
        deadline = time.monotonic() + 5
        while True:
            try:
                os.rmdir(path)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def tcp_object(tmp_path) -> str:
    """The sock_ops object, built with the two hosts' map sizes."""
    return objects.build_tcp(L.TUNABLES, os.path.abspath(BPF_DIR), str(tmp_path / "objects")).path


# The server: listens on each (family, address), prints the ports, reads and discards what its
# connections send until its standard input closes.
SERVER = r"""
import json, selectors, socket, sys
sel = selectors.DefaultSelector()
ports = []
for family, addr in json.loads(sys.argv[1]):
    s = socket.socket(socket.AF_INET if family == 4 else socket.AF_INET6, socket.SOCK_STREAM)
    s.bind((addr, 0))
    s.listen(8)
    sel.register(s, selectors.EVENT_READ, "listen")
    ports.append(s.getsockname()[1])
sel.register(sys.stdin, selectors.EVENT_READ, "stdin")
print(json.dumps(ports), flush=True)
while True:
    for key, _ in sel.select():
        if key.data == "stdin":
            sys.exit(0)
        if key.data == "listen":
            c, _ = key.fileobj.accept()
            sel.register(c, selectors.EVENT_READ, "conn")
        elif not key.fileobj.recv(65536):
            sel.unregister(key.fileobj)
            key.fileobj.close()
"""


def _spawn(lab, h, cgroup_path, script, arg):
    """python -c script arg in host h's namespace, inside cgroup_path if given (joined before
    `ip netns exec`, which mounts a sysfs of its own without the cgroups)."""
    cmd = ["ip", "netns", "exec", lab.ns[h], sys.executable, "-c", script, json.dumps(arg)]

    def join_cgroup():
        with open(os.path.join(cgroup_path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=join_cgroup if cgroup_path else None)  # pylint: disable=subprocess-popen-preexec-fn


def _first_line(proc, what):
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=5)
        raise AssertionError("the %s failed: %s" % (what, proc.stderr.read()))
    return json.loads(line)


def _end(proc):
    """End a process this module started, by its PID."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def listeners(lab, addresses, cgroup_path=None):
    """Listeners on host 2 (in cgroup_path if given); yields [(family, address, port)]."""
    proc = _spawn(lab, 2, cgroup_path, SERVER, addresses)
    try:
        ports = _first_line(proc, "server")
        yield [(family, addr, port) for (family, addr), port in zip(addresses, ports)]
    finally:
        _end(proc)


class Client:
    """The client process on host 1, in the cgroup; ended (by its PID) when the test ends."""

    def __init__(self, lab, cgroup_path, targets):
        self.proc = _spawn(lab, 1, cgroup_path, CLIENT, targets)
        self.first = _first_line(self.proc, "client")

    def stream(self):
        self.proc.stdin.write("send\n")
        self.proc.stdin.flush()

    def finish(self) -> list:
        out, err = self.proc.communicate("done\n", timeout=10)
        lines = out.strip().splitlines()
        assert lines, err
        return json.loads(lines[-1])

    def close(self):
        _end(self.proc)


@contextlib.contextmanager
def client(lab, cgroup_path, targets):
    c = Client(lab, cgroup_path, targets)
    try:
        yield c
    finally:
        c.close()


@contextlib.contextmanager
def black_hole(lab, h, source):
    """Host h silently drops what `source` sends it (nftables in its namespace), like a switch that
    died with its links up; removed after."""
    rules = "table inet edgeft_test {\n chain input {\n  type filter hook input priority -300;\n  ip saddr %s drop\n }\n}\n" % source
    subprocess.run(["ip", "netns", "exec", lab.ns[h], "nft", "-f", "-"], input=rules, text=True, check=True, capture_output=True)
    try:
        yield
    finally:
        subprocess.run(["ip", "netns", "exec", lab.ns[h], "nft", "delete", "table", "inet", "edgeft_test"], check=False,
                       capture_output=True)


def plane_object(tmp_path) -> str:
    """A plane's tc object (not the TCP program's), built with the two hosts' map sizes."""
    return objects.build(0, L.TUNABLES, os.path.abspath(BPF_DIR), str(tmp_path / "objects")).path
