"""Everything edgeft may change on a lab host, read as text, to prove a run changed nothing.

What a deployment writes: links, addresses, the routes of every table and the rules of both
families, the sysctls of the given NICs (and `all`/`default`), their qdiscs and tc filters (a
replaced program shows as a new id), the pinned maps and the state directory's files (by
content). Neighbour entries are left out: their states change with traffic on their own.

On request (keyword arguments, off by default) also: the neighbour entries no traffic makes -
managed (edgeft's peer table), permanent or noarp - and, for given paths (the configured /etc,
/usr/local, /var/lib ones), what is there: each file's content, each directory's entries, each
link's target; and the machine's systemd units named edgeft.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import subprocess

from deploy_helpers import pinned, tc_filters


def _read(lab, host, *argv):
    return subprocess.run(lab.exec_argv(host, list(argv)), capture_output=True, text=True, check=True).stdout


def _files(root):
    """{path below root: sha256 of its content} of every file below root."""
    found = {}
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, 'rb') as f:
                found[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return found


def _static_neighbours(lab, host):
    """The neighbour entries traffic does not make or change, as text lines."""
    found = []
    for family in ('-4', '-6'):
        for n in json.loads(_read(lab, host, 'ip', '-j', family, 'neigh', 'show') or '[]'):
            states = n.get('state', [])
            if 'managed' in n:  # its state follows traffic: only that it is there
                found.append('%s dev %s managed' % (n.get('dst'), n.get('dev')))
            elif 'PERMANENT' in states or 'NOARP' in states:
                found.append('%s dev %s %s' % (n.get('dst'), n.get('dev'), ','.join(states)))
    return sorted(found)


def _path(path):
    """What is at path: None, 'link -> target', {file: sha256} of a directory tree (directories as
    'dir'), or the sha256 of a file."""
    if os.path.islink(path):
        return 'link -> %s' % os.readlink(path)
    if os.path.isdir(path):
        found = _files(path)
        for folder, dirs, _names in os.walk(path):
            found.update({os.path.relpath(os.path.join(folder, d), path): 'dir' for d in dirs})
        return found
    if os.path.exists(path):
        with open(path, 'rb') as f:
            return hashlib.sha256(f.read()).hexdigest()
    return None


def host_snapshot(lab, host, nics, state_dir, *, neighbours=False, paths=(), units=False):
    """{what: its text} of `host` in `lab`; two snapshots are equal when nothing changed.
    neighbours, paths and units add what the module docstring says."""
    snap = {
        'links': _read(lab, host, 'ip', '-d', 'link', 'show'),
        'addresses': _read(lab, host, 'ip', 'address', 'show'),
        'routes4': _read(lab, host, 'ip', '-4', 'route', 'show', 'table', 'all'),
        'routes6': _read(lab, host, 'ip', '-6', 'route', 'show', 'table', 'all'),
        'rules4': _read(lab, host, 'ip', '-4', 'rule', 'show'),
        'rules6': _read(lab, host, 'ip', '-6', 'rule', 'show'),
        # -e: IPv6's stable_secret cannot be read until it is set.
        'sysctls': _read(lab, host, 'sysctl', '-e', '-a', '--pattern',
                         r'^net\.ipv[46]\.(conf|neigh)\.(%s)\.' % '|'.join(list(nics) + ['all', 'default'])),
        'pins': pinned(lab, host),
        'state files': _files(state_dir),
    }
    for nic in nics:
        snap['qdiscs %s' % nic] = _read(lab, host, 'tc', 'qdisc', 'show', 'dev', nic)
        for direction in ('ingress', 'egress'):
            snap['filters %s %s' % (nic, direction)] = tc_filters(lab, host, nic, direction)
    if neighbours:
        snap['neighbours'] = _static_neighbours(lab, host)
    for path in paths:
        snap['path %s' % path] = _path(path)
    if units:
        snap['units'] = sorted(glob.glob('/etc/systemd/system/edgeft*') + glob.glob('/usr/local/sbin/edgeft*'))
    return snap


def differences(before, after):
    """The parts of two snapshots that differ, each with both texts, for an assertion message."""
    return ['%s:\n--- before\n%s\n--- after\n%s' % (what, before[what], after.get(what))
            for what in before if before[what] != after.get(what)]
