# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""python3 -m ansible_collections.edgeft.failover.plugins.module_utils.agent ..."""

from __future__ import annotations

from ansible_collections.edgeft.failover.plugins.module_utils.agent.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
