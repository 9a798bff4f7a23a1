# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent_config_refusal filter (documented in agent_config_refusal.yml)."""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.agent.config import Config, ConfigError

# Settings the role takes from variables of their own name (ebpf_failover_pin_root, edgeft_planes...).
NOT_PREFIXED = ("pin_root", "state_dir", "planes", "peers")


def agent_config_refusal(settings, prefix=""):
    """Why the failover agent would refuse this configuration, or '' when it would start with it.
    A message about one of the agent's own settings starts with prefix + its name."""
    try:
        Config(settings)
    except ConfigError as e:
        text = str(e)
        setting = text.split(":", 1)[0].split(".", 1)[0].split("[", 1)[0]
        if setting == "tcp" and prefix:  # the role's variables are flat: ..._tcp, ..._tcp_rto_min_ms
            text = "tcp" + text[len("tcp.enabled"):] if text.startswith("tcp.enabled") else text.replace("tcp.", "tcp_", 1)
        return text if setting in NOT_PREFIXED or not prefix else prefix + text
    return ""


class FilterModule:
    def filters(self):
        return {"agent_config_refusal": agent_config_refusal}
