"""benchmarks/loaders.py's parsing: apt-get -s Inst lines, apt-cache stanzas and depends, and
the junit task timings it reads a playbook's per-task times from."""

from __future__ import annotations

import pytest
from loaders import depends_target, mb, parse_installed_sizes, parse_simulation, task_seconds, task_times  # benchmarks/

SIMULATION = """\
NOTE: This is only a simulation!
Reading package lists...
The following NEW packages will be installed:
  libbpf1 libelf1 python3-pyroute2
0 upgraded, 3 newly installed, 0 to remove and 0 not upgraded.
Inst libelf1 (0.188-2.1 Debian:12.12/stable [amd64])
Inst libbpf1 (1:1.1.2-0+deb12u1 Debian:12.12/stable, Debian-Security:12/stable-security [amd64])
Inst python3-pyroute2 (0.7.2-2 Debian:12.12/stable [all])
Conf libelf1 (0.188-2.1 Debian:12.12/stable [amd64])
Conf libbpf1 (1:1.1.2-0+deb12u1 Debian:12.12/stable [amd64])
Conf python3-pyroute2 (0.7.2-2 Debian:12.12/stable [all])
"""


def test_inst_lines_give_package_and_version():
    assert parse_simulation(SIMULATION) == [
        ('libelf1', '0.188-2.1'), ('libbpf1', '1:1.1.2-0+deb12u1'), ('python3-pyroute2', '0.7.2-2')]


def test_an_upgrade_keeps_the_new_version_and_nothing_installed_is_empty():
    assert parse_simulation('Inst libc6 [2.36-9] (2.36-9+deb12u4 Debian:12.12/stable [amd64])\n') == [
        ('libc6', '2.36-9+deb12u4')]
    assert parse_simulation('0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n') == []


def test_a_count_that_disagrees_with_the_summary_is_an_error():
    with pytest.raises(ValueError, match='3 newly installed'):
        parse_simulation(SIMULATION.replace('Inst libelf1', 'Skip libelf1'))


def test_installed_sizes_per_package_and_version():
    text = ("Package: libbpf1\nVersion: 1:1.1.2-0+deb12u1\nInstalled-Size: 385\nDescription: x\n y\n\n"
            "Package: python3-pyroute2\nVersion: 0.7.2-2\nInstalled-Size: 1650\n\n")
    assert parse_installed_sizes(text) == {('libbpf1', '1:1.1.2-0+deb12u1'): 385, ('python3-pyroute2', '0.7.2-2'): 1650}
    assert round(mb(1000), 3) == 1.024  # apt's MB: 10^6 bytes of KiB sizes


def test_the_stock_kernels_headers_from_the_meta_package():
    text = "linux-headers-amd64\n  Depends: linux-headers-6.1.0-57-amd64\n  Depends: foo\n"
    assert depends_target(text, 'linux-headers-') == 'linux-headers-6.1.0-57-amd64'
    assert depends_target('x\n  Recommends: linux-headers-1\n', 'linux-headers-') is None


def test_task_times_take_the_slowest_host(tmp_path):
    (tmp_path / 'site-1.xml').write_text(
        '<testsuites><testsuite name="site">'
        '<testcase name="[r1h1] Deploy: ebpf_failover : Load and attach the failover programs" time="2.5"/>'
        '<testcase name="[r1h2] Deploy: ebpf_failover : Load and attach the failover programs" time="4.25"/>'
        '<testcase name="[r1h1] Deploy: multihome : Configure" time="1.0"/>'
        '</testsuite></testsuites>')
    times = task_times(tmp_path)
    assert times == {'ebpf_failover : Load and attach the failover programs': 4.25, 'multihome : Configure': 1.0}
    assert task_seconds(times, 'Load and attach') == 4.25
    assert task_seconds(times, 'nothing') is None
