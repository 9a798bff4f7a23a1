#!/usr/bin/env bash
# Installs what the demo and the test suite need, idempotently:
#   Debian packages, a virtualenv with pinned Python tools (.venv),
#   kernel headers where bcc can find them, and the collection on a
#   collections path (.build/collections) so Ansible resolves edgeft.failover.*.
# Sourced by scripts/demo.sh and scripts/test.sh; safe to run any number of times.
set -euo pipefail

EDGEFT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${EDGEFT_ROOT}/.venv"
BUILD="${EDGEFT_ROOT}/.build"
EDGEFT_CACHE="${EDGEFT_CACHE:-/var/cache/edgeft}"

log() { printf '[bootstrap] %s\n' "$*" >&2; }
die() { printf 'bootstrap: error: %s\n' "$*" >&2; exit 1; }

[[ ${EUID} -eq 0 ]] || die "must run as root (namespaces, tc and BPF need it): rerun with sudo"
command -v apt-get >/dev/null || die "apt-get not found: edgeft's quick start supports Debian 12+ and Ubuntu 22.04+"

# Debian packages: the lab (iproute2, nftables, ping), the data path (the object loader's
# clang and libbpf headers on this controller and libbpf on the lab's hosts; bcc and headers
# for the bcc loader; pyroute2 for the system Python that runs modules on targets) and the
# VM tooling later.
APT_PACKAGES=(
  iproute2 nftables iputils-ping procps rsync git shellcheck
  python3 python3-venv python3-pip python3-cryptography python3-yaml python3-jinja2
  clang libbpf-dev libbpf1
  python3-pyroute2 python3-bpfcc bpfcc-tools python3-scapy
  # The persistence tests check rendered files with the tools that read them (netplan
  # generate, ifquery, libnm's keyfile reader); nothing here starts a network service,
  # and neither tool acts on a machine without its own config files.
  netplan.io ifupdown gir1.2-nm-1.0 python3-gi
  # The demo's timeline plot.
  python3-matplotlib
  # The VM lab (molecule/vm): qemu, qcow2 overlays, a Debian rootfs from packages made into
  # an ext4 image, and ssh to the VMs.
  qemu-system-x86 qemu-utils mmdebstrap e2fsprogs openssh-client
)

apt_updated=0
apt_update_once() {
  if ((apt_updated == 0)); then apt-get update -qq; apt_updated=1; fi
}

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

# Kernel headers for bcc: the running kernel's own package where the distribution
# has one (Ubuntu, stock Debian kernels), else Debian's generic headers (see below).
kver="$(uname -r)"
if [[ ! -e "/lib/modules/${kver}/build/include" ]] &&
   ! dpkg-query -W -f='${Status}' linux-headers-amd64 2>/dev/null | grep -q 'install ok installed'; then
  apt_update_once
  if apt-cache show "linux-headers-${kver}" >/dev/null 2>&1; then
    missing+=("linux-headers-${kver}")
  elif [[ "$(uname -m)" == "x86_64" ]] && apt-cache show linux-headers-amd64 >/dev/null 2>&1; then
    missing+=(linux-headers-amd64)
  else
    log "warning: no kernel headers package for ${kver}; BPF programs cannot be compiled"
  fi
fi

if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt_update_once
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# bcc looks for headers under /lib/modules/$(uname -r)/{build,source}. When the running
# kernel has no packaged headers (a custom or cloud kernel), point them at Debian's
# generic headers tree: packet programs only use UAPI headers. Never overwrite real ones.
if [[ ! -e "/lib/modules/${kver}/build/include" ]]; then
  hdr="$(find /usr/src -maxdepth 1 -name 'linux-headers-*-amd64' | sort -V | tail -n1)"
  common="$(find /usr/src -maxdepth 1 -name 'linux-headers-*-common' | sort -V | tail -n1)"
  if [[ -n "${hdr}" && -n "${common}" ]]; then
    log "linking /lib/modules/${kver}/build to ${hdr} (no headers packaged for this kernel)"
    mkdir -p "/lib/modules/${kver}"
    ln -sfn "${hdr}" "/lib/modules/${kver}/build"
    ln -sfn "${common}" "/lib/modules/${kver}/source"
  else
    log "warning: no kernel headers for ${kver}; BPF programs cannot be compiled"
  fi
fi

