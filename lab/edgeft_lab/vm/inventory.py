"""The inventory of a VM lab: the lab's inventory (planes, racks, switches) with each VM reached
over ssh and the collection's production defaults (systemd units, /sys/fs/bpf, persistence)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..inventory import HEADER, build_inventory
from ..plan import FabricPlan
from .ssh import ANSIBLE_SSH_ARGS

# Namespace hosts share the machine's filesystem and systemd; VMs have their own.
NAMESPACE_ONLY = (
    "ansible_host", "ansible_connection", "edgeft_pin_root", "edgeft_state_dir", "edgeft_src_dir",
    "edgeft_agent_service", "edgeft_agent_dir", "edgeft_agent_config", "edgeft_persist",
    # A VM has a kernel of its own: its TCP program goes on its cgroup v2 root (the role's default).
    "edgeft_agent_tcp_cgroup",
)


def build_vm_inventory(plan: FabricPlan, bpffs_root: Path, ports: dict[str, int], key: Path) -> dict[str, Any]:
    doc = build_inventory(plan, bpffs_root)
    hosts = doc["all"]["children"]["fabric"]["hosts"]
    for name, port in ports.items():
        lab_vars = {k: v for k, v in hosts[name].items() if k not in NAMESPACE_ONLY}
        hosts[name] = {
            "ansible_host": "127.0.0.1",
            "ansible_port": port,
            "ansible_user": "root",
            "ansible_connection": "ssh",
            "ansible_ssh_private_key_file": str(key),
            "ansible_ssh_common_args": ANSIBLE_SSH_ARGS,
            **lab_vars,
        }
    doc["all"]["vars"]["edgeft_lab"]["machines"] = "vm"
    return doc


def write_vm_inventory(plan: FabricPlan, bpffs_root: Path, ports: dict[str, int], key: Path, path: Path) -> None:
    body = yaml.safe_dump(build_vm_inventory(plan, bpffs_root, ports, key), sort_keys=False, width=100)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(HEADER + f"# topology: {plan.topology.source}, lab name: {plan.name} (VM hosts)\n" + body)
    tmp.replace(path)
