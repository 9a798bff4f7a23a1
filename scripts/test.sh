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

# pytest in two parts, every test in exactly one (the `serial` marker, pytest.ini):
# - in parallel, two workers per CPU (pytest-xdist, a module's tests on one worker; these tests
#   wait on namespaces and subprocesses about half their time): the pure and kernel tests, each
#   in namespaces, pins and labs of its own;
# - then alone, one after another: what measures time or lost packets against bounds written for
#   an idle machine, the deployed labs and the molecule scenarios.
# Exit status 5 (no tests collected) fails the run like any other failure. Each part lists its
# slowest tests before its summary; the last two lines repeat both summaries (CI reads them).
# With arguments (a path, -k, ...) pytest runs once, alone, on what they select.
if (( $# > 0 )); then
  stage "pytest"
  python -m pytest --durations=60 "$@"
  exit
fi
parts="$(mktemp -d)"
trap 'rm -rf "${parts}"' EXIT
# One part of pytest: its output shown and kept (for the last line), its exit status kept.
pytest_part() {
  local part=$1
  shift
  { local rc=0; python -m pytest "$@" || rc=$?; echo "${rc}" >"${parts}/${part}.status"; } | tee "${parts}/${part}.log"
}
stage "pytest, in parallel: tests not marked serial"
pytest_part parallel -n "$(( 2 * $(nproc) ))" --dist loadfile -m "not serial" --durations=20
stage "pytest, alone: tests marked serial"
pytest_part serial -m serial --durations=60
stage "done"
status=0
for part in parallel serial; do
  rc="$(<"${parts}/${part}.status")"
  printf '%-8s part (exit %s): %s\n' "${part}" "${rc}" "$(tail -n 1 "${parts}/${part}.log")"
  [[ "${rc}" == 0 ]] || status=1
done
exit "${status}"
