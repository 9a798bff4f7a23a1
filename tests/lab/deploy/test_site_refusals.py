"""site.yml refuses each violation of the plane model before any change.

On a deployed fabric whose NICs exist, every rule of the plane model (host/planes.py, the
data path's plane count, the peer group's plane names, the host checks multihome makes) is
broken on one host at a time: the host is refused with a message naming the exact input, and
is left byte-for-byte as it was (tests/helpers/host_snapshot.py says what is compared). Four
hosts break four rules in one run, each its own; the rules that fail on a host's peers too
(plane names) share a run only with rules refused before the peer checks.
"""

import copy

import pytest
import yaml
from deploy_helpers import ONE_LINE_RESULTS, failure_messages, run_playbook
from host_snapshot import differences, host_snapshot

HOSTS = ('r1h1', 'r1h2', 'r2h1', 'r2h2')
NICS = ('lo', 'fab0', 'fab1')


def _set(index, **values):
    """planes with plane `index` changed: a value None removes the key."""
    def change(planes):
        plane = planes[index]
        for key, value in values.items():
            if value is None:
                plane.pop(key, None)
            else:
                plane[key] = value
        return planes
    return change


def _third_plane(planes):
    return planes + [{'name': 'c', 'interface': 'lo', 'ipv6': 'fd0e:d6ef:7c00:1::b/64'}]


def _same_failover(planes):
    for plane in planes:
        plane['failover6'] = 'fd0e:d6ef:7c00::1'
    return planes


def _own_gateway(planes):
    planes[1]['gateway4'] = planes[1]['ipv4'].split('/')[0]
    return planes


# (rule, how a host's planes break it, what the refusal must say). One run per line of four.
BATCHES = [
    [('one plane', lambda p: p[:1], 'needs at least two planes, it declares 1'),
     ('more planes than the data path carries', _third_plane, 'edgeft_planes: 3 planes, but the data path is built for 2'),
     ('a plane that is not a dict', lambda p: [p[0], 'fab1'], 'edgeft_planes[1]: expected a dict'),
     ('a plane without a name', _set(1, name=None), 'edgeft_planes[1].name: a plane name is required')],
    [('a plane name twice', _set(1, name='a'), "edgeft_planes[1].name: plane 'a' is already declared at edgeft_planes[0]"),
     ('a plane without an interface', _set(1, interface=None), 'edgeft_planes[1].interface: an interface name is required'),
     ('an impossible interface name', _set(1, interface='fab1:0'), "edgeft_planes[1].interface: 'fab1:0' is not a valid"),
     ('one NIC for two planes', _set(1, interface='fab0'), "edgeft_planes[1].interface: 'fab0' already carries plane 'a'")],
    [("plane names unlike the peers'", _set(1, name='c'), "do not match this host's planes (['a', 'c'])"),
     ('an address without a prefix length', _set(1, ipv4='198.19.1.11'), "[1].ipv4: '198.19.1.11' needs a prefix length"),
     ('a network address', _set(1, ipv4='198.19.0.0/16'), 'edgeft_planes[1].ipv4: 198.19.0.0 is the network address'),
     ('a link-local address', _set(1, ipv6='fe80::b/64'), 'edgeft_planes[1].ipv6: fe80::b is link-local')],
    [('an IPv4 address as ipv6', _set(1, ipv6='198.19.1.11/16'), 'edgeft_planes[1].ipv6: 198.19.1.11/16 is not an IPv6'),
     ('a gateway off the plane', _set(1, gateway4='198.18.1.1'), "[1].gateway4: 198.18.1.1 is outside the plane's prefix"),
     ('a gateway that is the host', _own_gateway, "is this host's own address (edgeft_planes[1].ipv4)"),
     ('a gateway without an address', _set(1, ipv4=None, gateway4='198.19.0.1'), "[1].gateway4: a gateway needs the plane's")],
    [('overlapping subnets', _set(1, ipv4='198.18.7.7/16'), '[1].ipv4: 198.18.0.0/16 overlaps edgeft_planes[0].ipv4'),
     ('a failover address in a native subnet', _set(1, failover4='198.19.9.9'), '198.19.9.9 is inside the native subnet'),
     ('one failover address for two planes', _same_failover, 'edgeft_planes[1].failover6: fd0e:d6ef:7c00::1 is also'),
     ('an MTU that is not a number', _set(1, mtu='jumbo'), "edgeft_planes[1].mtu: 'jumbo' is not an integer")],
    [('an MTU below the IPv6 minimum', _set(1, mtu=1000), 'edgeft_planes[1].mtu: 1000 is below 1280'),
     ('an MTU out of range', _set(1, mtu=70000), 'edgeft_planes[1].mtu: 70000 is out of range (68..65535)'),
     ('accept_ra not a boolean', _set(1, accept_ra='maybe'), "edgeft_planes[1].accept_ra: 'maybe' is not a boolean"),
     # Refused on the host, by multihome's check before it changes anything.
     ('an interface the host does not have', _set(1, interface='fab9'), "planes[1].interface: no interface 'fab9'")],
    [('a plane without an address', _set(1, ipv4=None, ipv6=None), "planes[1]: plane 'b' declares no address")],
]


