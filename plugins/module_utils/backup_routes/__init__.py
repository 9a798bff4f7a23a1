# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel backup routes for the backup_routes module (docs/backup_routes.md).

spec: validate and normalise the declaration (pure). changes: compare it with
the kernel and the record, and build the network plan (pure). kernel: read
and write routes and sysctls (pyroute2, /proc/sys). record: what the module
installed. run: the module, end to end. Free of Ansible imports.
"""
