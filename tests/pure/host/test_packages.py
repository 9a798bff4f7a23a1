"""What the ebpf_failover role installs on a target (host/packages.py, through the filters
target_packages and target_packages_failure): the packages per OS family and loader, the
refusal of a family edgeft has no package names for, and the message of a failed install."""

from __future__ import annotations

import pytest

from ansible_collections.edgeft.failover.plugins.filter.packages import target_packages, target_packages_failure
from ansible_collections.edgeft.failover.plugins.module_utils.host import packages


def facts(os_family, distribution, major, kernel):
    """The four facts the package choice reads (ansible_facts names)."""
    return {"os_family": os_family, "distribution": distribution, "distribution_major_version": major, "kernel": kernel}


DEBIAN = facts("Debian", "Debian", "12", "6.1.0-18-amd64")
UBUNTU = facts("Debian", "Ubuntu", "24", "6.8.0-45-generic")
ROCKY = facts("RedHat", "Rocky", "9", "5.14.0-427.13.1.el9_4.x86_64")
ALMA = facts("RedHat", "AlmaLinux", "9", "5.14.0-503.11.1.el9_5.x86_64")
RHEL8 = facts("RedHat", "RedHat", "8", "4.18.0-553.el8_10.x86_64")
SUSE = facts("Suse", "openSUSE Leap", "15", "6.4.0-150600.23.25-default")
ARCH = facts("Archlinux", "Archlinux", "NA", "6.11.5-arch1-1")

ACCEPTED = [
    ("debian-object", DEBIAN, "object", "apt", ["libbpf1", "python3-pyroute2"]),
    ("debian-bcc", DEBIAN, "bcc", "apt", ["python3-bpfcc", "python3-pyroute2", "linux-headers-6.1.0-18-amd64"]),
    ("ubuntu-object", UBUNTU, "object", "apt", ["libbpf1", "python3-pyroute2"]),
    ("ubuntu-bcc", UBUNTU, "bcc", "apt", ["python3-bpfcc", "python3-pyroute2", "linux-headers-6.8.0-45-generic"]),
    ("rocky9-object", ROCKY, "object", "dnf", ["libbpf", "python3-pyroute2"]),
    ("rocky9-bcc", ROCKY, "bcc", "dnf",
     ["python3-bcc", "python3-pyroute2", "kernel-devel-5.14.0-427.13.1.el9_4.x86_64"]),
    ("alma9-object", ALMA, "object", "dnf", ["libbpf", "python3-pyroute2"]),
    ("alma9-bcc", ALMA, "bcc", "dnf", ["python3-bcc", "python3-pyroute2", "kernel-devel-5.14.0-503.11.1.el9_5.x86_64"]),
    # A Debian-family derivative: Debian's package names, no release gate.
    ("mint-object", dict(DEBIAN, distribution="Linux Mint", distribution_major_version="21"), "object", "apt",
     ["libbpf1", "python3-pyroute2"]),
    # Ubuntu 22.04 has no libbpf1, but bcc is packaged there.
    ("ubuntu22-bcc", dict(UBUNTU, distribution_major_version="22"), "bcc", "apt",
     ["python3-bpfcc", "python3-pyroute2", "linux-headers-6.8.0-45-generic"]),
    ("rhel9-int-version", dict(RHEL8, distribution_major_version=9), "object", "dnf", ["libbpf", "python3-pyroute2"]),
]


@pytest.mark.parametrize("facts, loader, manager, expected", [a[1:] for a in ACCEPTED], ids=[a[0] for a in ACCEPTED])
def test_packages_per_family_and_loader(facts, loader, manager, expected):
    assert target_packages(facts, loader) == {"packages": expected, "manager": manager, "refusal": ""}


@pytest.mark.parametrize("facts, headers", [(DEBIAN, "linux-headers-"), (ROCKY, "kernel-devel-")])
def test_bcc_needs_no_headers_package_when_the_headers_are_there(facts, headers):
    plan = target_packages(facts, "bcc", headers_present=True)
    assert plan["packages"] and not [p for p in plan["packages"] if p.startswith(headers)]
    # The object loader never needs headers.
    assert target_packages(facts, "object", headers_present=True) == target_packages(facts, "object")


REFUSED = [
    ("rhel8", RHEL8, "OS family RedHat 8: edgeft names the RedHat family's packages for major version 9 only"),
    ("fedora", dict(ROCKY, distribution="Fedora", distribution_major_version="40"), "OS family RedHat 40:"),
    ("suse", SUSE, "OS family Suse 15: edgeft installs packages on the Debian family (Debian, Ubuntu) and on "
                   "the RedHat family 9 (Rocky Linux, AlmaLinux, RHEL 9) only"),
    ("arch", ARCH, "OS family Archlinux: edgeft installs packages on the Debian family"),
    ("no-facts", {}, "OS family (unknown): edgeft installs packages"),
]


