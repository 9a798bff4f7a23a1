# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The base of every error edgeft reports to its user.

Each core keeps its own subclasses (an option error, a kernel error, ...) for the callers that
tell them apart; a module, the agent or the lab only needs to catch EdgeftError. At the bottom
of the import graph: it imports nothing of edgeft's.
"""

from __future__ import annotations


class EdgeftError(Exception):
    """Bad input or a change that failed. The message names the option, or the host fact, at
    fault and how to fix it; `result` is what a module reports with the failure (what was
    already done, or rolled back)."""

    def __init__(self, msg="", result=None):
        super().__init__(msg)
        self.result = result or {}
