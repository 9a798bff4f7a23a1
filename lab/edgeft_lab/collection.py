"""The edgeft.failover collection's own Python, imported by the lab.

The lab also runs outside Ansible (bin/edgeft-lab, benchmarks), where no collection finder is
installed: then the collection is found on the collections path, or where
scripts/bootstrap.sh links the checkout (.build/collections).
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

from .errors import LabError

REPO = Path(__file__).resolve().parents[2]
PREFIX = "ansible_collections.edgeft.failover."


def module(name: str, needed_for: str) -> ModuleType:
    """edgeft.failover's `name` (e.g. plugins.module_utils.failover_addresses); LabError naming
    `needed_for` when the collection cannot be found."""
    full = PREFIX + name
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError:
        pass
    paths = [p for p in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep) if p]
    paths.append(str(REPO / ".build" / "collections"))
    for path in paths:
        if path not in sys.path:
            sys.path.append(path)
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError:
        raise LabError("%s needs the edgeft.failover collection importable: run scripts/bootstrap.sh (it links the "
                       "checkout into .build/collections)" % needed_for) from None