@pytest.mark.parametrize("loader", packages.LOADERS)
@pytest.mark.parametrize("facts, start", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_other_families_are_refused_with_what_to_install_by_hand(facts, start, loader):
    plan = target_packages(facts, loader)
    assert plan["packages"] == [] and plan["manager"] == ""
    assert plan["refusal"].startswith(start)
    assert plan["refusal"].endswith("yourself and set ebpf_failover_install_packages: false")
    if loader == "object":
        assert "libbpf 1.x (the shared library libbpf.so.1) and pyroute2" in plan["refusal"]
    else:
        assert "bcc's Python bindings and pyroute2" in plan["refusal"]
        assert "headers of the running kernel %s" % facts.get("kernel", "(unknown)") in plan["refusal"]


@pytest.mark.parametrize("facts, release", [(dict(DEBIAN, distribution_major_version="11"), "Debian 11"),
                                            (dict(UBUNTU, distribution_major_version="22"), "Ubuntu 22")])
def test_a_release_without_libbpf1_is_refused_for_the_object_loader(facts, release):
    assert target_packages(facts, "object")["refusal"] == (
        "%s: libbpf 1.x (libbpf1) is packaged from %s on; use ebpf_failover_loader: bcc, or install libbpf 1.x "
        "yourself and set ebpf_failover_install_packages: false"
        % (release, "Debian 12" if release.startswith("Debian") else "Ubuntu 23"))


def test_an_unknown_loader_or_kernel_is_refused():
    assert target_packages(DEBIAN, "clang")["refusal"] == (
        "ebpf_failover_loader: 'clang' is not a loader; use one of object, bcc")
    refusal = target_packages(dict(DEBIAN, kernel=""), "bcc")["refusal"]
    assert refusal.startswith("the running kernel's release is unknown")
    # The object loader does not need the kernel's release.
    assert target_packages(dict(DEBIAN, kernel=""), "object")["refusal"] == ""


def test_offline_message_names_the_packages_and_the_variable():
    plan = target_packages(DEBIAN, "bcc")
    error = ("No package matching 'linux-headers-6.1.0-18-amd64' is available\n"
             "  E: Failed to fetch http://deb.debian.org/debian/pool/main/...  Temporary failure resolving")
    message = target_packages_failure(plan, error)
    assert message.startswith(
        "could not install python3-bpfcc, python3-pyroute2, linux-headers-6.1.0-18-amd64 with apt (an offline host, "
        "or a package the configured repositories do not have): pre-install exactly these packages on the host")
    assert "set ebpf_failover_install_packages: false" in message
    assert "EPEL" not in message
    # The package manager's error comes last, on one line.
    assert message.endswith(". apt said: No package matching 'linux-headers-6.1.0-18-amd64' is available E: Failed "
                            "to fetch http://deb.debian.org/debian/pool/main/... Temporary failure resolving")
    assert "\n" not in message


def test_offline_message_on_the_redhat_family_names_epel():
    message = target_packages_failure(target_packages(ROCKY, "object"), "Failed to download metadata for repo")
    assert message.startswith("could not install libbpf, python3-pyroute2 with dnf")
    assert "python3-pyroute2 comes from EPEL on the RedHat family 9: enable EPEL first" in message
    assert message.index("EPEL") < message.index("dnf said: Failed to download metadata for repo")


def test_offline_message_shortens_a_long_error_and_omits_a_missing_one():
    plan = target_packages(UBUNTU, "object")
    message = target_packages_failure(plan, "x" * 5000)
    assert message.endswith(". apt said: " + "x" * (packages.ERROR_CHARS - 3) + "...")
    assert target_packages_failure(plan, "").endswith("then set ebpf_failover_install_packages: false")
    assert target_packages_failure(plan, None) == target_packages_failure(plan)


def test_the_query_lists_the_plan_s_packages_for_its_package_manager():
    from ansible_collections.edgeft.failover.plugins.filter.packages import target_packages_query

    debian = target_packages(DEBIAN, "object")
    assert target_packages_query(debian) == [
        "dpkg-query", "--show", "--showformat=${Package}=${db:Status-Abbrev}\\n", "libbpf1", "python3-pyroute2"]
    rocky = target_packages_query(target_packages(ROCKY, "bcc"))
    assert rocky[:2] == ["rpm", "--query"] and rocky[3:] == [
        "python3-bcc", "python3-pyroute2", "kernel-devel-5.14.0-427.13.1.el9_4.x86_64"]
    # A refused target has no packages, so no query; nor has garbage.
    assert target_packages_query(target_packages(SUSE, "object")) == []
    assert target_packages_query(None) == [] and target_packages_query("apt") == []


def test_only_what_the_query_does_not_show_installed_is_missing():
    from ansible_collections.edgeft.failover.plugins.filter.packages import target_packages_missing

    debian = target_packages(DEBIAN, "bcc")
    # dpkg-query's output: installed ("ii"), removed with its configuration kept ("rc"); a
    # package the database does not know is only named on stderr.
    output = "python3-bpfcc=ii \npython3-pyroute2=rc \n"
    assert target_packages_missing(debian, output) == ["python3-pyroute2", "linux-headers-6.1.0-18-amd64"]
    everything = "".join("%s=ii \n" % name for name in debian["packages"])
    assert target_packages_missing(debian, everything) == []
    # No output (the query could not run): everything is missing, the package manager decides.
    assert target_packages_missing(debian, "") == debian["packages"]
    assert target_packages_missing(debian, None) == debian["packages"]
    # rpm: the kernel-devel package is named with its version, as the plan names it.
    rocky = target_packages(ROCKY, "bcc")
    rpm_output = ("python3-bcc=ii\npython3-bcc-0.28.0-5.el9.x86_64=ii\npackage python3-pyroute2 is not installed\n"
                  "kernel-devel=ii\nkernel-devel-5.14.0-427.13.1.el9_4.x86_64=ii\n")
    assert target_packages_missing(rocky, rpm_output) == ["python3-pyroute2"]
