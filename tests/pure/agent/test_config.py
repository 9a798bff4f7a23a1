"""The agent refuses a bad configuration: one line naming the option, exit code 2.

Run as a process (the launcher with the system Python, as on a target). Every
case fails before the agent changes anything, so no lab is needed: the plane
NIC is `lo` (with a lab address: the plane model refuses loopback addresses on a plane, as
every module does), and the pin root an empty directory.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from repo import REPO

LAUNCHER = str(REPO / "bin" / "edgeft-agent")


def run_agent(tmp_path, config, *args, command="run"):
    path = tmp_path / "agent.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    return subprocess.run(["/usr/bin/python3", LAUNCHER, command, "--config", str(path)] + list(args),
                          capture_output=True, text=True, timeout=30, check=False)


@pytest.fixture
def base(tmp_path):
    pins = tmp_path / "pins"
    pins.mkdir()
    return {"pin_root": str(pins), "state_dir": str(tmp_path / "state"), "metrics_listen": False,
            "planes": [{"name": "a", "interface": "lo", "ipv4": "198.18.0.1"}]}


CASES = [
    ("interval_ms", {"interval_ms": 0}, "interval_ms: must be a positive number"),
    ("interval_ms_type", {"interval_ms": "fast"}, "interval_ms: expected an integer"),
    ("multiplier", {"multiplier": 0}, "multiplier: must be at least 1"),
    ("idle_interval", {"interval_ms": 10, "idle_interval_ms": 5}, "idle_interval_ms: 5 ms is shorter than interval_ms"),
    ("active_window", {"active_window_ms": 10}, "active_window_ms: must be at least 100 ms"),
    ("hold_down", {"interval_ms": 10, "multiplier": 3, "hold_down_ms": 20}, "hold_down_ms: 20 ms is shorter than the detection time"),
    ("unknown_interface", {"planes": [{"name": "a", "interface": "edgeft-nosuch0"}]}, "planes[0].interface: no interface"),
    ("no_planes", {"planes": []}, "planes: at least one plane is required"),
    ("plane_twice", {"planes": [{"name": "a", "interface": "lo"}, {"name": "a", "interface": "lo2"}]}, "planes[1].name"),
    ("bad_address", {"planes": [{"name": "a", "interface": "lo", "ipv4": "fd00::1"}]}, "planes[0].ipv4: fd00::1 is not an IPv4"),
    ("no_pinned_maps", {}, "pin_root: "),
    ("relative_pin_root", {"pin_root": "pins"}, "pin_root: 'pins' must be an absolute path"),
    ("unknown_option", {"probe_every": 5}, "probe_every: unknown option"),
    ("metrics_listen", {"metrics_listen": "localhost"}, "metrics_listen: 'localhost' is not ADDRESS:PORT"),
    ("dampening", {"dampening": {"suppress": 500, "reuse": 750}}, "dampening.reuse: 750 must be below"),
    ("dampening_key", {"dampening": {"halflife": 5}}, "dampening.halflife: unknown option"),
    ("backup_table", {"backup_routes": {"table": 254}}, "backup_routes.table: 254 is not a free routing table"),
]


@pytest.mark.parametrize("case,change,message", CASES, ids=[c[0] for c in CASES])
def test_bad_configuration_is_refused_with_one_line(tmp_path, base, case, change, message):
    config = dict(base, **change)
    r = run_agent(tmp_path, config)
    assert r.returncode == 2, (case, r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("edgeft-agent: error: " + message), lines[0]
    assert r.stdout == ""


def test_no_pinned_maps_names_the_missing_map(tmp_path, base):
    r = run_agent(tmp_path, base)
    assert "edgeft_peers_v1 missing" in r.stderr and "ebpf_failover" in r.stderr


def test_unreadable_config_file(tmp_path, base):
    r = run_agent(tmp_path, "{not json")
    assert r.returncode == 2
    assert r.stderr.startswith("edgeft-agent: error: config: ") and "not valid JSON" in r.stderr


def test_command_line_overrides_the_file(tmp_path, base):
    r = run_agent(tmp_path, base, "--multiplier", "0")
    assert r.returncode == 2 and "multiplier: must be at least 1" in r.stderr


def test_check_command_refuses_like_run(tmp_path, base):
    r = run_agent(tmp_path, dict(base, interval_ms=0), command="check")
    assert r.returncode == 2 and "interval_ms:" in r.stderr
