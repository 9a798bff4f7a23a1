#!/usr/bin/env bash
# The main job: bring up the namespace lab, deploy edgeft with site.yml, show the
# fabric and a reachability matrix across planes and families, then tear it down.
# Installs what it needs first (scripts/bootstrap.sh). Run as root.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/bootstrap.sh
source "${here}/bootstrap.sh"
cd "${EDGEFT_ROOT}"

topology="${EDGEFT_TOPOLOGY:-default}"
lab() { edgeft-lab --topology "${topology}" "$@"; }
stage() { printf '\n==== %s ====\n' "$*"; }

# Always leave the machine as it was, also on failure or Ctrl-C.
trap 'stage "lab down"; lab down' EXIT

stage "lab up (${topology})"
lab up --inventory "${EDGEFT_ROOT}/.build/lab-${topology}.yml"

stage "deploy: playbooks/site.yml"
ansible-playbook -i "${EDGEFT_ROOT}/.build/lab-${topology}.yml" playbooks/site.yml

stage "fabric"
lab status

stage "reachability: every host to every other host, every plane, IPv4 and IPv6"
lab ping-matrix
