"""The few QMP commands the lab sends to a VM's qemu (its monitor socket)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from ..errors import LabError
from . import paths

TIMEOUT = 5.0


class Monitor:
    """One QMP session: greeting, capabilities, then commands (events are skipped)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT)
        try:
            self.sock.connect(str(path))
        except OSError as exc:
            self.sock.close()
            raise LabError(f"cannot reach qemu's monitor at {path}: {exc}") from None
        self.reader = self.sock.makefile("r", encoding="utf-8")
        self._read()  # greeting
        self.execute("qmp_capabilities")

    def _read(self) -> dict[str, Any]:
        line = self.reader.readline()
        if not line:
            raise LabError(f"qemu's monitor at {self.path} closed the connection")
        return json.loads(line)

    def execute(self, command: str, **arguments: Any) -> Any:
        request: dict[str, Any] = {"execute": command}
        if arguments:
            request["arguments"] = arguments
        self.sock.sendall(json.dumps(request).encode() + b"\n")
        while True:
            reply = self._read()
            if "event" in reply:
                continue
            if "error" in reply:
                raise LabError(f"qemu refused {command}: {reply['error'].get('desc', reply['error'])}")
            return reply.get("return")

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def set_guest_link(run_dir: Path, host: str, nic: str, up: bool) -> None:
    """Carrier of the guest's NIC `nic` (its netdev has the same id). No VM running: nothing to do."""
    path = paths.qmp_socket(run_dir, host)
    if not path.exists():
        return
    with Monitor(path) as monitor:
        monitor.execute("set_link", name=nic, up=up)
