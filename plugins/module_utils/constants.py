# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The values edgeft's modules, agent and lab must agree on, written once.

At the bottom of the import graph: it imports nothing of edgeft's.
"""

from __future__ import annotations

import socket

# The collection's version (galaxy.yml's, kept equal by tests/pure/test_collection_build.py):
# what `edgeft-agent --version` and the edgeft_build_info metric report.
VERSION = "0.1.0"

# Where the modules and the agent record what they made (every state_dir's default).
STATE_DIR = "/var/lib/edgeft"

# rtnetlink protocol of every route and rule edgeft adds: how edgeft finds its own.
ROUTE_PROTO = 237
# The kernel's local table (RT_TABLE_LOCAL), where the agent keeps the IPv6 addresses of a NIC
# without carrier local (fabric/routes.py keep_local).
LOCAL_TABLE = 255

# 0xEDF7 = 60919: the tc handle of the data path's filters and the agent's backup-route table;
# the agent's held routes use the table after it. Tables of a multihome plan must avoid both.
TC_HANDLE = 0xEDF7
BACKUP_TABLE = 0xEDF7
HELD_TABLE = BACKUP_TABLE + 1
# The backup-route rules sit at BACKUP_RULE_PRIORITY - 1 .. + 1 (fabric/routes.py).
BACKUP_RULE_PRIORITY = 32690

# Python 3.11's socket module lacks IPV6_TCLASS on some builds; 67 is Linux's value.
IPV6_TCLASS = getattr(socket, "IPV6_TCLASS", 67)
