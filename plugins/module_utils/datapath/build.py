"""Load the tc programs of one plane NIC: from an object built once with clang
(loader "object", libbpf) or compiled here with bcc (loader "bcc").

bcc is imported lazily so this module (and all of module_utils) imports on a
controller or target without it; compile_plane() then fails with the fix.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections import namedtuple

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import bpfsys, layout, layout_check, libbpf, objects
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import (
    BccMissingError,
    CompileError,
    DatapathError,
    HeadersMissingError,
)
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.handle import check_map, pin_dir_lock
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.maps import DatapathMaps

SOURCE = objects.SOURCE
PROGRAMS = {"egress": "edgeft_egress", "ingress": "edgeft_ingress"}
LOADERS = ("object", "bcc")

ProgInfo = namedtuple("ProgInfo", "name fd id tag")


def default_bpf_dir() -> str:
    """bpf/ of the collection checkout this file lives in (modules pass their own)."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", "..", "bpf"))


def import_bcc():
    try:
        import bcc  # noqa: F401  pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise BccMissingError(
            "bcc's Python bindings are missing (%s): install the Debian/Ubuntu package python3-bpfcc "
            "and run with the system python3 (PyPI 'bcc' is an unrelated project)" % e
        ) from e
    return bcc


def check_headers() -> None:
    """bcc needs kernel headers; say which package when they are missing."""
    if os.environ.get("BCC_KERNEL_SOURCE"):
        return
    rel = os.uname().release
    build = os.path.join("/lib/modules", rel, "build")
    if not os.path.isdir(os.path.join(build, "include")):
        raise HeadersMissingError(
            "no kernel headers at %s: install linux-headers-%s (or, for a kernel without packaged "
            "headers, link %s to a linux-headers-*-<arch> tree: packet programs only use UAPI headers)" % (build, rel, build)
        )


def prog_info(name: str, fd: int) -> ProgInfo:
    info = bpfsys.prog_info(fd)
    return ProgInfo(name, fd, info.id, bytes(info.tag).hex())


@contextlib.contextmanager
def _captured_stderr():
    """bcc/clang/verifier write diagnostics to fd 2; keep them for the error."""
    buf = {"text": ""}
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield buf
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            buf["text"] = tmp.read().decode("utf-8", "replace")


def prepare_pin_dir(pin_dir: str, tun: dict) -> None:
    """Create pin_dir on a bpffs and refuse pins of another layout or size."""
    if '"' in pin_dir or "\\" in pin_dir or not os.path.isabs(pin_dir):
        raise DatapathError("pin dir %r must be an absolute path without quotes or backslashes" % pin_dir)
    os.makedirs(pin_dir, exist_ok=True)
    if not bpfsys.is_bpffs(pin_dir):
        raise DatapathError(
            "%s is not on a bpf filesystem: mount one first (mount -t bpf bpf <dir>); inside "
            "'ip netns exec' /sys/fs/bpf is hidden, so use a bpffs outside /sys there" % pin_dir
        )
    for spec in layout.MAPS:
        path = os.path.join(pin_dir, spec.name)
        if os.path.exists(path):
            fd = bpfsys.obj_get(path)
            try:
                check_map(fd, spec, spec.max_entries(tun), " (pinned at %s)" % path)
            finally:
                os.close(fd)


