# Copyright: edgeft contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files replaced whole, and a directory lock: the two ways edgeft writes what it keeps on a
host (its records in state_dir, its persisted network configuration, its installed files);
a file's state read and put back (a writer's undo); and which of its directories removing its
files leaves empty."""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile


@contextlib.contextmanager
def _removed_on_failure(tmp):
    """Remove the temporary entry tmp if the block fails (it was never renamed into place)."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def replace(path, data, mode=None, root_owned=False):
    """Replace the file at path with `data` (bytes): written to a temporary file beside it,
    flushed to disk, then renamed over it, so a crash leaves the old or the new file, never
    part of one. `mode` and root ownership are set before the rename."""
    directory, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + name + ".")
    with _removed_on_failure(tmp):
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if root_owned:
                os.fchown(handle.fileno(), 0, 0)
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)


def replace_link(path, target):
    """Make path a symbolic link to target in one rename: a reader sees the old entry or the
    new link, never neither."""
    tmp = "%s.edgeft-%d" % (path, os.getpid())
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    os.symlink(target, tmp)
    with _removed_on_failure(tmp):
        os.replace(tmp, path)


def current(path):
    """(bytes, mode, root-owned) of the file at path (a link is followed), None when there is none."""
    try:
        with open(path, "rb") as handle:
            status = os.fstat(handle.fileno())
            return handle.read(), status.st_mode & 0o7777, (status.st_uid, status.st_gid) == (0, 0)
    except FileNotFoundError:
        return None


def restore(path, before):
    """Put back what current() read at path: the file as it was (root-owned), or, for None, no
    file (or an empty directory a writer created) at all."""
    if before is None:
        if os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)
        else:
            os.unlink(path)
    else:
        replace(path, before[0], before[1], root_owned=True)


def makedirs(path, mode=0o755):
    """Create path and its missing parents, each with `mode` whatever the umask; returns the
    ones created, parents first (for an undo)."""
    if os.path.isdir(path):
        return []
    created = makedirs(os.path.dirname(path), mode)
    try:
        os.mkdir(path)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
        return created  # another run made it meanwhile (hosts sharing a directory): not ours to undo
    os.chmod(path, mode)
    return created + [path]


@contextlib.contextmanager
def locked(directory, lock_file, create=True):
    """Hold an exclusive lock on directory/lock_file for the block (runs of one host, and
    hosts sharing the directory, wait for each other). Yields whether the lock is held: with
    create=False (check mode) neither the directory nor the lock file is created, and a missing
    one means nothing is locked."""
    path = os.path.join(directory, lock_file)
    if create:
        os.makedirs(directory, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    else:
        # Check mode creates nothing: without a lock file no writer has run here, so none to wait for.
        try:
            fd = os.open(path, os.O_RDWR)
        except (FileNotFoundError, NotADirectoryError):
            fd = None
    if fd is None:
        yield False
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)


def emptied_directories(directories, gone):
    """The directories of `directories` (absolute) that hold nothing once the paths of `gone`
    (absolute) are removed, but directories of this list that are emptied too: deepest first.
    Links and what does not exist are never among them."""
    emptied = []
    for directory in sorted(set(directories), key=lambda d: d.count("/"), reverse=True):
        if directory in gone or not os.path.isdir(directory) or os.path.islink(directory):
            continue
        if all(os.path.join(directory, name) in gone or os.path.join(directory, name) in emptied
               for name in os.listdir(directory)):
            emptied.append(directory)
    return emptied
