"""What the agent's check refuses about the TCP program before anything is attached
(agent/checks.py check_tcp, datapath/sockops.py): the kernel's bounds and features, named by
option. The kernel's configuration is the test's (no kernel is asked)."""

from __future__ import annotations

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.agent import checks
from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import Config, ConfigError
from ansible_collections.edgeft.failover.plugins.module_utils.datapath import sockops
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import DatapathError

PLANES = [{"name": "a", "interface": "fab0", "ipv4": "198.18.1.11"}]


def tcp_config(tmp_path, **tcp):
    obj = tmp_path / "edgeft-tcp.bpf.o"
    obj.write_bytes(b"\x7fELF")
    return Config({"planes": PLANES, "tcp": dict({"enabled": True, "object": str(obj)}, **tcp)})


@pytest.mark.parametrize("hz, rto_ms, delack_ms, refused", [
    (250, 16, 8, None),
    (250, 4, 0, "tcp.rto_min_ms: 4 ms is below what this kernel accepts: 2 jiffies, 8 ms at HZ=250; set it to at least 8"),
    (250, 16, 7, "tcp.delack_max_ms: 7 ms is below what this kernel accepts"),
    (1000, 4, 2, None),
    (100, 16, 8, "tcp.rto_min_ms: 16 ms is below what this kernel accepts: 2 jiffies, 20 ms at HZ=100"),
    (None, 2, 1, None),  # HZ unknown: the program counts the kernel's refusals instead
])
def test_the_kernels_bounds(hz, rto_ms, delack_ms, refused):
    settings = sockops.TcpSettings(rto_ms * 1000, delack_ms * 1000, 0)
    if refused is None:
        sockops.check_settings(settings, hz)
    else:
        with pytest.raises(DatapathError, match="^" + refused.replace(".", r"\.")):
            sockops.check_settings(settings, hz)


def test_a_kernel_without_cgroup_bpf_is_refused_naming_the_switch(tmp_path, monkeypatch):
    monkeypatch.setattr(sockops, "kernel_config", lambda *names: {"CONFIG_CGROUP_BPF": "n"})
    with pytest.raises(ConfigError, match=r"^tcp\.enabled: this kernel was built without cgroup BPF programs"):
        checks.check_tcp(tcp_config(tmp_path))


def test_a_missing_object_or_cgroup_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(sockops, "kernel_config", lambda *names: {})
    cfg = tcp_config(tmp_path, object=str(tmp_path / "missing.bpf.o"))
    with pytest.raises(ConfigError, match=r"^tcp\.object: .*missing\.bpf\.o does not exist"):
        checks.check_tcp(cfg)
    with pytest.raises(ConfigError, match=r"^tcp\.cgroup: .* is not a directory of the cgroup v2 hierarchy"):
        checks.check_tcp(tcp_config(tmp_path, cgroup=str(tmp_path)))
    checks.check_tcp(Config({"planes": PLANES}))  # off: nothing checked


def test_a_relative_cgroup_is_under_the_cgroup_v2_root(monkeypatch):
    monkeypatch.setattr(sockops, "cgroup2_root", lambda mounts="": "/sys/fs/cgroup")
    assert sockops.resolve_cgroup("") == "/sys/fs/cgroup"
    assert sockops.resolve_cgroup("system.slice/trainer.service") == "/sys/fs/cgroup/system.slice/trainer.service"
    assert sockops.resolve_cgroup("/run/edgeft-lab/x/cgroup/h") == "/run/edgeft-lab/x/cgroup/h"
    monkeypatch.setattr(sockops, "cgroup2_root", lambda mounts="": None)
    assert sockops.resolve_cgroup("system.slice") is None
