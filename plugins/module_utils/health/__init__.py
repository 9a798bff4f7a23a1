# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a deployed host is healthy, as a rollout's gate asks it (module host_health).

gate: the data path's planes, the peer table against the inventory, and check probes on
every plane to the peers that must answer. agent_view: what the running agent judges (its
/status). Free of Ansible imports; every error names the option that caused it.
"""
