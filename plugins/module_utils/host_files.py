# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Install a set of files, directories and links on a host in one pass (the host_files module).

Everything is checked and compared first; then, unless a file's content is still to come, all
of it is changed, or on a failure none of it (what was changed is put back). Every path ends up
owned by root with its mode.

With the controller (plugins/action/host_files.py) this costs one module run on a host that is
as wanted and two on one that is not, whatever the number of files: the action first sends each
file's sha256 and mode only; a file whose content differs is then named in `need_content` and
nothing is changed; the action sends those files' content and the run applies the whole set.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import posixpath
import re
import stat

from ansible_collections.edgeft.failover.plugins.module_utils import atomicfile
from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError

# Permission bits only, as a string: YAML reads an unquoted 0644 as the number 420.
MODE = re.compile(r"^0?[0-7]{3}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
# Larger files, and files that are not UTF-8 text, show in a diff as their size and digest.
DIFF_TEXT_LIMIT = 64 * 1024


class HostFilesError(EdgeftError):
    """An entry that cannot be installed: the message names the option and the fix."""


def describe(data):
    """What a diff shows of a file's content: its text, or its size and digest."""
    if data is None:
        return ""
    if len(data) <= DIFF_TEXT_LIMIT and b"\0" not in data:
        with contextlib.suppress(UnicodeDecodeError):
            return data.decode("utf-8")
    return "(%d bytes, sha256 %s)\n" % (len(data), hashlib.sha256(data).hexdigest())


def _path(value, where):
    if not isinstance(value, str) or not value.startswith("/") or value == "/" or posixpath.normpath(value) != value:
        raise HostFilesError("%s: %r must be a normalised absolute path" % (where, value))
    return value


def _mode(value, where):
    if not isinstance(value, str) or not MODE.match(value):
        raise HostFilesError("%s: %r must be an octal mode as a quoted string, such as '0644' (permission bits only)"
                             % (where, value))
    return int(value, 8)


def _lstat(path):
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # a file where a parent should be: _check_parent names it
        return None


def _owner_mode(status):
    return stat.S_IMODE(status.st_mode), status.st_uid, status.st_gid


def _sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_parent(path, where):
    """The nearest existing ancestor of path must be a directory (a file there cannot hold it)."""
    parent = posixpath.dirname(path)
    while not os.path.lexists(parent):
        parent = posixpath.dirname(parent)
    if not os.path.isdir(parent):
        raise HostFilesError("%s: %s is not a directory on the host, so %s cannot be created: remove it, or choose another path"
                             % (where, parent, path))


def _directory(entry, where):
    path = _path(entry.get("path"), where + ".path")
    mode = _mode(entry.get("mode", "0755"), where + ".mode")
    status = _lstat(path)
    if status is None:
        return {"path": path, "mode": mode, "before": None}
    if not stat.S_ISDIR(status.st_mode):
        raise HostFilesError("%s.path: %s exists on the host and is not a directory: remove it, or choose another path" % (where, path))
    if _owner_mode(status) != (mode, 0, 0):
        return {"path": path, "mode": mode, "before": _owner_mode(status)}
    return None


def _file(entry, where):
    dest = _path(entry.get("dest"), where + ".dest")
    mode = _mode(entry.get("mode", "0644"), where + ".mode")
    digest = entry.get("sha256")
    if not isinstance(digest, str) or not SHA256.match(digest):
        raise HostFilesError("%s.sha256: %r must be 64 lower-case hex digits (the action sets it from src or content)"
                             % (where, digest))
    data = None
    if entry.get("content_base64") is not None:
        try:
            data = base64.b64decode(entry["content_base64"], validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise HostFilesError("%s.content_base64: must be base64" % where) from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise HostFilesError("%s.content_base64: does not match %s.sha256 (damaged on the way?)" % (where, where))
    status = _lstat(dest)
    found = {"dest": dest, "mode": mode, "data": data, "content_changed": True, "before": None}
    if status is None or stat.S_ISLNK(status.st_mode):
        return found  # a link there is replaced by the file, not followed
    if stat.S_ISDIR(status.st_mode):
        raise HostFilesError("%s.dest: %s is a directory on the host: remove it, or choose another dest" % (where, dest))
    if not stat.S_ISREG(status.st_mode):
        raise HostFilesError("%s.dest: %s exists on the host and is not a regular file: remove it, or choose another dest"
                             % (where, dest))
    same_content = _sha256_of(dest) == digest
    if same_content and _owner_mode(status) == (mode, 0, 0):
        return None
    found.update(content_changed=not same_content, before=_owner_mode(status))
    return found


def _link(entry, where):
    dest = _path(entry.get("dest"), where + ".dest")
    src = entry.get("src")
    if not isinstance(src, str) or not src:
        raise HostFilesError("%s.src: the link's target is required, as a non-empty string" % where)
    status = _lstat(dest)
    if status is None:
        return {"dest": dest, "src": src, "before": None}
    if not stat.S_ISLNK(status.st_mode):
        raise HostFilesError("%s.dest: %s exists on the host and is not a link: remove it, or choose another dest" % (where, dest))
    before = os.readlink(dest)
    return None if before == src else {"dest": dest, "src": src, "before": before}


def plan(files=(), directories=(), links=()):
    """What installing the entries takes: {directories, files, links, need_content}, each list
    holding only what differs from the host. HostFilesError names the entry at fault; nothing
    is read but metadata and the digests of existing files."""
    given = {}
    for kind, entries, key in (("directories", directories, "path"), ("files", files, "dest"), ("links", links, "dest")):
        for index, entry in enumerate(entries):
            where = "%s[%d]" % (kind, index)
            if not isinstance(entry, dict):
                raise HostFilesError("%s: must be a dict" % where)
            path = entry.get(key)
            if path in given:
                raise HostFilesError("%s.%s: %s is also %s: give each path once" % (where, key, path, given[path]))
            given[path] = where
    changes = {"directories": [], "files": [], "links": [], "need_content": []}
    for kind, entries, check in (("directories", directories, _directory), ("files", files, _file), ("links", links, _link)):
        for index, entry in enumerate(entries):
            change = check(entry, "%s[%d]" % (kind, index))
            if change is not None:
                changes[kind].append(change)
    for path, where in given.items():
        _check_parent(path, where)
    changes["need_content"] = [f["dest"] for f in changes["files"] if f["content_changed"] and f["data"] is None]
    return changes


def changed_paths(changes):
    return [d["path"] for d in changes["directories"]] + [f["dest"] for f in changes["files"]] + [lk["dest"] for lk in changes["links"]]


def _meta_text(what, mode, owner=(0, 0)):
    return "%s, mode %04o, owner %s\n" % (what, mode, "root" if owner == (0, 0) else "%d:%d" % owner)


def diff(changes):
    """Ansible's diffs of a plan(). A file whose content changes has `after` None: its content
    is the controller's (the action fills it in with describe())."""
    out = []
    for d in changes["directories"]:
        before = "" if d["before"] is None else _meta_text("directory", d["before"][0], d["before"][1:])
        out.append({"before_header": d["path"] + "/", "after_header": d["path"] + "/", "before": before,
                    "after": _meta_text("directory", d["mode"])})
    for f in changes["files"]:
        if f["content_changed"]:
            before = describe(atomicfile.current(f["dest"])[0]) if f["before"] else ""
            out.append({"before_header": f["dest"], "after_header": f["dest"], "before": before, "after": None})
        else:
            out.append({"before_header": f["dest"], "after_header": f["dest"],
                        "before": _meta_text("file", f["before"][0], f["before"][1:]), "after": _meta_text("file", f["mode"])})
    for lk in changes["links"]:
        out.append({"before_header": lk["dest"], "after_header": lk["dest"],
                    "before": "" if lk["before"] is None else "-> %s\n" % lk["before"], "after": "-> %s\n" % lk["src"]})
    return out


def _set_owner_mode(path, mode):
    os.chown(path, 0, 0, follow_symlinks=False)
    os.chmod(path, mode)


def _undo(step):
    kind, path, before = step
    if kind == "created":
        os.rmdir(path)
    elif kind == "owner_mode":
        os.chown(path, before[1], before[2], follow_symlinks=False)
        os.chmod(path, before[0])
    elif kind == "file":
        if isinstance(before, str):  # it was a link
            atomicfile.replace_link(path, before)
        else:
            atomicfile.restore(path, before)
    elif before is None:  # a link that was not there
        os.unlink(path)
    else:
        atomicfile.replace_link(path, before)


def _makedirs(path, undo):
    undo.extend(("created", made, None) for made in atomicfile.makedirs(path))


def apply(changes):
    """Make the changes of a plan() without need_content. On an OSError what was already
    changed is put back, in reverse, and the error is raised."""
    undo = []
    try:
        for d in sorted(changes["directories"], key=lambda d: d["path"].count("/")):
            if d["before"] is None:
                _makedirs(d["path"], undo)
            else:
                undo.append(("owner_mode", d["path"], d["before"]))
            _set_owner_mode(d["path"], d["mode"])
        for f in changes["files"]:
            _makedirs(posixpath.dirname(f["dest"]), undo)
            if f["content_changed"]:
                before = os.readlink(f["dest"]) if os.path.islink(f["dest"]) else atomicfile.current(f["dest"])
                undo.append(("file", f["dest"], before))
                atomicfile.replace(f["dest"], f["data"], f["mode"], root_owned=True)
            else:
                undo.append(("owner_mode", f["dest"], f["before"]))
                _set_owner_mode(f["dest"], f["mode"])
        for lk in changes["links"]:
            _makedirs(posixpath.dirname(lk["dest"]), undo)
            undo.append(("link", lk["dest"], lk["before"]))
            atomicfile.replace_link(lk["dest"], lk["src"])
    except OSError:
        for step in reversed(undo):
            with contextlib.suppress(OSError):
                _undo(step)
        raise


def run(params, check_mode):
    """The host_files module: (result, warnings), with the diff; HostFilesError names the option."""
    changes = plan(params.get("files") or [], params.get("directories") or [], params.get("links") or [])
    paths = changed_paths(changes)
    result = dict(changed=bool(paths), changed_paths=paths, need_content=changes["need_content"], diff=diff(changes))
    if paths and not check_mode and not changes["need_content"]:
        try:
            apply(changes)
        except OSError as exc:
            result.pop("diff")
            raise HostFilesError("cannot install the files (everything was put back as it was): %s (run as root)" % exc,
                                 result=dict(result, changed=False, changed_paths=[])) from None
    return result, []