# promtool, for the tests of the Prometheus alert rules (monitoring/), only on request
# (EDGEFT_WITH_PROMTOOL=1: the test command). Taken out of the distribution's prometheus package
# without installing it, so no Prometheus service starts on this machine; cached per version.
if [[ "${EDGEFT_WITH_PROMTOOL:-0}" == 1 ]]; then
  prom_ver="$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}')"
  if [[ -z "${prom_ver}" || "${prom_ver}" == "(none)" ]]; then
    apt_update_once
    prom_ver="$(apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}')"
  fi
  [[ -n "${prom_ver}" && "${prom_ver}" != "(none)" ]] || die "no prometheus package to take promtool from (apt-cache policy prometheus)"
  prom_dir="${EDGEFT_CACHE}/promtool/${prom_ver}"
  if [[ ! -x "${prom_dir}/promtool" ]]; then
    log "extracting promtool from the prometheus package ${prom_ver} (not installed)"
    prom_tmp="$(mktemp -d)"
    (cd "${prom_tmp}" && apt-get download -qq "prometheus=${prom_ver}" 2>/dev/null)
    dpkg-deb -x "${prom_tmp}"/prometheus_*.deb "${prom_tmp}/root"
    mkdir -p "${prom_dir}"
    install -m 0755 "${prom_tmp}/root/usr/bin/promtool" "${prom_dir}/promtool"
    rm -rf "${prom_tmp}"
  fi
  export EDGEFT_PROMTOOL="${prom_dir}/promtool"
fi

# Virtualenv on the system Python with its site packages visible, because bcc's bindings exist
# only as the Debian package python3-bpfcc. It lives in the machine's cache, one per set of pins
# (EDGEFT_CACHE, default /var/cache/edgeft), and .venv links to it: every clone of the project on
# the machine, CI's fresh ones included, shares the one built for its pins instead of spending
# minutes on pip and PyTorch each time. Built under a lock; a half-built one is rebuilt.
want="$(cat "${EDGEFT_ROOT}/requirements.txt" "${EDGEFT_ROOT}/constraints.txt" | sha256sum | cut -d' ' -f1)"
venv_real="${EDGEFT_CACHE}/venv/${want:0:16}"
mkdir -p "${EDGEFT_CACHE}/venv"
exec {venv_lock}>"${venv_real}.lock"
flock "${venv_lock}"
if [[ "$(cat "${venv_real}/.edgeft-pins" 2>/dev/null || true)" != "${want}" ]]; then
  log "creating ${venv_real} with pinned tools (linked as ${VENV})"
  rm -rf "${venv_real}"
  /usr/bin/python3 -m venv --system-site-packages "${venv_real}"
  "${venv_real}/bin/pip" install -q --disable-pip-version-check \
    -c "${EDGEFT_ROOT}/constraints.txt" -r "${EDGEFT_ROOT}/requirements.txt" 2> >(grep -v "is ignored: it is neither" >&2)
  echo "${want}" > "${venv_real}/.edgeft-pins"
fi

# PyTorch for the demo's DDP workload, only on request (EDGEFT_WITH_TORCH=1: the test command,
# and the demo with --workload ddp): a CPU build of about 900 MB, pinned in requirements-torch.txt.
if [[ "${EDGEFT_WITH_TORCH:-0}" == 1 ]] && ! "${venv_real}/bin/python" -c 'import torch' 2>/dev/null; then
  log "installing PyTorch into ${venv_real} (requirements-torch.txt)"
  "${venv_real}/bin/pip" install -q --disable-pip-version-check -r "${EDGEFT_ROOT}/requirements-torch.txt" \
    2> >(grep -v "is ignored: it is neither" >&2)
fi
flock -u "${venv_lock}"
exec {venv_lock}>&-
# An older checkout's own .venv directory gives way to the link.
if [[ -d "${VENV}" && ! -L "${VENV}" ]]; then
  rm -rf "${VENV}"
fi
ln -sfn "${venv_real}" "${VENV}"

# The collection, where ansible finds it as edgeft.failover.
mkdir -p "${BUILD}/collections/ansible_collections/edgeft"
ln -sfn "${EDGEFT_ROOT}" "${BUILD}/collections/ansible_collections/edgeft/failover"

export EDGEFT_ROOT EDGEFT_CACHE
export PATH="${VENV}/bin:${EDGEFT_ROOT}/bin:${PATH}"
export ANSIBLE_COLLECTIONS_PATH="${BUILD}/collections"
export ANSIBLE_CONFIG="${EDGEFT_ROOT}/ansible.cfg"
export PYTHONPATH="${EDGEFT_ROOT}/lab:${EDGEFT_ROOT}/demo${PYTHONPATH:+:${PYTHONPATH}}"
