# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    """The attributes every edgeft module shares; use with ansible.builtin.action_common_attributes,
    which describes them."""

    # A module that changes the host: check mode and diff mode in full.
    DOCUMENTATION = r'''
options: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
'''

    # A module that only reads the host: nothing to diff.
    INFO_MODULE = r'''
options: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
'''
