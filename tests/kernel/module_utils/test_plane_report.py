"""The plane_info module's netlink report of plane NICs, on a real namespace (the declaration's
validation is the plane model's: tests/pure/host/test_plane_model.py)."""

import os
import subprocess
import uuid

import pytest
from pyroute2 import netns

from ansible_collections.edgeft.failover.plugins.module_utils import plane_info
from ansible_collections.edgeft.failover.plugins.module_utils.host.planes import normalize_planes

A = {'name': 'a', 'interface': 'fab0', 'ipv4': '198.18.1.11/16', 'ipv6': 'fd0e:d6ef:7a00:1::b/64'}
B = {'name': 'b', 'interface': 'fab1', 'ipv4': '198.19.1.11/16', 'ipv6': 'fd0e:d6ef:7b00:1::b/64'}


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
    planes = normalize_planes([A, B])
    netns.pushns(plane_netns)
    try:
        report, problems = plane_info.plane_report(planes)
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
    planes = normalize_planes([A, dict(B, interface='fab9')])
    netns.pushns(plane_netns)
    try:
        report, problems = plane_info.plane_report(planes)
    finally:
        netns.popns()
    assert report[1]['present'] is False
    assert problems == ["planes[1].interface: interface 'fab9' does not exist on this host"]
