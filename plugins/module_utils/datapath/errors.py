"""Exceptions of the data path core; each message says how to fix the cause."""

from __future__ import annotations

import os

from ansible_collections.edgeft.failover.plugins.module_utils.errors import EdgeftError


class DatapathError(EdgeftError):
    """Base class: anything the data path core cannot do, with a fix in the text."""


class BccMissingError(DatapathError):
    """bcc's Python bindings cannot be imported."""


class HeadersMissingError(DatapathError):
    """No kernel headers where bcc looks for them."""


class CompileError(DatapathError):
    """bcc or clang failed to compile, or the verifier rejected a program."""


class LibbpfMissingError(DatapathError):
    """No usable libbpf 1.x on this host (the object loader's one dependency)."""


class ObjectError(DatapathError):
    """A BPF object could not be opened, does not fit the layout, or did not load; the text names the file."""


class LayoutMismatchError(DatapathError):
    """A map (pinned or loaded) does not have the layout this code expects."""


class BpfSyscallError(DatapathError):
    """A bpf(2) command failed; .errno is kept for callers that branch on it."""

    def __init__(self, what: str, errno_: int, fix: str = "") -> None:
        msg = "%s: %s" % (what, os.strerror(errno_))
        if fix:
            msg += " (%s)" % fix
        super().__init__(msg)
        self.errno = errno_
