# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: netns
author:
  - edgeft maintainers (@edgeft)
short_description: Run tasks inside a network namespace of the controller
description:
  - Runs commands and transfers files inside an existing Linux network namespace on the Ansible
    controller, through C(ip netns exec NAME ...), so that one machine can hold a whole test
    fabric (hosts, switches) as inventory hosts.
  - Only the network namespace differs from the controller; the file system, users and processes
    are shared. Like C(ip netns exec) itself, each command gets a private mount namespace in which
    C(/sys) shows the namespace's devices and files under C(/etc/netns/NAME/) are bind-mounted over
    C(/etc).
  - Commands run as the user running Ansible, which must be root. The remote user (C(ansible_user)) is ignored.
    C(become) to another user works with methods that do not prompt when invoked by root
    (for example C(su), or C(sudo) where installed); passwords are never sent.
  - Commands start in the home directory of the user running Ansible, with a minimal environment
    (as an SSH login would), unless O(inherit_env=true).
version_added: 0.1.0
options:
  netns_name:
    description:
      - Name of the network namespace to run in, as listed by C(ip netns list)
        (a file under C(/run/netns/)).
      - If unset, the host's C(ansible_host) or, failing that, its C(inventory_hostname) is used.
        Set C(ansible_netns_name) when C(ansible_host) holds an address rather than a namespace name.
    type: string
    vars:
      - name: inventory_hostname
      - name: ansible_host
      - name: ansible_netns_name
  ip_exe:
    description:
      - The C(ip) executable (iproute2) used to enter the namespace.
      - A bare name is looked up on E(PATH) and in the system binary directories (C(/usr/sbin), C(/sbin)).
    type: string
    default: ip
    ini:
      - section: netns_connection
        key: ip_exe
    env:
      - name: ANSIBLE_NETNS_IP_EXE
    vars:
      - name: ansible_netns_ip_exe
  inherit_env:
    description:
      - Pass the controller's whole environment to commands run in the namespace.
      - By default only a minimal login-like environment is passed (E(PATH) set to the system
        directories, E(HOME), E(USER), E(LOGNAME), E(SHELL), E(TERM), E(TZ), E(LANG) and E(LC_*)),
        so that a virtualenv, E(PYTHONPATH) or E(ANSIBLE_*) variables of the controller do not leak
        into modules and interpreter discovery behaves as on a real host.
    type: boolean
    default: false
    ini:
      - section: netns_connection
        key: inherit_env
    env:
      - name: ANSIBLE_NETNS_INHERIT_ENV
    vars:
      - name: ansible_netns_inherit_env
extends_documentation_fragment:
  - ansible.builtin.connection_pipelining
notes:
  - Requires root on the controller and iproute2. Namespaces are created outside of Ansible,
    for example with C(ip netns add NAME) or, for the edgeft lab, C(bin/edgeft-lab up).
  - File transfers stream through C(dd) run inside the namespace, so C(dd) must be available
    (coreutils).
"""

EXAMPLES = r"""
# inventory.yml: two lab hosts living in namespaces h1 and h2 of the controller
# all:
#   hosts:
#     h1:
#     h2:
#       ansible_host: 198.18.0.2     # an address: name the namespace explicitly
#       ansible_netns_name: h2
#   vars:
#     ansible_connection: edgeft.failover.netns

- name: Show the interfaces of every namespace host
  hosts: all
  gather_facts: false
  tasks:
    - name: List links inside the namespace
      ansible.builtin.command: ip -o link show
      register: links
      changed_when: false
