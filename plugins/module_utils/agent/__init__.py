# edgeft failover agent: the per-host control loop (probes, link events, metrics).
# Run with `python3 -m ansible_collections.edgeft.failover.plugins.module_utils.agent` or bin/edgeft-agent;
# see docs/agent.md.
