#!/usr/bin/env bash
# The main job: a training job rides through a ToR failure on the namespace lab.
# Lab up; the job across every host while the rack-1 plane-a ToR dies silently, is powered
# off and powered on again, first without edgeft, then with edgeft deployed by site.yml;
# a report (per fault: outage, packets lost, resets, steps delayed) and a PNG timeline;
# lab down. Options go to bin/edgeft-demo (--help), e.g. --workload ddp, --without-edgeft.
# Installs what it needs first (scripts/bootstrap.sh; PyTorch only for --workload ddp). Run as root.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
for arg in "$@"; do
  case "${arg}" in --workload=ddp | ddp) export EDGEFT_WITH_TORCH=1 ;; esac
done
# shellcheck source=scripts/bootstrap.sh
source "${here}/bootstrap.sh"
cd "${EDGEFT_ROOT}"
exec edgeft-demo "$@"