def default_object_cache() -> str:
    """Where compile_plane keeps the objects it builds (EDGEFT_OBJECT_CACHE overrides)."""
    return os.environ.get("EDGEFT_OBJECT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "edgeft", "bpf-objects")


class CompiledPlane:
    """The loaded programs of one plane, and the maps they use.

    Keep it alive while the programs are needed and not yet attached; close()
    releases this process's fds (attached programs and pinned maps live on).
    bpf is the bcc object (loader "bcc"), obj the libbpf one (loader "object").
    """

    def __init__(self, plane: int, progs: dict, tunables: dict, pin_dir: str, bpf=None, obj=None) -> None:
        self.plane = plane
        self.bpf = bpf
        self.obj = obj
        self.loader = "bcc" if bpf is not None else "object"
        self.progs = progs
        self.tunables = tunables
        self.pin_dir = pin_dir
        self.maps = DatapathMaps.from_fds({m.name: self.map_fd(m.name) for m in layout.MAPS})

    def map_fd(self, name: str) -> int:
        """This process's fd of one of the programs' maps."""
        if self.bpf is not None:
            return self.bpf[name.encode()].map_fd
        return self.obj.map_fd(name)

    def close(self) -> None:
        if self.bpf is not None:
            self.bpf.cleanup()
            self.bpf = None
        if self.obj is not None:
            self.obj.close()
            self.obj = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def compile_plane(
    plane: int,
    pin_dir: str = None,
    bpf_dir: str = None,
    tunables: dict = None,
    loader: str = "object",
    object_cache: str = None,
) -> CompiledPlane:
    """Build (or take from the cache) and load egress+ingress for the NIC of `plane`.

    pin_dir: bpffs directory of this host's maps (opened if pinned, else created
    and pinned); None keeps the maps private to the returned object.
    tunables: overrides of layout.TUNABLES (EDGEFT_MAX_PEERS, ...).
    loader: "object" (clang here, once per build settings, then libbpf) or "bcc".
    """
    tun = layout.tunables(tunables)
    if not 0 <= plane < tun["EDGEFT_MAX_PLANES"]:
        raise DatapathError("plane %d out of range 0..%d (EDGEFT_MAX_PLANES)" % (plane, tun["EDGEFT_MAX_PLANES"] - 1))
    if loader not in LOADERS:
        raise DatapathError("loader %r is not one of %s" % (loader, ", ".join(LOADERS)))
    bpf_dir = bpf_dir or default_bpf_dir()
    if pin_dir is not None:
        pin_dir = os.path.normpath(pin_dir)
        prepare_pin_dir(pin_dir, tun)
    if loader == "object":
        built = objects.build(plane, tun, bpf_dir, object_cache or default_object_cache())
        return load_object_plane(plane, built.path, tun, pin_dir)
    bcc = import_bcc()
    check_headers()
    with open(os.path.join(bpf_dir, SOURCE)) as f:
        text = f.read() + "\n" + layout_check.c_asserts(tun)
    cflags = ["-I%s" % bpf_dir] + objects.plane_defines(plane, tun)
    if pin_dir is not None:
        cflags.append('-DEDGEFT_PIN_DIR="%s"' % pin_dir)
    with pin_dir_lock(pin_dir):
        b, progs = _load(bcc, text, cflags, plane)
    try:
        for spec in layout.MAPS:
            check_map(b[spec.name.encode()].map_fd, spec, spec.max_entries(tun))
        return CompiledPlane(plane, progs, tun, pin_dir, bpf=b)
    except Exception:
        b.cleanup()
        raise


def load_object_plane(plane: int, path: str, tunables: dict, pin_dir: str = None) -> CompiledPlane:
    """Load one plane's prebuilt object over the maps pinned in pin_dir (or private maps)."""
    obj = libbpf.BpfObject(path)
    try:
        objects.check_layout(obj)
        if pin_dir is not None:
            obj.pin_maps(pin_dir, [m.name for m in layout.MAPS])
        with pin_dir_lock(pin_dir), _captured_stderr() as err:
            try:
                obj.load()
            except DatapathError as e:
                failure = e
            else:
                failure = None
        if failure is not None:
            raise CompileError("edgeft programs for plane %d failed to load: %s\n%s" % (plane, failure, err["text"][-6000:]))
        progs = {role: prog_info(fn, obj.prog_fd(fn)) for role, fn in PROGRAMS.items()}
        for spec in layout.MAPS:
            check_map(obj.map_fd(spec.name), spec, spec.max_entries(tunables))
        return CompiledPlane(plane, progs, tunables, pin_dir, obj=obj)
    except Exception:
        obj.close()
        raise


def _load(bcc, text: str, cflags: list, plane: int):
    b = None
    with _captured_stderr() as err:
        try:
            # bcc wants the text as bytes (str is deprecated and warns)
            b = bcc.BPF(text=text.encode(), cflags=cflags)
            progs = {}
            for role, fn in PROGRAMS.items():
                progs[role] = prog_info(fn, b.load_func(fn.encode(), bcc.BPF.SCHED_CLS).fd)
        except Exception as e:  # bcc raises bare Exception for compile/verifier errors
            failure = e
        else:
            return b, progs
    if b is not None:
        b.cleanup()
    raise CompileError("edgeft programs for plane %d failed to build or load: %s\n%s" % (plane, failure, err["text"]))
