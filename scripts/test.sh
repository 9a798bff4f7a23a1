#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this):
# ruff, ansible-lint (production profile), ansible-test sanity, then pytest over tests/:
# pure, kernel (BPF, namespaces), lab (deployed labs) and the molecule scenarios (docs/testing.md).
# Installs what it needs first (scripts/bootstrap.sh). Run as root.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export EDGEFT_WITH_TORCH=1  # the demo's DDP workload is tested too
export EDGEFT_WITH_PROMTOOL=1  # the alert rules are checked with promtool
# shellcheck source=scripts/bootstrap.sh
source "${here}/bootstrap.sh"
cd "${EDGEFT_ROOT}"

# Each stage's start is stamped with the seconds since the command began, the bootstrap
# included (the suite's time budget is 30 minutes on 2 cores: docs/testing.md).
stage() { printf '\n==== %s (at %d s) ====\n' "$*" "${SECONDS}"; }

stage "ruff"
ruff check .

stage "ansible-lint (production profile)"
# ansible-lint installs the collection under .ansible/; drop a stale copy from an earlier run.
rm -rf "${EDGEFT_ROOT}/.ansible/collections/ansible_collections/edgeft"
ansible-lint --offline

stage "ansible-test sanity"
# Its per-test virtualenvs are set up once and cached; only failures are shown in full.
sanity_log="$(mktemp)"
if ! "${here}/sanity.sh" >"${sanity_log}" 2>&1; then
  grep -v "is ignored: it is neither" "${sanity_log}" | tail -n 80
  rm -f "${sanity_log}"
  exit 1
fi
grep -E '^(Running sanity test|WARNING: All targets skipped)' "${sanity_log}" | sed 's/^/  /' || true
rm -f "${sanity_log}"

stage "pytest"
# Exit status 5 (no tests collected) fails the run like any other failure.
# The 60 slowest tests are listed before the summary, so every run shows where its time went;
# pytest's summary stays the last line: CI reads it.
python -m pytest --durations=60 "$@"
