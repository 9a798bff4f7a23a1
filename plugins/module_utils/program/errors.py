# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ProgramError, apart from the spec: the modules that build objects or write the restore's
record raise it without importing tc and pyroute2."""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError


class ProgramError(EdgeftError):
    """Bad input or a failed change; the text names the option or what was rolled back."""
