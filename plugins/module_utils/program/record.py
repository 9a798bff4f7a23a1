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

from ansible_collections.edgeft.failover.plugins.module_utils import jsonrecord, netlink
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


class StateStore(jsonrecord.Record):
    """What edgeft created that the kernel cannot attribute: clsact qdiscs, pins.

    Records carry the network namespace and boot they belong to, so a state_dir
    shared by several namespaces, or surviving a reboot, never makes a clsact
    someone else created look like ours.
    """

    FILE, LOCK, WHAT = STATE_FILE, LOCK_FILE, 'ebpf_program record'

    def __init__(self, state_dir):
        # state_dir is checked with the other options (validate.py).
        super().__init__(state_dir, ProgramError, check=False)
        self.netns, self.boot = _here()

    def load(self):
        """This boot's records; an unreadable file, or one that is not a version 1 record, names state_dir."""
        data = self.read()
        data.setdefault('version', VERSION)
        data['clsact'] = [r for r in data.get('clsact', []) if r.get('boot_id') == self.boot]
        data['pins'] = [r for r in data.get('pins', []) if r.get('boot_id') == self.boot]
        return data

    def save(self, data):
        self.write(data)

    def clsact_record(self, index, interface):
        return {'interface': interface, 'ifindex': index, 'netns': self.netns, 'boot_id': self.boot}

    def owns_clsact(self, data, index, interface):
        return self.clsact_record(index, interface) in data['clsact']

    def pin_record(self, path):
        return {'path': path, 'boot_id': self.boot}
