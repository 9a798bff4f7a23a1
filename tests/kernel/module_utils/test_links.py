"""plane declaration validation and the netlink plane report, on a real namespace."""

import os
import subprocess
import uuid

import pytest
from pyroute2 import netns

from ansible_collections.edgeft.failover.plugins.module_utils import links

A = {'name': 'a', 'interface': 'fab0', 'ipv4': '198.18.1.11/16', 'ipv6': 'fd0e:d6ef:7a00:1::b/64'}
B = {'name': 'b', 'interface': 'fab1', 'ipv4': '198.19.1.11/16', 'ipv6': 'fd0e:d6ef:7b00:1::b/64'}


def test_valid_planes_normalize():
    planes = links.normalize_planes([A, B])
    assert [p['name'] for p in planes] == ['a', 'b']
    assert str(planes[1]['ipv4']) == '198.19.1.11/16'
    assert planes[0]['where'] == 'planes[0]'


@pytest.mark.parametrize('planes, message', [
    ([], 'planes: at least one plane'),
    ([A, dict(B, name='a')], "planes[1].name: plane 'a' is already declared"),
    ([A, dict(B, interface='fab0')], "planes[1].interface: 'fab0' already carries plane 'a'"),
    ([A, dict(B, ipv4='198.18.200.1/16')], 'planes[1].ipv4: subnet 198.18.0.0/16 overlaps 198.18.0.0/16'),
    ([A, dict(B, ipv6='fd0e:d6ef:7a00:1::c/64')], 'planes[1].ipv6: subnet'),
    ([A, dict(B, ipv4='fd00::1/64')], 'planes[1].ipv4: fd00::1/64 is not an IPv4 address'),
    ([A, dict(B, ipv4='198.19.1.300/16')], "planes[1].ipv4: '198.19.1.300/16' is not an address"),
    ([A, dict(B, interface='a-very-long-interface')], 'longer than the kernel limit of 15'),
    ([A, dict(B, interface='')], 'planes[1].interface: the plane NIC name is required'),
])
def test_bad_planes_name_the_option(planes, message):
    with pytest.raises(links.PlaneSpecError) as err:
        links.normalize_planes(planes)
    assert message in str(err.value)


@pytest.fixture
def plane_netns():
    """A namespace with a veth pair standing in for two plane NICs; removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip('needs root to create a network namespace')
    name = 'eft-t-%s' % uuid.uuid4().hex[:8]
    netns.create(name)
    try:
        run = ['ip', '-n', name]
        subprocess.run(run + ['link', 'add', 'fab0', 'type', 'veth', 'peer', 'name', 'fab1'], check=True)
        subprocess.run(run + ['addr', 'add', A['ipv4'], 'dev', 'fab0'], check=True)
        subprocess.run(run + ['addr', 'add', A['ipv6'], 'dev', 'fab0', 'nodad'], check=True)
        subprocess.run(run + ['link', 'set', 'fab0', 'up'], check=True)
        yield name
    finally:
        netns.remove(name)


def test_plane_report_reads_the_namespace(plane_netns):
    planes = links.normalize_planes([A, B])
    netns.pushns(plane_netns)
    try:
        report, problems = links.plane_report(planes)
    finally:
        netns.popns()
    by_name = {r['name']: r for r in report}
    assert by_name['a']['present'] and by_name['a']['admin_up']
    assert A['ipv4'] in by_name['a']['addresses']
    assert by_name['a']['missing_addresses'] == []
    # fab1 exists but is down and has none of its declared addresses.
    assert by_name['b']['present'] and not by_name['b']['admin_up']
    assert sorted(by_name['b']['missing_addresses']) == sorted([B['ipv4'], B['ipv6']])
    assert 'planes[1].ipv4: 198.19.1.11/16 is not configured on fab1' in problems


def test_plane_report_names_a_missing_interface(plane_netns):
    planes = links.normalize_planes([A, dict(B, interface='fab9')])
    netns.pushns(plane_netns)
    try:
        report, problems = links.plane_report(planes)
    finally:
        netns.popns()
    assert report[1]['present'] is False
    assert problems == ["planes[1].interface: interface 'fab9' does not exist on this host"]
