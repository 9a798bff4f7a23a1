# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The versioned JSON files in state_dir that record what edgeft made (peer ids,
per-peer drains, bonds, backup routes, multihome state): one way to read and
one way to write them."""

from __future__ import annotations

import json
import os

from ansible_collections.edgeft.failover.plugins.module_utils import atomicfile


def read(path, version, what, error) -> dict:
    """The record at path, {} when there is none; `error` (the caller's option error
    class) names state_dir when the file cannot be read or is not a version `version`
    edgeft `what` record."""
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise error("state_dir: cannot read %s: %s" % (path, e)) from None
    if not isinstance(data, dict) or data.get("version") != version:
        raise error("state_dir: %s is not a version %d edgeft %s" % (path, version, what))
    return data


def write(state_dir, path, data) -> None:
    """Atomically replace path (in state_dir) with data: a crash leaves the old or the new file."""
    os.makedirs(state_dir, exist_ok=True)
    atomicfile.replace(path, json.dumps(data, indent=1, sort_keys=True).encode())