@pytest.fixture(scope='module')
def lab(shared_default_deployment):
    return shared_default_deployment.neutral()


def _inventory(lab, tmp_path, broken):
    """The lab's inventory with each host of `broken` given its broken planes."""
    with open(lab.inventory_path) as f:
        inventory = yaml.safe_load(f)
    hosts = inventory['all']['children']['fabric']['hosts']
    for host, change in broken.items():
        hosts[host]['edgeft_planes'] = change(copy.deepcopy(hosts[host]['edgeft_planes']))
    path = tmp_path / 'hosts.yml'
    path.write_text(yaml.safe_dump(inventory))
    return hosts, path


@pytest.mark.parametrize('batch', BATCHES, ids=lambda batch: ', '.join(rule for rule, _change, _message in batch))
def test_each_plane_rule_is_refused_with_the_host_unchanged(lab, tmp_path, batch):
    broken = dict(zip(HOSTS, batch))
    hosts, inventory = _inventory(lab, tmp_path, {host: change for host, (_rule, change, _msg) in broken.items()})
    before = {host: host_snapshot(lab, host, NICS, hosts[host]['edgeft_state_dir']) for host in HOSTS}

    rc, out, recap = run_playbook(inventory, 'playbooks/site.yml', '--limit', ','.join(broken), env=ONE_LINE_RESULTS)

    assert rc != 0, out[-3000:]
    failures = failure_messages(out)
    for host, (rule, _change, message) in broken.items():
        assert recap.get(host) == (0, 1), '%s (%s): expected refused with no change, recap %s\n%s' % (
            rule, host, recap.get(host), out[-3000:])
        assert any(message in msg for msg in failures.get(host, [])), '%s (%s): %r not in %s' % (
            rule, host, message, failures.get(host))
    for host in HOSTS:
        changed = differences(before[host], host_snapshot(lab, host, NICS, hosts[host]['edgeft_state_dir']))
        assert not changed, 'a refused run changed %s:\n%s' % (host, '\n'.join(changed))


def test_a_fabric_of_one_host_is_refused_with_the_host_unchanged(lab, tmp_path):
    """A host alone in its peer group would get an empty peer table: nothing to fail over to."""
    with open(lab.inventory_path) as f:
        inventory = yaml.safe_load(f)
    hosts = inventory['all']['children']['fabric']['hosts']
    for host in HOSTS[1:]:
        del hosts[host]
    path = tmp_path / 'alone.yml'
    path.write_text(yaml.safe_dump(inventory))
    before = host_snapshot(lab, 'r1h1', NICS, hosts['r1h1']['edgeft_state_dir'])
    rc, out, recap = run_playbook(path, 'playbooks/site.yml', env=ONE_LINE_RESULTS)
    assert rc != 0 and recap.get('r1h1') == (0, 1), out[-3000:]
    assert any("group 'fabric' holds no host with edgeft_planes but r1h1" in msg
               for msg in failure_messages(out).get('r1h1', [])), out[-3000:]
    changed = differences(before, host_snapshot(lab, 'r1h1', NICS, hosts['r1h1']['edgeft_state_dir']))
    assert not changed, 'a refused run changed r1h1:\n%s' % '\n'.join(changed)


@pytest.mark.parametrize('setting, message', [
    (['-e', 'edgeft_rollout_batch=0'], 'edgeft_rollout_batch: 0 hosts per batch would deploy nothing'),
    (['-e', 'edgeft_rollout_gate_timeout=0'], 'edgeft_rollout_gate_timeout: 0 is out of range (1 to 3600)'),
], ids=['a batch of 0 hosts', 'a gate timeout of 0'])
def test_a_rollout_that_cannot_work_is_refused_on_every_host_unchanged(lab, setting, message):
    """The rollout's settings are checked on every host before the first batch (the other
    refusals of the settings: tests/pure/health/test_rollout_settings.py)."""
    with open(lab.inventory_path) as f:
        hosts = yaml.safe_load(f)['all']['children']['fabric']['hosts']
    before = {host: host_snapshot(lab, host, NICS, hosts[host]['edgeft_state_dir']) for host in HOSTS}
    rc, out, recap = run_playbook(lab.inventory_path, 'playbooks/site.yml', *setting, env=ONE_LINE_RESULTS)
    assert rc != 0, out[-3000:]
    failures = failure_messages(out)
    for host in HOSTS:
        assert recap.get(host) == (0, 1), '%s: recap %s\n%s' % (host, recap.get(host), out[-3000:])
        assert any(message in msg for msg in failures.get(host, [])), '%s: %r not in %s' % (host, message, failures.get(host))
        changed = differences(before[host], host_snapshot(lab, host, NICS, hosts[host]['edgeft_state_dir']))
        assert not changed, 'a refused rollout changed %s:\n%s' % (host, '\n'.join(changed))
