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
import yaml
from repo import REPO

from ansible_collections.edgeft.failover.plugins.filter.agent import agent_config_refusal
from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import MAXIMUM

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
    ("idle_rate", {"idle_probes_per_s": 0}, "idle_probes_per_s: must be at least 1, got 0"),
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
    ("tcp_type", {"tcp": "on"}, "tcp: expected an object (or true/false)"),
    ("tcp_key", {"tcp": {"rto_ms": 10}}, "tcp.rto_ms: unknown option"),
    ("tcp_no_object", {"tcp": True}, "tcp.object: the TCP program's object file is needed"),
    ("tcp_relative_object", {"tcp": {"enabled": True, "object": "edgeft-tcp.bpf.o"}}, "tcp.object: 'edgeft-tcp.bpf.o' must be an absolute"),
    ("tcp_cgroup_up", {"tcp": {"cgroup": "../machine"}}, "tcp.cgroup: '../machine' must be a path without '..'"),
    ("tcp_delack", {"tcp": {"rto_min_ms": 10, "delack_max_ms": 10}}, "tcp.delack_max_ms: 10 ms is not below tcp.rto_min_ms"),
    ("tcp_signal", {"tcp": {"signal": "yes"}}, "tcp.signal: expected true or false"),
    ("tcp_missing_object", {"tcp": {"enabled": True, "object": "/nonexistent/edgeft-tcp.bpf.o"}}, "pin_root: "),
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


# Numbers: JSON integers only (not floats, NaN, Infinity, booleans or strings), each in range.
NUMBERS = [
    ("nan", '"interval_ms": NaN', "interval_ms: expected an integer, got NaN"),
    ("infinity", '"interval_ms": Infinity', "interval_ms: expected an integer, got Infinity"),
    ("exponent", '"hold_down_ms": 1e12', "hold_down_ms: expected an integer, got 1000000000000.0"),
    ("float", '"multiplier": 3.0', "multiplier: expected an integer, got 3.0"),
    ("boolean", '"multiplier": true', "multiplier: expected an integer, got true"),
    ("string", '"interval_ms": "10"', 'interval_ms: expected an integer, got "10"'),
    ("interval_too_long", '"interval_ms": 60001', "interval_ms: must be at most 60000, got 60001"),
    ("idle_too_long", '"idle_interval_ms": 3600001', "idle_interval_ms: must be at most 3600000, got 3600001"),
    ("idle_rate_too_high", '"idle_probes_per_s": 100001', "idle_probes_per_s: must be at most 100000, got 100001"),
    ("window_too_long", '"active_window_ms": 3600001', "active_window_ms: must be at most 3600000"),
    ("multiplier_too_large", '"multiplier": 101', "multiplier: must be at most 100, got 101"),
    ("hold_down_too_long", '"hold_down_ms": 3600001', "hold_down_ms: must be at most 3600000"),
    ("tos", '"probe_tos": 256', "probe_tos: must be at most 255, got 256"),
    ("resync", '"resync_ms": 0', "resync_ms: must be at least 1, got 0"),
    ("dampening_nan", '"dampening": {"half_life_ms": NaN}', "dampening.half_life_ms: expected an integer, got NaN"),
    ("dampening_large", '"dampening": {"max_suppress_ms": 3600001}', "dampening.max_suppress_ms: must be at most 3600000"),
    ("backup_table_float", '"backup_routes": {"table": 60919.5}', "backup_routes.table: expected an integer, got 60919.5"),
    ("rto_min_too_long", '"tcp": {"rto_min_ms": 201}', "tcp.rto_min_ms: must be at most 200, got 201"),
    ("delack_negative", '"tcp": {"delack_max_ms": -1}', "tcp.delack_max_ms: must be at least 0, got -1"),
]


