#!/usr/bin/env bash
# ansible-test sanity for the collection. ansible-test insists on running from
# a real .../ansible_collections/<namespace>/<name> directory, so the tracked
# tree is mirrored there first. Expects scripts/bootstrap.sh to be sourced.
set -euo pipefail
root="${EDGEFT_ROOT:?source scripts/bootstrap.sh first}"
# Outside the checkout: inside it, ansible-test would list files with the outer
# repository's git, which ignores the mirror.
dest="${EDGEFT_SANITY_DIR:-/var/tmp/edgeft-sanity}/ansible_collections/edgeft/failover"
mkdir -p "${dest}"
(cd "${root}" && git ls-files -co --exclude-standard -z) |
  rsync -a --delete --from0 --files-from=- "${root}/" "${dest}/"
# rsync --files-from never deletes; drop files that are no longer tracked.
(cd "${root}" && git ls-files -co --exclude-standard) | sort > "${dest}/../.wanted"
(cd "${dest}" && find . -type f -printf '%P\n' | sort) | comm -13 "${dest}/../.wanted" - |
  (cd "${dest}" && xargs -r -d '\n' rm -f --)
# A virtualenv of its own: --requirements installs ansible-test's pinned linters
# (pylint, yamllint, voluptuous...) there, not into the project's .venv. Not
# --venv: that bootstraps pip from a download site this network may not reach.
# In the machine's cache like the project's .venv (scripts/bootstrap.sh), one per ansible-core
# pin, so a fresh clone does not reinstall ansible-test's linters.
core_pin="$(grep -i '^ansible-core==' "${root}/requirements.txt")"
sanity_venv="${EDGEFT_CACHE:-/var/cache/edgeft}/sanity-venv/$(printf '%s' "${core_pin}" | sha256sum | cut -c1-16)"
mkdir -p "$(dirname "${sanity_venv}")"
exec {sanity_lock}>"${sanity_venv}.lock"
flock "${sanity_lock}"
if [[ "$(cat "${sanity_venv}/.edgeft-pins" 2>/dev/null || true)" != "${core_pin}" ]]; then
  rm -rf "${sanity_venv}"
  /usr/bin/python3 -m venv "${sanity_venv}"
  "${sanity_venv}/bin/pip" install -q --disable-pip-version-check "${core_pin}" 2> >(grep -v "is ignored: it is neither" >&2)
  echo "${core_pin}" > "${sanity_venv}/.edgeft-pins"
fi
# ansible-test fetches get-pip.py for its per-test venvs from a site this
# network may not reach; give it an equivalent that uses ensurepip and the index.
pip_version="$(grep -o "pip='[0-9.]*'" "$("${sanity_venv}/bin/python" -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')/_internal/python_requirements.py" | head -n1 | tr -dc '0-9.')"
cache="${HOME}/.ansible/test/cache/get_pip_${pip_version//./_}.py"
if [[ ! -s "${cache}" ]]; then
  mkdir -p "$(dirname "${cache}")"
  cp "${root}/scripts/get_pip_offline.py" "${cache}"
fi
cd "${dest}"
export PATH="${sanity_venv}/bin:${PATH}"
exec ansible-test sanity --requirements --python "$("${sanity_venv}/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" --color no "$@"
