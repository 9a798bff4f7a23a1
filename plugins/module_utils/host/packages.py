# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a target needs installed for the data path's loader, per OS family: the packages the
ebpf_failover role installs, or why it installs none (the user installs them and sets
ebpf_failover_install_packages: false), and what to say when the installation fails.

Pure: the filters target_packages and target_packages_failure call it with the target's facts;
target_packages_query and target_packages_missing find which packages are installed already, so
that a host that has them all runs no package manager (its cache alone costs seconds).
"""

from __future__ import annotations

import re

LOADERS = ("object", "bcc")
INSTALL_VARIABLE = "ebpf_failover_install_packages"
LOADER_VARIABLE = "ebpf_failover_loader"
# The package manager's module of each supported family.
MANAGERS = {"Debian": "apt", "RedHat": "dnf"}
# The only RedHat family release with package names here (Rocky, AlmaLinux, RHEL, CentOS Stream 9).
REDHAT_MAJOR = 9
# The first releases that package libbpf 1.x (libbpf1); older ones ship libbpf0 only.
LIBBPF1_SINCE = {"Debian": 12, "Ubuntu": 23}
EPEL_NOTE = ("python3-pyroute2 comes from EPEL on the RedHat family 9: enable EPEL first "
             "(on Rocky Linux and AlmaLinux: dnf install epel-release)")
ERROR_CHARS = 300


def _names(loader: str, family: str, release: str) -> list:
    if family == "Debian":
        if loader == "object":
            return ["libbpf1", "python3-pyroute2"]
        return ["python3-bpfcc", "python3-pyroute2", "linux-headers-%s" % release]
    if loader == "object":
        return ["libbpf", "python3-pyroute2"]
    return ["python3-bcc", "python3-pyroute2", "kernel-devel-%s" % release]


def needs(loader: str, release: str) -> str:
    """What the loader needs on any target, in words, for a host edgeft has no package names for."""
    if loader == "object":
        return "libbpf 1.x (the shared library libbpf.so.1) and pyroute2 for the system's python3"
    return ("bcc's Python bindings and pyroute2 for the system's python3, and the headers of the running "
            "kernel %s (/lib/modules/%s/build)" % (release or "(unknown)", release or "$(uname -r)"))


def _major(version):
    match = re.match(r"\s*(\d+)", str(version if version is not None else ""))
    return int(match.group(1)) if match else None


def target_packages(os_family: str, major_version, loader: str, kernel_release: str,
                    distribution: str = "", headers_present: bool = False) -> dict:
    """The packages to install on a target, as {packages, manager, refusal}.

    os_family, major_version and distribution are Ansible's facts (os_family,
    distribution_major_version, distribution); kernel_release is the running kernel's (uname -r).
    headers_present: the running kernel's headers are there already (a kernel without a headers
    package, linked by hand), so the bcc loader needs no headers package.
    A refusal (non-empty) names what to install by hand and the variable that skips installing;
    packages and manager are then empty.
    """
    def refuse(why: str) -> dict:
        return {"packages": [], "manager": "", "refusal": why}

    if loader not in LOADERS:
        return refuse("%s: %r is not a loader; use one of %s" % (LOADER_VARIABLE, loader, ", ".join(LOADERS)))
    release = str(kernel_release or "").strip()
    family = str(os_family or "").strip()
    major = _major(major_version)
    where = "OS family %s%s" % (family or "(unknown)", " %s" % major if major is not None else "")
    by_hand = ("install %s yourself and set %s: false" % (needs(loader, release), INSTALL_VARIABLE))
    if family not in MANAGERS:
        return refuse("%s: edgeft installs packages on the Debian family (Debian, Ubuntu) and on the RedHat "
                      "family %d (Rocky Linux, AlmaLinux, RHEL %d) only; %s"
                      % (where, REDHAT_MAJOR, REDHAT_MAJOR, by_hand))
    if family == "RedHat" and major != REDHAT_MAJOR:
        return refuse("%s: edgeft names the RedHat family's packages for major version %d only; %s"
                      % (where, REDHAT_MAJOR, by_hand))
    since = LIBBPF1_SINCE.get(distribution)
    if loader == "object" and since is not None and major is not None and major < since:
        return refuse("%s %s: libbpf 1.x (libbpf1) is packaged from %s %d on; use %s: bcc, or install libbpf 1.x "
                      "yourself and set %s: false" % (distribution, major, distribution, since, LOADER_VARIABLE,
                                                      INSTALL_VARIABLE))
    if loader == "bcc" and not release:
        return refuse("the running kernel's release is unknown (facts: kernel), so its headers package "
                      "cannot be named; %s" % by_hand)
    packages = _names(loader, family, release)
    if loader == "bcc" and headers_present:
        packages = packages[:-1]
    return {"packages": packages, "manager": MANAGERS[family], "refusal": ""}


def _brief(error) -> str:
    text = " ".join(str(error or "").split())
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS - 3] + "..."


def install_failed(packages, manager: str, error="") -> str:
    """The message for an installation that failed (an offline host, a repository without the
    package): the exact packages to pre-install, the variable that skips installing, and the
    package manager's own error, briefly, last."""
    names = ", ".join(packages or []) or "(none)"
    message = ("could not install %s with %s (an offline host, or a package the configured repositories do not "
               "have): pre-install exactly these packages on the host (from a local mirror or in its image), "
               "then set %s: false" % (names, manager or "the package manager", INSTALL_VARIABLE))
    if manager == "dnf" and "python3-pyroute2" in (packages or []):
        message += ". %s" % EPEL_NOTE
    brief = _brief(error)
    return message + (". %s said: %s" % (manager or "the package manager", brief) if brief else "")


# One line per installed package: "name=status" (dpkg: status "ii" when installed). rpm prints a
# second line with the full name, which is how the plan names a kernel-devel package.
_QUERIES = {
    "apt": ["dpkg-query", "--show", "--showformat=${Package}=${db:Status-Abbrev}\\n"],
    "dnf": ["rpm", "--query", "--queryformat=%{NAME}=ii\\n%{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}=ii\\n"],
}


def installed_query(plan: dict) -> list:
    """The command (argv) that lists which of a target_packages plan's packages are installed;
    [] when the plan has no packages."""
    names = list((plan or {}).get("packages") or [])
    query = _QUERIES.get((plan or {}).get("manager", ""))
    return query + names if names and query else []


def missing(plan: dict, query_output) -> list:
    """The plan's packages that installed_query's output does not show installed, in the plan's
    order. A package the query cannot show (a virtual one, or no query output at all) counts as
    missing: the package manager then decides, as it would without the query."""
    installed = set()
    for line in str(query_output or "").splitlines():
        name, separator, status = line.partition("=")
        if separator and status.startswith("ii"):
            installed.add(name.strip())
    return [name for name in (plan or {}).get("packages") or [] if name not in installed]
