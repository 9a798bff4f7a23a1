"""The Python mirror (layout.py) must equal the header as the compiler sees it."""

from __future__ import annotations

import ctypes
import os
import re

import pytest

from ansible_collections.edgeft.failover.plugins.module_utils.datapath import bpfsys, layout, layout_check
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.build import compile_plane, default_bpf_dir
from ansible_collections.edgeft.failover.plugins.module_utils.datapath.errors import CompileError


def test_every_map_the_programs_use_is_mirrored(host):
    names = set()
    for prog in host.planes[0].progs.values():
        for map_id in bpfsys.prog_map_ids(prog.fd):
            fd = bpfsys.map_fd_by_id(map_id)
            try:
                names.add(bpfsys.map_info(fd).name.decode())
            finally:
                os.close(fd)
    assert names == set(layout.MAPS_BY_NAME)


def test_every_map_the_header_declares_is_mirrored():
    with open(os.path.join(default_bpf_dir(), "edgeft_maps.h")) as f:
        header = f.read()
    declared = re.findall(r"^EDGEFT_MAP\([^;]*?,\s*(edgeft_\w+)\s*,", header, re.M | re.S)
    declared += re.findall(r"^EDGEFT_RINGBUF\((edgeft_\w+)\s*,", header, re.M)
    assert sorted(declared) == sorted(layout.MAPS_BY_NAME)


@pytest.fixture(scope="module")
def bcc_plane():
    """bcc's view of the header's types (the object build checks the same through the asserts below)."""
    plane = compile_plane(0, tunables={"EDGEFT_MAX_PEERS": 8}, loader="bcc")
    try:
        yield plane
    finally:
        plane.close()


# A ring buffer has no key or value types to compare (its record, layout.Wake, is asserted in
# every compile with the other structs); its kernel shape is the next test's.
@pytest.mark.parametrize("spec", [m for m in layout.MAPS if m.map_type != layout.MAP_RINGBUF], ids=lambda s: s.name)
def test_mirror_matches_bcc_types_field_by_field(bcc_plane, spec):
    table = bcc_plane.bpf[spec.name.encode()]
    leaf = table.sLeaf if spec.map_type == layout.MAP_PERCPU_ARRAY else table.Leaf
    assert layout_check.describe(table.Key) == layout_check.describe(spec.key)
    assert layout_check.describe(leaf) == layout_check.describe(spec.value)


@pytest.mark.parametrize("spec", layout.MAPS, ids=lambda s: s.name)
def test_loaded_maps_have_the_mirrored_kernel_shape(host, spec):
    info = bpfsys.map_info(host.planes[0].map_fd(spec.name))
    assert info.type == spec.map_type
    assert (info.key_size, info.value_size) == (ctypes.sizeof(spec.key), ctypes.sizeof(spec.value))
    assert info.max_entries == spec.max_entries(host.planes[0].tunables)
    assert len(spec.name) <= 15  # the kernel keeps 15 characters of a map name
    assert info.name.decode() == spec.name


def test_names_carry_the_layout_version():
    for spec in layout.MAPS:
        assert spec.name.endswith("_v%d" % layout.LAYOUT_VERSION)


class _SwappedPlane(ctypes.Structure):
    c_name = "edgeft_plane"
    _fields_ = [("flags", ctypes.c_uint32), ("ifindex", ctypes.c_uint32)]


@pytest.mark.parametrize("loader", ["object", "bcc"])
def test_a_drifted_mirror_stops_the_compile(monkeypatch, loader):
    """The generated _Static_asserts catch a wrong constant and a wrong offset, in either build."""
    monkeypatch.setitem(layout.CONSTANTS, "EDGEFT_PLANE_DRAINED", 0x4)
    structs = tuple(_SwappedPlane if s is layout.Plane else s for s in layout.STRUCTS)
    monkeypatch.setattr(layout, "STRUCTS", structs)
    with pytest.raises(CompileError) as e:
        compile_plane(0, loader=loader)
    assert "EDGEFT_PLANE_DRAINED" in str(e.value)
    assert "struct edgeft_plane.ifindex offset" in str(e.value)


def test_asserts_cover_every_field():
    text = layout_check.c_asserts(layout.tunables())
    for struct in layout.STRUCTS:
        for name, _ctype in struct._fields_:
            assert "struct %s, %s)" % (struct.c_name, name) in text
    for name in list(layout.CONSTANTS) + list(layout.TUNABLES):
        assert "%s ==" % name in text
