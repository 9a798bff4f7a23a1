# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Linux bonds for the bond module (docs/bonds.md).

spec: validate and normalise a bond declaration (pure). mapping: options to
pyroute2 arguments, to sysfs names and values, and back from netlink (pure).
changes: the diff and the ordered steps that apply it, and the network plan
(pure). kernel: driver detection, reading a bond, running steps with
rollback (pyroute2). record: what the module changed. run: the module.
Free of Ansible imports.
"""