@pytest.mark.parametrize("command", ["check", "run"])
@pytest.mark.parametrize("case,member,message", NUMBERS, ids=[n[0] for n in NUMBERS])
def test_numbers_are_json_integers_in_range(tmp_path, base, command, case, member, message):
    text = json.dumps(base)[:-1] + ", " + member + "}"  # literal JSON: NaN and 1e12 as written
    r = run_agent(tmp_path, text, command=command)
    assert r.returncode == 2, (case, r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edgeft-agent: error: " + message), r.stderr


# The role checks the configuration it would write with the agent's own rules (a filter).
ROLE_SETTINGS = {"pin_root": "/sys/fs/bpf/edgeft", "state_dir": "/var/lib/edgeft", "peers": [],
                 "planes": [{"name": "a", "interface": "fab0", "ipv4": "198.18.1.11/16"},
                            {"name": "b", "interface": "fab1", "ipv4": "198.19.1.11/16"}],
                 "interval_ms": 10, "idle_interval_ms": 1000, "active_window_ms": 2000, "multiplier": 3,
                 "hold_down_ms": 1000, "dampening": {}, "backup_routes": True, "metrics_listen": "127.0.0.1:9531",
                 "log_level": "info"}


def test_the_role_filter_refuses_what_the_agent_refuses_naming_the_role_variable():
    assert agent_config_refusal(ROLE_SETTINGS, "ebpf_failover_agent_") == ""
    assert agent_config_refusal(dict(ROLE_SETTINGS, hold_down_ms=20), "ebpf_failover_agent_").startswith(
        "ebpf_failover_agent_hold_down_ms: 20 ms is shorter than the detection time")
    assert agent_config_refusal(dict(ROLE_SETTINGS, confirm_interval_ms=10), "ebpf_failover_agent_").startswith(
        "ebpf_failover_agent_confirm_interval_ms: 10 ms is not shorter than interval_ms (10 ms)")
    assert agent_config_refusal(dict(ROLE_SETTINGS, interval_ms=60001), "ebpf_failover_agent_") == (
        "ebpf_failover_agent_interval_ms: must be at most 60000, got 60001")
    assert agent_config_refusal(dict(ROLE_SETTINGS, dampening={"reuse": 5000}), "ebpf_failover_agent_").startswith(
        "ebpf_failover_agent_dampening.reuse: 5000 must be below")
    # The role's TCP variables are flat: ebpf_failover_agent_tcp, ebpf_failover_agent_tcp_rto_min_ms, ...
    assert agent_config_refusal(dict(ROLE_SETTINGS, tcp={"enabled": True, "object": ""}), "ebpf_failover_agent_").startswith(
        "ebpf_failover_agent_tcp_object: the TCP program's object file is needed")
    assert agent_config_refusal(dict(ROLE_SETTINGS, tcp={"enabled": "maybe"}), "ebpf_failover_agent_").startswith(
        "ebpf_failover_agent_tcp: expected true or false")
    assert agent_config_refusal(dict(ROLE_SETTINGS, tcp={"rto_min_ms": 300}), "ebpf_failover_agent_") == (
        "ebpf_failover_agent_tcp_rto_min_ms: must be at most 200, got 300")
    # The plane declaration has its own variable: its message is the plane model's.
    planes = [dict(ROLE_SETTINGS["planes"][0]), dict(ROLE_SETTINGS["planes"][1], interface="")]
    assert agent_config_refusal(dict(ROLE_SETTINGS, planes=planes), "ebpf_failover_agent_") == (
        "planes[1].interface: an interface name is required")


def test_the_role_documents_the_agents_bounds():
    """meta/argument_specs.yml states each timer's upper bound as agent/config.py enforces it."""
    specs = yaml.safe_load((REPO / "roles" / "ebpf_failover" / "meta" / "argument_specs.yml").read_text())
    options = specs["argument_specs"]["main"]["options"]
    for setting in ("interval_ms", "idle_interval_ms", "idle_probes_per_s", "active_window_ms", "multiplier", "confirm_interval_ms", "hold_down_ms",
                    "metrics_peers", "metrics_min_interval_ms", "tcp.rto_min_ms", "tcp.delack_max_ms"):
        text = " ".join(options["ebpf_failover_agent_" + setting.replace(".", "_")]["description"])
        assert str(MAXIMUM[setting]) in text, (setting, text)
    dampening = " ".join(options["ebpf_failover_agent_dampening"]["description"])
    for key in ("penalty", "suppress", "reuse", "half_life_ms", "max_suppress_ms"):
        assert str(MAXIMUM["dampening." + key]) in dampening, key
