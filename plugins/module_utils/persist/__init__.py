# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Persistence of a host's edgeft network plan: plan checks, renderer detection, renderer gaps.

Free of Ansible imports, so the role's module and the tests share it.
"""
