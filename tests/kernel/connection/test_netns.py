"""Tests of the edgeft.failover.netns connection, loaded through Ansible's plugin loader.

Every test that enters a namespace gets its own, uniquely named one (loopback plus a veth pair
created inside it, so nothing is ever added to the machine's own namespace), removed on teardown.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import uuid

import pytest
from nshost import create_veth_netns, remove_netns, veth_netns

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason='network namespaces need root'),
    pytest.mark.skipif(shutil.which('ip', path=os.environ.get('PATH', '') + ':/usr/sbin:/sbin') is None,
                       reason='iproute2 (ip) is not installed'),
]

PLUGIN = 'edgeft.failover.netns'
VETH = ('ctv0', 'ctv1')
# The namespace's veth pair, both ends inside, an address on the first.
VETHS = [(VETH[0], VETH[1], ['198.18.250.1/30'])]
# All 256 byte values, then enough pseudo-random bytes to make a few MB.
BINARY = bytes(range(256)) * 1024 + hashlib.shake_256(b'edgeft').digest(3 * 1024 * 1024)
ODD_NAMES = ['ünïcödé-名前.bin', "we ird $HOME `x` 'q' \"dq\" \\ \n-nl.bin", '-leading-dash.bin']


def _create_netns():
    return create_veth_netns('eft-ct', VETHS, lo_up=True)


@pytest.fixture
def nsname():
    with veth_netns('eft-ct', VETHS, lo_up=True) as name:
        yield name


def _connection(**var_options):
    from ansible.playbook.play_context import PlayContext
    from ansible.plugins.loader import connection_loader

    conn = connection_loader.get(PLUGIN, PlayContext())
    assert conn is not None, f'{PLUGIN} not found by the plugin loader'
    conn.set_options(var_options=var_options)
    return conn


@pytest.fixture
def conn(nsname):
    c = _connection(ansible_netns_name=nsname)
    yield c
    c.close()


def _sh(conn, cmd, in_data=None):
    return conn.exec_command(cmd, in_data=in_data, sudoable=False)


# --- loading and options ------------------------------------------------------------------------

def test_loaded_through_plugin_loader():
    c = _connection(ansible_netns_name='unused')
    assert c.transport == PLUGIN
    assert c.has_pipelining is True
    assert type(c).__module__ == 'ansible_collections.edgeft.failover.plugins.connection.netns'
    assert c.get_option('ip_exe') == 'ip'
    assert c.get_option('inherit_env') is False


def test_pipelining_option():
    assert _connection(ansible_netns_name='x', ansible_pipelining=True).is_pipelining_enabled()
    assert not _connection(ansible_netns_name='x', ansible_pipelining=False).is_pipelining_enabled()


def test_name_precedence(nsname):
    # ansible_netns_name beats ansible_host, which beats inventory_hostname.
    c = _connection(inventory_hostname='no-such-a', ansible_host='no-such-b', ansible_netns_name=nsname)
    assert _sh(c, 'true')[0] == 0
    c = _connection(inventory_hostname='no-such-a', ansible_host=nsname)
    assert _sh(c, 'true')[0] == 0


def test_name_from_play_context_remote_addr(nsname):
    from ansible.playbook.play_context import PlayContext
    from ansible.plugins.loader import connection_loader

    pc = PlayContext()
    pc.remote_addr = nsname
    c = connection_loader.get(PLUGIN, pc)
    c.set_options()
    assert _sh(c, 'true')[0] == 0


# --- commands -----------------------------------------------------------------------------------

@pytest.mark.parametrize('rc', [0, 1, 3, 127, 255])
def test_exit_codes(conn, rc):
    assert _sh(conn, f'exit {rc}') == (rc, b'', b'')


def test_stdout_stderr_separated(conn):
    rc, out, err = _sh(conn, 'echo out1; echo err1 >&2; printf "out2"; printf "err2" >&2; exit 7')
    assert (rc, out, err) == (7, b'out1\nout2', b'err1\nerr2')
    assert isinstance(out, bytes) and isinstance(err, bytes)


def test_command_not_found(conn):
    rc, out, err = _sh(conn, 'edgeft-no-such-command-xyz')
    assert rc == 127
    assert b'not found' in err


def test_stdin_in_data(conn):
    rc, out, err = _sh(conn, 'cat', in_data=BINARY)
    assert rc == 0 and err == b''
    assert out == BINARY
    rc, out, err = _sh(conn, 'wc -c', in_data=b'12345')
    assert out.strip() == b'5'


def test_non_ascii_command_and_output(conn):
    rc, out, err = _sh(conn, "printf '%s' 'grüße 名前'")
    assert rc == 0 and out.decode('utf-8') == 'grüße 名前'


def test_runs_in_the_namespace(conn, nsname):
    ns_inode = os.stat(f'/run/netns/{nsname}').st_ino
    own = os.readlink('/proc/self/ns/net')
    rc, out, err = _sh(conn, 'readlink /proc/self/ns/net')
    assert rc == 0, err
    assert out.decode().strip() == f'net:[{ns_inode}]'
    assert out.decode().strip() != own

    rc, out, err = _sh(conn, 'ip -o link show')
    links = {line.split(':')[1].strip().split('@')[0] for line in out.decode().splitlines()}
    assert links == {'lo', *VETH}
    machine = {name for dummy, name in socket.if_nameindex()}
    assert links != machine

    # ip netns exec remounts /sys, so sysfs shows the namespace's devices too.
    rc, out, err = _sh(conn, 'ls /sys/class/net')
    assert set(out.decode().split()) == {'lo', *VETH}


def test_environment_and_cwd(conn, monkeypatch):
    monkeypatch.setenv('EDGEFT_LEAK_PROBE', 'leaked')
    monkeypatch.setenv('PYTHONPATH', '/leaked/path')
    rc, out, err = _sh(conn, 'echo "$PATH|${EDGEFT_LEAK_PROBE-unset}|${PYTHONPATH-unset}|$HOME|$(pwd)"')
    path, probe, pypath, home, cwd = out.decode().strip().split('|')
    assert '/usr/sbin' in path.split(':') and '.venv' not in path
    assert (probe, pypath) == ('unset', 'unset')
    assert cwd == home

    c = _connection(ansible_netns_name=conn.get_option('netns_name'), ansible_netns_inherit_env=True)
    rc, out, err = _sh(c, 'echo "${EDGEFT_LEAK_PROBE-unset}"')
    assert out == b'leaked\n'


def test_become_su_to_unprivileged_user(conn):
    # Already root: su switches without a password; the success marker shows become ran.
    from ansible.plugins.loader import become_loader

    become = become_loader.get('su')
    become.set_options(direct={'become_user': 'nobody', 'become_flags': '-s /bin/sh'})
    conn.set_become_plugin(become)
    cmd = become.build_become_command('id -un', conn._shell)
    rc, out, err = conn.exec_command(cmd, sudoable=True)
    assert rc == 0, err
    assert out.split()[-1] == b'nobody'
    assert become.success.encode() in out


# --- file transfer ------------------------------------------------------------------------------

def _roundtrip(conn, tmp_path, name, data):
    src = tmp_path / 'src' / name
    src.parent.mkdir(exist_ok=True)
    src.write_bytes(data)
    remote = tmp_path / 'remote' / name
    remote.parent.mkdir(exist_ok=True)
    conn.put_file(str(src), str(remote))
    assert remote.read_bytes() == data
    back = tmp_path / 'back' / name
    back.parent.mkdir(exist_ok=True)
    conn.fetch_file(str(remote), str(back))
    assert back.read_bytes() == data


def test_put_fetch_binary(conn, tmp_path):
    _roundtrip(conn, tmp_path, 'all-bytes.bin', BINARY)


@pytest.mark.parametrize('name', ODD_NAMES)
def test_put_fetch_non_ascii_names_and_contents(conn, tmp_path, name):
    _roundtrip(conn, tmp_path, name, 'Inhalt: ünïcödé 名前 ✓\n'.encode() + bytes(range(256)))


def test_put_fetch_empty_file(conn, tmp_path):
    _roundtrip(conn, tmp_path, 'empty', b'')


def test_put_overwrites(conn, tmp_path):
    dst = tmp_path / 'dst'
    dst.write_bytes(b'x' * 10000)
    src = tmp_path / 'src'
    src.write_bytes(b'short')
    conn.put_file(str(src), str(dst))
    assert dst.read_bytes() == b'short'


def test_put_missing_source(conn, tmp_path):
    from ansible.errors import AnsibleFileNotFound

    with pytest.raises(AnsibleFileNotFound, match='does not exist'):
        conn.put_file(str(tmp_path / 'nope.bin'), str(tmp_path / 'dst.bin'))
    assert not (tmp_path / 'dst.bin').exists()


def test_put_into_missing_directory(conn, tmp_path):
    from ansible.errors import AnsibleError

    src = tmp_path / 'src'
    src.write_bytes(b'data')
    target = tmp_path / 'no-dir' / 'dst'
    with pytest.raises(AnsibleError, match=r'failed to put .*no-dir/dst.*No such file'):
        conn.put_file(str(src), str(target))


def test_fetch_missing_remote(conn, tmp_path):
    from ansible.errors import AnsibleFileNotFound

    with pytest.raises(AnsibleFileNotFound, match=r'failed to fetch .*nope\.bin.*No such file'):
        conn.fetch_file(str(tmp_path / 'nope.bin'), str(tmp_path / 'local.bin'))
    assert not (tmp_path / 'local.bin').exists()


def test_fetch_directory_fails(conn, tmp_path):
    from ansible.errors import AnsibleError

    with pytest.raises(AnsibleError, match='failed to fetch'):
        conn.fetch_file(str(tmp_path), str(tmp_path / 'local.bin'))
    assert not (tmp_path / 'local.bin').exists()


def test_transfer_sees_the_namespace_etc(conn, nsname, tmp_path):
    # ip netns exec bind-mounts /etc/netns/NAME/* over /etc: transfers must see what modules see,
    # which a direct copy on the controller would not.
    etc_netns = '/etc/netns'
    created_parent = not os.path.isdir(etc_netns)
    nsdir = os.path.join(etc_netns, nsname)
    os.makedirs(nsdir)
    try:
        content = b'198.18.250.1 edgeft-netns-probe\n'
        with open(os.path.join(nsdir, 'hosts'), 'wb') as f:
            f.write(content)
        assert _sh(conn, 'cat /etc/hosts')[1] == content
        conn.fetch_file('/etc/hosts', str(tmp_path / 'hosts'))
        assert (tmp_path / 'hosts').read_bytes() == content
        with open('/etc/hosts', 'rb') as f:
            assert f.read() != content
    finally:
        shutil.rmtree(nsdir, ignore_errors=True)
        if created_parent:
            try:
                os.rmdir(etc_netns)
            except OSError:
                pass


# --- connection errors --------------------------------------------------------------------------

def test_missing_namespace():
    from ansible.errors import AnsibleConnectionFailure

    name = f'eft-missing-{uuid.uuid4().hex[:8]}'
    c = _connection(ansible_netns_name=name)
    with pytest.raises(AnsibleConnectionFailure) as exc:
        c.exec_command('true')
    msg = str(exc.value)
    assert name in msg and f'ip netns add {name}' in msg and 'edgeft-lab up' in msg


@pytest.mark.parametrize('name', ['../etc', '.', 'a/b'])
def test_invalid_namespace_name(name):
    from ansible.errors import AnsibleConnectionFailure

    with pytest.raises(AnsibleConnectionFailure, match='not a valid network namespace name'):
        _connection(ansible_netns_name=name).exec_command('true')


def test_requires_root(nsname, monkeypatch):
    from ansible.errors import AnsibleError

    c = _connection(ansible_netns_name=nsname)
    monkeypatch.setattr(os, 'geteuid', lambda: 1000)
    with pytest.raises(AnsibleError, match='requires root.*sudo'):
        c.exec_command('true')


@pytest.mark.parametrize('exe', ['/nonexistent/ip', 'edgeft-no-such-ip'])
def test_ip_executable_missing(nsname, exe):
    from ansible.errors import AnsibleError

    c = _connection(ansible_netns_name=nsname, ansible_netns_ip_exe=exe)
    with pytest.raises(AnsibleError, match='ansible_netns_ip_exe'):
        c.exec_command('true')


def test_namespace_removed_after_connect(tmp_path):
    name = _create_netns()
    try:
        c = _connection(ansible_netns_name=name)
        assert _sh(c, 'true')[0] == 0
    finally:
        remove_netns(name)
    rc, out, err = _sh(c, 'true')
    assert rc != 0 and name.encode() in err


def test_close_and_reset(conn):
    assert _sh(conn, 'true')[0] == 0
    assert conn.connected
    conn.reset()
    assert not conn.connected
    assert _sh(conn, 'true')[0] == 0
    conn.close()
    assert not conn.connected
