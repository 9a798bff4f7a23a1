#!/usr/bin/env bash
# Standalone runner (ansible-test integration style): creates a throwaway network namespace holding
# loopback and a veth pair (created inside it, the machine's interfaces are never touched), runs
# test_connection.yml with pipelining on and then off, and removes the namespace on any exit.
# Needs root and edgeft.failover on ANSIBLE_COLLECTIONS_PATH (source scripts/bootstrap.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

ns="eft-it-$$-${RANDOM}"
work="$(mktemp -d)"
cleanup() { ip netns del "${ns}" 2>/dev/null || true; rm -rf "${work}"; }
trap cleanup EXIT

ip netns add "${ns}"
ip -n "${ns}" link add itv0 type veth peer name itv1
for dev in lo itv0 itv1; do ip -n "${ns}" link set "${dev}" up; done
ip -n "${ns}" addr add 198.18.251.1/30 dev itv0

export EDGEFT_TEST_NETNS="${ns}"
for pipelining in 1 0; do
  echo "== pipelining=${pipelining} (namespace ${ns})"
  rm -rf "${work:?}"/*
  ANSIBLE_PIPELINING="${pipelining}" ansible-playbook -i inventory.yml test_connection.yml \
    -e "netns_work_dir=${work}" -e '{"netns_expected_interfaces": ["lo", "itv0", "itv1"]}' "$@"
done
