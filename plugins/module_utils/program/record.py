# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the ebpf_program module created that the kernel cannot attribute, the
clsact qdiscs and the pins, in <state_dir>/ebpf_program.json (read and written
through jsonrecord, locked through atomicfile):

    {"version": 1,
     "clsact": [{"interface": "fab0", "ifindex": 3, "netns": <inode>, "boot_id": "..."}],
     "pins": [{"path": "/sys/fs/bpf/edgeft/edgeft_peers_v1", "boot_id": "..."}]}
"""

from __future__ import annotations

import os

from ansible_collections.edgeft.failover.plugins.module_utils import atomicfile, jsonrecord, netlink
from ansible_collections.edgeft.failover.plugins.module_utils.program.spec import ProgramError

STATE_FILE = 'ebpf_program.json'
LOCK_FILE = 'ebpf_program.lock'
VERSION = 1


def _here():
    """(network namespace inode, boot id): where a clsact record is valid."""
    ino = netlink.netns_inode()[1]
    try:
        with open('/proc/sys/kernel/random/boot_id') as f:
            boot = f.read().strip()
    except OSError:
        boot = ''
    return ino, boot


class StateStore:
    """What edgeft created that the kernel cannot attribute: clsact qdiscs, pins.

    Records carry the network namespace and boot they belong to, so a state_dir
    shared by several namespaces, or surviving a reboot, never makes a clsact
    someone else created look like ours.
    """

    def __init__(self, state_dir):
        self.state_dir = state_dir
        self.path = os.path.join(state_dir, STATE_FILE)
        self.netns, self.boot = _here()

    def load(self):
        """This boot's records; an unreadable file, or one that is not a version 1 record, names state_dir."""
        data = jsonrecord.read(self.path, VERSION, 'ebpf_program record', ProgramError)
        data.setdefault('version', VERSION)
        data['clsact'] = [r for r in data.get('clsact', []) if r.get('boot_id') == self.boot]
        data['pins'] = [r for r in data.get('pins', []) if r.get('boot_id') == self.boot]
        return data

    def save(self, data):
        jsonrecord.write(self.state_dir, self.path, data)

    def locked(self):
        """Serialise module runs of one host (and of hosts sharing the directory)."""
        return atomicfile.locked(self.state_dir, LOCK_FILE)

    def clsact_record(self, index, interface):
        return {'interface': interface, 'ifindex': index, 'netns': self.netns, 'boot_id': self.boot}

    def owns_clsact(self, data, index, interface):
        return self.clsact_record(index, interface) in data['clsact']

    def pin_record(self, path):
        return {'path': path, 'boot_id': self.boot}