"""

import getpass
import os
import pwd
import subprocess

import ansible.constants as C
from ansible.errors import AnsibleConnectionFailure, AnsibleError, AnsibleFileNotFound
from ansible.module_utils.common.process import get_bin_path
from ansible.module_utils.common.text.converters import to_bytes, to_native, to_text
from ansible.plugins.connection import BUFSIZE, ConnectionBase
from ansible.utils.display import Display

display = Display()

# Compiled into iproute2 (NETNS_RUN_DIR); /var/run/netns is a symlink to it on current systems.
NETNS_RUN_DIR = '/run/netns'

# Used when the controller's environment is not inherited: the system directories, so that
# interpreter discovery and `ip` inside the namespace find system tools, not a virtualenv.
SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
KEPT_ENV = ('TERM', 'TZ', 'LANG', 'LANGUAGE')

LAB_HINT = "create it with 'ip netns add NAME' (for the edgeft lab: run 'bin/edgeft-lab up')"


class Connection(ConnectionBase):
    """Run commands and transfer files inside a network namespace of the controller."""

    transport = 'edgeft.failover.netns'
    has_pipelining = True
    # No pty is allocated: become methods that need one (require_tty) are refused by Ansible.
    has_tty = False

    def __init__(self, play_context, *args, **kwargs):
        super().__init__(play_context, *args, **kwargs)
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = 'root' if os.geteuid() == 0 else ''
        # Commands run as the controller user; reporting it as the remote user lets Ansible skip
        # a pointless become to the same user (become_user root while already root).
        self.default_user = user
        self.netns = None
        self.ip_cmd = None

    def _connect(self):
        """Check that the namespace can be entered; there is no session to open."""
        if self._connected:
            return self

        netns = self.get_option('netns_name') or self._play_context.remote_addr
        if not netns or '/' in netns or netns in ('.', '..'):
            raise AnsibleConnectionFailure(
                f"edgeft.failover.netns: {netns!r} is not a valid network namespace name; set ansible_netns_name")

        if os.geteuid() != 0:
            raise AnsibleError(
                "edgeft.failover.netns: entering a network namespace requires root on the controller "
                f"(running as uid {os.geteuid()}): run ansible-playbook as root, for example with sudo")

        ip_exe = self.get_option('ip_exe')
        try:
            self.ip_cmd = ip_exe if os.path.isabs(ip_exe) else get_bin_path(ip_exe)
        except ValueError:
            raise AnsibleError(
                f"edgeft.failover.netns: the ip executable {ip_exe!r} was not found: install iproute2 "
                "or set ansible_netns_ip_exe") from None
        if not os.access(self.ip_cmd, os.X_OK):
            raise AnsibleError(f"edgeft.failover.netns: {self.ip_cmd} is not executable: set ansible_netns_ip_exe")

        if not os.path.exists(os.path.join(NETNS_RUN_DIR, netns)):
            raise AnsibleConnectionFailure(
                f"edgeft.failover.netns: network namespace {netns!r} does not exist "
                f"({NETNS_RUN_DIR}/{netns} is missing): {LAB_HINT.replace('NAME', netns)}")

        self.netns = netns
        self._play_context.remote_user = self.default_user
        display.vvv(f"ESTABLISH NETNS CONNECTION FOR USER: {self.default_user}", host=netns)
        self._connected = True
        return self

    def _environment(self, for_transfer=False):
        if self.get_option('inherit_env'):
            env = dict(os.environ)
        else:
            try:
                pw = pwd.getpwuid(os.geteuid())
                home, user, shell = pw.pw_dir, pw.pw_name, pw.pw_shell
            except KeyError:
                home, user, shell = '/', self.default_user, '/bin/sh'
            env = {'PATH': SYSTEM_PATH, 'HOME': home, 'USER': user, 'LOGNAME': user, 'SHELL': shell}
            env.update((k, v) for k, v in os.environ.items() if k in KEPT_ENV or k.startswith('LC_'))
        if for_transfer:
            # dd's messages are matched below (missing file), so keep them untranslated.
            env['LC_ALL'] = 'C'
        return env

    def _cwd(self):
        # Start where an SSH login would (the user's home), not in the controller's working
        # directory, so relative paths behave as on a remote host.
        try:
            home = pwd.getpwuid(os.geteuid()).pw_dir
        except KeyError:
            return '/'
        return home if os.path.isdir(home) else '/'

    def _popen(self, argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, for_transfer=False):
        """Start argv inside the namespace: an argument list, no shell on the controller side."""
        local_cmd = [self.ip_cmd, 'netns', 'exec', self.netns] + list(argv)
        display.vvv(f"EXEC {local_cmd!r}", host=self.netns)
        b_cmd = [to_bytes(a, errors='surrogate_or_strict') for a in local_cmd]
        try:
            return subprocess.Popen(b_cmd, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                                    cwd=self._cwd(), env=self._environment(for_transfer))
        except OSError as ex:
            raise AnsibleConnectionFailure(
                f"edgeft.failover.netns: could not run {self.ip_cmd} for namespace {self.netns!r}: {ex}") from ex

    def exec_command(self, cmd, in_data=None, sudoable=True):
        """Run cmd with the shell executable inside the namespace, feeding in_data on stdin."""
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)

        shell_exe = self._play_context.executable or C.DEFAULT_EXECUTABLE or '/bin/sh'
        shell_exe = shell_exe.split()[0]
        p = self._popen([shell_exe, '-c', to_text(cmd, errors='surrogate_or_strict')])
        stdout, stderr = p.communicate(in_data)
        return p.returncode, stdout, stderr

    def _transfer_error(self, what, src, dst, rc, stderr):
        msg = to_text(stderr, errors='surrogate_or_replace').strip()
        text = (f"edgeft.failover.netns: failed to {what} {to_native(src)!r} to {to_native(dst)!r} "
                f"in namespace {self.netns!r} (rc={rc}): {msg or 'no error output'}")
        if 'No such file or directory' in msg:
            return AnsibleFileNotFound(text)
        return AnsibleError(text)

    # File transfer streams the data through `dd` run with `ip netns exec`, like the chroot
    # connection, instead of copying directly on the shared file system: `ip netns exec` gives the
    # command a private mount namespace (/sys remounted, /etc/netns/NAME/* bind-mounted over /etc),
    # so a direct copy could read or write a different file than the one modules see at the same
    # path. dd takes the path as an argument (of=/if=), so no shell quoting is involved and any
    # byte in a file name passes unchanged; the data is never held in memory as a whole.

    def put_file(self, in_path, out_path):
        """Transfer a file from the controller into the namespace."""
        super().put_file(in_path, out_path)
        display.vvv(f"PUT {in_path} TO {out_path}", host=self.netns)

        b_in_path = to_bytes(in_path, errors='surrogate_or_strict')
        try:
            in_file = open(b_in_path, 'rb')
        except FileNotFoundError:
            raise AnsibleFileNotFound(
                f"edgeft.failover.netns: file or module does not exist: {to_native(in_path)}") from None
        except OSError as ex:
            raise AnsibleError(f"edgeft.failover.netns: cannot read {to_native(in_path)!r}: {ex.strerror}") from ex

        with in_file:
            p = self._popen(['dd', f'of={out_path}', f'bs={BUFSIZE}', 'status=none'],
                            stdin=in_file, stdout=subprocess.DEVNULL, for_transfer=True)
            dummy, stderr = p.communicate()
        if p.returncode != 0:
            raise self._transfer_error('put', in_path, out_path, p.returncode, stderr)

    def fetch_file(self, in_path, out_path):
        """Fetch a file from the namespace to the controller."""
        super().fetch_file(in_path, out_path)
        display.vvv(f"FETCH {in_path} TO {out_path}", host=self.netns)

        p = self._popen(['dd', f'if={in_path}', f'bs={BUFSIZE}', 'status=none'],
                        stdin=subprocess.DEVNULL, for_transfer=True)
        b_out_path = to_bytes(out_path, errors='surrogate_or_strict')
        out_file = None
        try:
            # The local file is created only once the remote side delivered data or succeeded,
            # so a missing remote file leaves no empty local file behind.
            chunk = p.stdout.read(BUFSIZE)
            if chunk or p.wait() == 0:
                out_file = open(b_out_path, 'wb')
                while chunk:
                    out_file.write(chunk)
                    chunk = p.stdout.read(BUFSIZE)
        except OSError as ex:
            p.kill()
            p.communicate()
            if out_file:
                out_file.close()
                os.unlink(b_out_path)
            raise AnsibleError(f"edgeft.failover.netns: cannot write {to_native(out_path)!r}: {ex.strerror}") from ex

        dummy, stderr = p.communicate()
        if out_file:
            out_file.close()
        if p.returncode != 0:
            if out_file:
                # A partial copy is worse than none.
                os.unlink(b_out_path)
            raise self._transfer_error('fetch', in_path, out_path, p.returncode, stderr)

    def reset(self):
        # Nothing persistent to reset; avoid the base class warning for meta: reset_connection.
        self.close()

    def close(self):
        """Terminate the connection; nothing to do."""
        self._connected = False
