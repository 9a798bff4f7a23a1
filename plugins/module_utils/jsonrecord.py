# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The versioned JSON files in state_dir that record what edgeft made (peer ids,
per-peer drains, bonds, backup routes, multihome state, programs): one way to
read, write and lock them (Record), and to key them by host or namespace."""

from __future__ import annotations

import json
import os

from ansible_collections.edgeft.failover.plugins.module_utils import atomicfile


def load(path, error, option="state_dir"):
    """The JSON document at path, None when there is none; `error` (the caller's option error
    class) names `option` when the file cannot be read or parsed."""
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise error("%s: cannot read %s: %s" % (option, path, e)) from None


def read(path, version, what, error) -> dict:
    """The record at path, {} when there is none; `error` (the caller's option error
    class) names state_dir when the file cannot be read or is not a version `version`
    edgeft `what` record."""
    data = load(path, error)
    if data is None:
        return {}
    if not isinstance(data, dict) or data.get("version") != version:
        raise error("state_dir: %s is not a version %d edgeft %s" % (path, version, what))
    return data


def read_config(path, error, hint=""):
    """The JSON document of a configuration file; `error` (the caller's error class) says why
    it cannot be read or parsed, naming the option `config`, with `hint` appended."""
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise error("config: cannot read %s: %s%s" % (path, e.strerror or e, hint)) from None
    except ValueError as e:
        raise error("config: %s is not valid JSON: %s" % (path, e)) from None


def write(state_dir, path, data) -> None:
    """Atomically replace path (in state_dir) with data: a crash leaves the old or the new file."""
    os.makedirs(state_dir, exist_ok=True)
    atomicfile.replace(path, json.dumps(data, indent=1, sort_keys=True).encode())


def check_state_dir(state_dir, error) -> None:
    """`error` (the caller's option error) unless state_dir is absolute and, if it exists, a directory."""
    if not state_dir or not os.path.isabs(str(state_dir)):
        raise error("state_dir: %r must be an absolute path" % (state_dir,))
    if os.path.exists(state_dir) and not os.path.isdir(state_dir):
        raise error("state_dir: %s exists and is not a directory" % state_dir)


class Record:
    """A record in state_dir: FILE, a version VERSION edgeft WHAT, its writers serialised by LOCK.

    Keyed records (SECTION set) hold one entry per key (a pin root, a network namespace) under
    data[SECTION], so hosts or namespaces that share state_dir each keep their own; a write
    re-reads the others' entries. `error` is the caller's option error class: every problem
    with the file names state_dir.
    """

    FILE = LOCK = WHAT = ""
    VERSION = 1
    SECTION = None

    def __init__(self, state_dir, error, key=None, check=True):
        if check:
            check_state_dir(state_dir, error)
        self.state_dir = state_dir
        self.path = os.path.join(state_dir, self.FILE)
        self.error = error
        self.key = key

    def read(self) -> dict:
        """The whole file, {} when there is none."""
        return read(self.path, self.VERSION, self.WHAT, self.error)

    def write(self, data) -> None:
        write(self.state_dir, self.path, data)

    def read_entry(self, data=None) -> dict:
        """This key's entry ({} when it has none), from data or the file."""
        data = self.read() if data is None else data
        return data.get(self.SECTION, {}).get(self.key, {})

    def write_entry(self, entry) -> None:
        """Replace this key's entry, keeping the others'; an empty entry is dropped."""
        data = self.read() or {"version": self.VERSION}
        section = data.setdefault(self.SECTION, {})
        if entry:
            section[self.key] = entry
        else:
            section.pop(self.key, None)
        self.write(data)

    def locked(self, create=True):
        """A context holding the record's lock; yields whether it is held (create=False, check
        mode, never creates state_dir and holds nothing when it is missing)."""
        return atomicfile.locked(self.state_dir, self.LOCK, create)
