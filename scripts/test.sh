#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls exactly this):
# ruff, ansible-lint (production profile) and ansible-test sanity side by side, then pytest over tests/:
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

stage "ansible-lint (production profile) and ansible-test sanity, side by side"
# Two single-threaded linters on a 2-core machine, neither timing anything: about 20 s saved.
# ansible-lint installs the collection under .ansible/; drop a stale copy from an earlier run.
rm -rf "${EDGEFT_ROOT}/.ansible/collections/ansible_collections/edgeft"
lint_log="$(mktemp)"
sanity_log="$(mktemp)"
ansible-lint --offline >"${lint_log}" 2>&1 &
lint_pid=$!
sanity_status=0
"${here}/sanity.sh" >"${sanity_log}" 2>&1 || sanity_status=$?
lint_status=0
wait "${lint_pid}" || lint_status=$?
if (( lint_status != 0 )); then
  cat "${lint_log}"
else
  tail -n 1 "${lint_log}"
fi
# Sanity's per-test virtualenvs are set up once and cached; only failures are shown in full.
if (( sanity_status != 0 )); then
  grep -v "is ignored: it is neither" "${sanity_log}" | tail -n 80
else
  grep -E '^(Running sanity test|WARNING: All targets skipped)' "${sanity_log}" | sed 's/^/  /' || true
fi
rm -f "${lint_log}" "${sanity_log}"
if (( lint_status != 0 || sanity_status != 0 )); then
  echo "ansible-lint exited ${lint_status}, ansible-test sanity ${sanity_status}" >&2
  exit 1
fi

stage "pytest"
# Exit status 5 (no tests collected) fails the run like any other failure.
# The 60 slowest tests are listed before the summary, so every run shows where its time went;
# pytest's summary stays the last line: CI reads it.
python -m pytest --durations=60 "$@"
