# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Removing edgeft's files in one pass: paths with what is in them, links only when they point
where edgeft made them point, then directories that this leaves empty.

One module run instead of a file task per path (each a module run per host, seconds apiece in an
emulated VM). What would go is computed first and is all check mode and diff see.
"""

from __future__ import annotations

import os
import shutil

from ansible_collections.edgeft.failover.plugins.module_utils import atomicfile
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError

MIN_DEPTH = 2  # never "/" or a top-level directory such as /etc


class PathsError(EdgeftError, ValueError):
    """A bad option; the message starts with its name."""


def _checked(path, where):
    if not isinstance(path, str) or not os.path.isabs(path) or os.path.normpath(path) != (path.rstrip("/") or "/"):
        raise PathsError("%s: %r must be a normalised absolute path" % (where, path))
    if len([part for part in path.split("/") if part]) < MIN_DEPTH:
        raise PathsError("%s: %r is too close to the root to remove (at least %d levels deep)" % (where, path, MIN_DEPTH))
    return path.rstrip("/")


def plan(paths, links, empty_dirs):
    """{remove: [paths], unlink: [links], rmdirs: [dirs], kept: [dirs]}: what removing `paths`
    (with their contents), the links of `links` ([{path, target}]) that point at their target and
    then the directories of `empty_dirs` that hold nothing else takes. PathsError names the option."""
    paths = [_checked(p, "paths[%d]" % i) for i, p in enumerate(paths or [])]
    checked_links = []
    for i, link in enumerate(links or []):
        if not isinstance(link, dict) or set(link) != {"path", "target"}:
            raise PathsError("links[%d]: must be a dict with path and target" % i)
        checked_links.append((_checked(link["path"], "links[%d].path" % i), link["target"]))
    dirs = [_checked(d, "empty_dirs[%d]" % i) for i, d in enumerate(empty_dirs or [])]
    out = {"remove": [p for p in paths if os.path.lexists(p)], "unlink": [], "rmdirs": [], "kept": []}
    for path, target in checked_links:
        if os.path.islink(path) and os.readlink(path) == target:
            out["unlink"].append(path)
    gone = set(out["remove"]) | set(out["unlink"])
    out["rmdirs"] = atomicfile.emptied_directories(dirs, gone)
    out["kept"] = [d for d in sorted(set(dirs), key=lambda d: d.count("/"), reverse=True)
                   if d not in gone and d not in out["rmdirs"] and os.path.isdir(d) and not os.path.islink(d)]
    return out


def apply(steps):
    for path in steps["remove"]:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    for path in steps["unlink"]:
        os.unlink(path)
    for path in steps["rmdirs"]:
        os.rmdir(path)


def run(params, check_mode):
    """The remove_paths module: (result, warnings), with the diff; EdgeftError names the option."""
    steps = plan(params["paths"], params["links"], params["empty_dirs"])
    removed = steps["remove"] + steps["unlink"] + steps["rmdirs"]
    result = dict(changed=bool(removed), removed=removed, kept=steps["kept"],
                  diff={"before": "".join(p + "\n" for p in removed), "after": ""})
    if removed and not check_mode:
        try:
            apply(steps)
        except OSError as exc:
            raise EdgeftError("cannot remove %s: %s (run as root)" % (exc.filename or "a path", exc.strerror or exc),
                              result=dict(result, diff=None)) from None
    return result, []
