# edgeft multihome core: a host's plane NICs (addresses, MTU, per-plane routing
# tables and source rules, sysctls) declared, diffed, applied and rolled back.
# Free of Ansible imports; docs/multihome.md describes what it manages.
