"""Shared test setup: make the collection importable as ansible_collections.edgeft.failover."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, '.build', 'collections')

# scripts/bootstrap.sh links the checkout there; module_utils are imported by
# their collection path, exactly as Ansible imports them on a target.
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
LAB = os.path.join(ROOT, 'lab')
if LAB not in sys.path:
    sys.path.insert(0, LAB)
