# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Make edgeft's persisted files under a root exactly a given set, in one pass.

The role renders the files on the controller; this writes them on the host: only paths that
are edgeft's by files.LOCATIONS and the prefix, each atomically (a crash leaves the old or the
new file, never half of one), root-owned with its mode, and removes edgeft's files the set no
longer holds. What would change is computed first and is all check mode and diff see.

A directory this creates for its files (a renderer's, missing on the host) is recorded in the
state directory (RECORD, by root) and removed again by the run that leaves it empty, so the
uninstall puts back the tree as it found it; a directory with anything else in it stays.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import posixpath

from ansible_collections.edgeft.failover.plugins.module_utils import atomicfile, jsonrecord
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError
from ansible_collections.edgeft.failover.plugins.module_utils.persist import files as locations
from ansible_collections.edgeft.failover.plugins.module_utils.persist.plan import PlanError

MODES = ("0644", "0600")
RECORD = "network_files.json"
RECORD_VERSION = 1


def _check(entry, where, prefix):
    if not isinstance(entry, dict) or set(entry) - {"path", "content", "mode"}:
        raise PlanError("%s: must be a dict with path, content and mode" % where)
    path, content, mode = entry.get("path"), entry.get("content"), entry.get("mode", "0644")
    if not isinstance(content, str):
        raise PlanError("%s.content: must be a string" % where)
    if mode not in MODES:
        raise PlanError("%s.mode: %r must be one of %s" % (where, mode, ", ".join(MODES)))
    if not isinstance(path, str) or posixpath.normpath(path) != path or path.startswith(("/", "..")):
        raise PlanError("%s.path: %r must be a normalised path relative to the root" % (where, path))
    directory, name = posixpath.split(path)
    globs = dict(locations.LOCATIONS).get(directory)
    if globs is None or not any(fnmatch.fnmatchcase(name, g.format(prefix=prefix)) for g in globs):
        raise PlanError("%s.path: %r is not one of edgeft's file names for the prefix %r (docs/persistence.md)"
                        % (where, path, prefix))
    return path, content.encode("utf-8"), int(mode, 8)


def _text(data):
    return data.decode("utf-8", errors="replace")


def changes(root, prefix, wanted, created=()):
    """What making root's edgeft files exactly `wanted` ([{path, content, mode}]) takes.

    Returns {directories, write, remove, rmdirs}: directories to create (relative to root),
    files to write as [{path (absolute), data, mode, before (text or None)}], files to remove
    (absolute), and which of the directories recorded as `created` (relative to root) that
    leaves empty, to remove (absolute, deepest first). PlanError names the entry of `wanted`
    at fault.
    """
    if not locations.PREFIX.match(prefix or ""):
        raise PlanError("prefix: %r must consist of letters, digits, _ and -" % (prefix,))
    present, directories = locations.edgeft_files(root, prefix)
    plan = {"directories": [], "write": [], "remove": []}
    seen = set()
    for index, entry in enumerate(wanted):
        path, data, mode = _check(entry, "files[%d]" % index, prefix)
        if path in seen:
            raise PlanError("files[%d].path: %r is given twice" % (index, path))
        seen.add(path)
        directory = posixpath.dirname(path)
        if not directories[directory] and directory not in plan["directories"]:
            plan["directories"].append(directory)
        full = os.path.join(root, path)
        if os.path.isdir(full) and not os.path.islink(full):
            raise PlanError("files[%d].path: %s is a directory on the host: remove it, or choose another prefix"
                            % (index, full))
        current = atomicfile.current(full)
        if current != (data, mode, True):
            plan["write"].append({"path": full, "data": data, "mode": mode,
                                  "before": _text(current[0]) if current else None})
    kept = {os.path.join(root, path) for path in seen}
    plan["remove"] = [path for path in present if path not in kept]
    # Of the directories this created, those the plan leaves empty and no wanted file goes into.
    needed = {posixpath.dirname(path) for path in seen}
    unneeded = [os.path.join(root, d) for d in created if not any(n == d or n.startswith(d + "/") for n in needed)]
    plan["rmdirs"] = atomicfile.emptied_directories(unneeded, set(plan["remove"]))
    return plan


def diff(plan):
    """Ansible's per-file diffs of a changes() result."""
    out = [{"before_header": w["path"], "after_header": w["path"], "before": w["before"] or "", "after": _text(w["data"])}
           for w in plan["write"]]
    for path in plan["remove"]:
        current = atomicfile.current(path)
        out.append({"before_header": path, "after_header": "%s (removed)" % path,
                    "before": _text(current[0]) if current else "", "after": ""})
    out.extend({"before_header": path + "/", "after_header": "%s/ (removed)" % path, "before": "", "after": ""}
               for path in plan["rmdirs"])
    return out


def apply(root, plan):
    """Carry out a changes() result; returns the directories it created (absolute). On an
    OSError the files already changed get their old contents back and the created
    directories go, then the error is raised. A directory to remove that is no longer empty
    (something was put there meanwhile) stays."""
    undo, made = [], []
    try:
        for directory in plan["directories"]:
            for created in atomicfile.makedirs(os.path.join(root, directory)):
                undo.append((created, None))
                made.append(created)
        for write in plan["write"]:
            undo.append((write["path"], atomicfile.current(write["path"])))
            atomicfile.replace(write["path"], write["data"], write["mode"], root_owned=True)
        for path in plan["remove"]:
            undo.append((path, atomicfile.current(path)))
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    except OSError:
        for path, before in reversed(undo):
            with contextlib.suppress(OSError):
                atomicfile.restore(path, before)
        raise
    for path in plan["rmdirs"]:
        with contextlib.suppress(OSError):
            os.rmdir(path)
    return made


def run(params, check_mode):
    """The network_files module: (result, warnings), with the diff; EdgeftError names the option."""
    root, state_dir = params["root"], params["state_dir"]
    if not os.path.isabs(root) or not os.path.isdir(root):
        raise PlanError("root: %r is not an existing absolute directory" % root)
    jsonrecord.check_state_dir(state_dir, PlanError)
    record_path = os.path.join(state_dir, RECORD)
    record = jsonrecord.read(record_path, RECORD_VERSION, "network_files record", PlanError)
    created = record.get("roots", {}).get(root, [])
    plan = changes(root, params["prefix"], params["files"], created)
    result = dict(changed=bool(plan["write"] or plan["remove"] or plan["rmdirs"]),
                  files=[os.path.join(root, f["path"]) for f in params["files"]],
                  written=[w["path"] for w in plan["write"]], removed=plan["remove"], directories=plan["directories"],
                  removed_directories=plan["rmdirs"], diff=diff(plan))
    if result["changed"] and not check_mode:
        try:
            made = apply(root, plan)
        except OSError as exc:
            result.pop("diff")
            raise EdgeftError("cannot write the files under %s: %s (run as root)" % (root, exc), result=result) from None
        gone = {os.path.relpath(path, root) for path in plan["rmdirs"] if not os.path.isdir(path)}
        now = sorted((set(created) | {os.path.relpath(path, root) for path in made}) - gone)
        if now != sorted(created):
            roots = dict(record.get("roots", {}))
            if now:
                roots[root] = now
            else:
                roots.pop(root, None)
            jsonrecord.write(state_dir, record_path, {"version": RECORD_VERSION, "roots": roots})
    return result, []
