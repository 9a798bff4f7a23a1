"""The role's agent templates: the unit passes `systemd-analyze verify`, and the
rendered configuration is one the agent accepts (the lab tests run on it)."""

from __future__ import annotations

import json
import shutil
import subprocess

import import_graph
import jinja2
import jinja2.nativetypes
import pytest
import yaml

from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import Config
from repo import REPO

ROLE = REPO / "roles" / "ebpf_failover"
DEFAULTS = yaml.safe_load((REPO / "roles" / "ebpf_failover" / "defaults" / "main.yml").read_text())


def render(name, **variables):
    env = jinja2.Environment(trim_blocks=True, undefined=jinja2.StrictUndefined)  # Ansible's template settings
    env.filters["bool"] = lambda v: v in (True, "true", "yes", "1", 1)
    return env.from_string((ROLE / "templates" / name).read_text()).render(**variables)


L2_PLANES = [{"name": "a", "interface": "fab0"}, {"name": "b", "interface": "fab1"}]
ROUTED_PLANES = [dict(p, gateway4="198.18.%d.1" % i) for i, p in enumerate(L2_PLANES)]


@pytest.mark.parametrize("realtime,planes,tcp,caps", [
    (True, L2_PLANES, False, "CAP_BPF CAP_NET_ADMIN"),
    (False, L2_PLANES, False, "CAP_BPF CAP_NET_ADMIN"),
    (True, ROUTED_PLANES, False, "CAP_BPF CAP_NET_ADMIN CAP_NET_RAW"),  # raw ICMP for first-hop probes
    (True, ROUTED_PLANES, True, "CAP_BPF CAP_NET_ADMIN CAP_PERFMON CAP_NET_RAW"),  # the TCP program
], ids=["realtime", "normal", "routed", "tcp"])
def test_unit_file_verifies(tmp_path, realtime, planes, tcp, caps):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    unit = tmp_path / "edgeft-agent.service"
    unit.write_text(render("edgeft-agent.service.j2", ansible_managed="test", ebpf_failover_agent_dir="/usr/local/lib/edgeft/agent",
                           ebpf_failover_agent_config="/etc/edgeft/agent.json", ebpf_failover_agent_realtime=realtime,
                           ebpf_failover_planes=planes, ebpf_failover_agent_tcp=tcp))
    r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    text = unit.read_text()
    assert "Restart=always" in text and "CapabilityBoundingSet=%s\n" % caps in text
    assert ("CPUSchedulingPolicy=rr" in text) == realtime


def test_restore_unit_file_verifies(tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed")
    unit = tmp_path / "edgeft-datapath.service"
    unit.write_text(render("edgeft-datapath.service.j2", ansible_managed="test", ebpf_failover_agent_dir="/usr/local/lib/edgeft/agent",
                           ebpf_failover_datapath_config="/var/lib/edgeft/datapath.json"))
    r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    text = unit.read_text()
    assert "Type=oneshot" in text and "Before=edgeft-agent.service" in text
    assert "edgeft-agent restore-datapath --datapath-config /var/lib/edgeft/datapath.json" in text


def test_rendered_configuration_is_accepted():
    planes = [{"name": "a", "interface": "fab0", "ipv4": "198.18.1.11/16", "ipv6": "fd0e:d6ef:7a00:1::b/56", "switch": "tor-r1-a",
               "gateway4": "198.18.1.1", "gateway6": "fd0e:d6ef:7a00:1::1"},
              {"name": "b", "interface": "fab1", "ipv4": "198.19.1.11/16", "switch": "tor-r1-b"}]
    peers = [{"name": "r2h1", "planes": [{"name": "a", "ipv4": "198.18.2.11/16"}, {"name": "b", "ipv4": "198.19.2.11/16"}]}]
    env = jinja2.Environment()
    env.filters["to_nice_json"] = lambda v, indent=2, sort_keys=True: json.dumps(v, indent=indent, sort_keys=sort_keys)
    env.filters["dict2items"] = lambda d: [{"key": k, "value": v} for k, v in d.items()]
    env.filters["items2dict"] = lambda items: {i["key"]: i["value"] for i in items}
    env.filters["bool"] = lambda v: v if isinstance(v, bool) else str(v).lower() in ("true", "yes", "1")
    variables = {k: v for k, v in DEFAULTS.items() if not str(v).startswith("{{")}
    # The settings (vars/main.yml) evaluate to native types, as Ansible's templating does.
    native = jinja2.nativetypes.NativeEnvironment()
    native.filters.update(env.filters)
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    # The defaults that depend on other variables, as they evaluate with the object loader.
    context = dict(ebpf_failover_pin_root="/sys/fs/bpf/edgeft", ebpf_failover_state_dir="/var/lib/edgeft",
                   ebpf_failover_planes=planes, ebpf_failover_peers=peers, ebpf_failover_agent_tcp=True,
                   ebpf_failover_agent_tcp_cgroup="", ebpf_failover_agent_dir="/usr/local/lib/edgeft/agent",
                   ebpf_failover_tcp_object_file=role_vars["ebpf_failover_tcp_object_file"], **variables)

    def render(value):
        if isinstance(value, dict):
            return {k: render(v) for k, v in value.items()}
        return native.from_string(value).render(**context) if isinstance(value, str) else value

    settings = render(role_vars["ebpf_failover_agent_settings"])
    text = env.from_string((ROLE / "templates" / "agent.json.j2").read_text()).render(ebpf_failover_agent_settings=settings)
    cfg = Config(json.loads(text))
    assert [p["interface"] for p in cfg.planes] == ["fab0", "fab1"]
    assert [p["gateway"] for p in cfg.planes] == [{4: "198.18.1.1", 6: "fd0e:d6ef:7a00:1::1"}, {4: None, 6: None}]
    assert cfg.peer_names == {"198.18.2.11": "r2h1", "198.19.2.11": "r2h1"}
    assert (cfg.interval_ms, cfg.multiplier, cfg.hold_down_ms) == (10, 3, 1000)
    assert cfg.tcp == {"enabled": True, "object": "/usr/local/lib/edgeft/agent/edgeft-tcp.bpf.o", "cgroup": "",
                       "rto_min_ms": 16, "delack_max_ms": 8, "signal": True}


def _shipped_modules() -> set:
    """The files of the agent's launcher, its package and the boot-time restore, with everything
    they import and every package they sit in (Python imports those first)."""
    graph = import_graph.graph()
    roots = ["%s.agent.cli" % import_graph.MODULE_UTILS, "%s.agent.__main__" % import_graph.MODULE_UTILS,
             "%s.restore" % import_graph.MODULE_UTILS]
    needed = import_graph.closure(graph, roots)
    for name in list(needed):
        parts = name.split(".")
        needed.update(".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in graph)
    paths = import_graph.modules()
    return {str(paths[name].relative_to(REPO)) for name in needed}


def test_the_role_ships_exactly_the_files_the_agent_and_the_restore_import():
    listed = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["ebpf_failover_agent_modules"]
    assert listed == sorted(listed), "keep ebpf_failover_agent_modules sorted"
    assert set(listed) == _shipped_modules()
