"""The Python-CUDA boundary declared once (nvfp4/boundary.py): the library's descriptors lie where the
table says, and a library or a table with a field moved on one side only is refused naming it."""

import ctypes
import shutil
import subprocess

import pytest

from nvfp4 import boundary
from tools import gen_boundary

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (the C side of the boundary, host-only)")


def swapped(descriptors: dict, name: str, first: str, second: str) -> dict:
    """The table with two fields of one descriptor exchanged."""
    fields = list(descriptors[name])
    i, j = (next(k for k, (f, _) in enumerate(fields) if f == x) for x in (first, second))
    fields[i], fields[j] = fields[j], fields[i]
    return {**descriptors, name: tuple(fields)}


def c_side(tmp_path, descriptors: dict) -> ctypes.CDLL:
    """The generated header for `descriptors`, compiled alone: its layout report."""
    header = tmp_path / "boundary_generated.cuh"
    header.write_text(gen_boundary.generated(descriptors))
    source = tmp_path / "layout.cpp"
    source.write_text('#include "boundary_generated.cuh"\n')
    library = tmp_path / "liblayout.so"
    subprocess.run(["g++", "-std=c++17", "-shared", "-fPIC", "-x", "c++", str(source), "-o", str(library)], check=True)
    lib = ctypes.CDLL(str(library))
    lib.nvfp4_descriptor_size.restype = lib.nvfp4_descriptor_offset.restype = ctypes.c_int64
    lib.nvfp4_descriptor_size.argtypes = [ctypes.c_char_p]
    lib.nvfp4_descriptor_offset.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    return lib


def test_every_entry_point_parses_to_a_ctypes_signature():
    names = [boundary.parse(p)[1] for p in boundary.ENTRY_POINTS]
    assert len(set(names)) == len(names) and all(n.startswith("nvfp4_") for n in names)
    returns, name, types = boundary.parse(boundary.ENTRY_POINTS[1])
    assert (returns, name) == ("int", "nvfp4_plan_create") and types[0] == "const GroupDesc*" and types[-2:] == ["char*", "int"]
    assert boundary.ctype_of("const ExpertDesc*")._type_ is boundary.ExpertDesc
    assert boundary.ctype_of("const char*") is ctypes.c_char_p and boundary.ctype_of("const float*") is ctypes.c_void_p


@needs_gxx
def test_the_generated_c_side_lies_where_the_table_says(tmp_path):
    assert boundary.layout_differences(c_side(tmp_path, boundary.DESCRIPTORS)) == []


@needs_gxx
def test_a_field_moved_in_the_c_side_only_is_refused_naming_it(tmp_path):
    lib = c_side(tmp_path, swapped(boundary.DESCRIPTORS, "ExpertDesc", "alpha", "alpha_stride"))
    assert boundary.layout_differences(lib) == [
        "ExpertDesc.alpha lies at byte 120 in the library, at byte 112 here",
        "ExpertDesc.alpha_stride lies at byte 112 in the library, at byte 120 here",
    ]
    with pytest.raises(RuntimeError, match="built from other sources than nvfp4/boundary.py describes"):
        boundary.check_layout(lib)


@needs_gxx
def test_a_field_moved_in_the_python_side_only_is_refused_naming_it(tmp_path, monkeypatch):
    lib = c_side(tmp_path, boundary.DESCRIPTORS)
    moved = swapped(boundary.DESCRIPTORS, "GroupDesc", "sfa", "c")
    monkeypatch.setattr(boundary, "DESCRIPTORS", moved)
    monkeypatch.setattr(boundary, "STRUCTS", boundary.structs_of(moved))
    assert boundary.layout_differences(lib) == [
        "GroupDesc.sfa lies at byte 24 in the library, at byte 16 here",
        "GroupDesc.c lies at byte 16 in the library, at byte 24 here",
    ]


@needs_gxx
def test_a_field_only_one_side_has_is_refused(tmp_path):
    fewer = {**boundary.DESCRIPTORS, "QuantizeDesc": boundary.DESCRIPTORS["QuantizeDesc"][:-1]}
    assert boundary.layout_differences(c_side(tmp_path, fewer)) == [
        "QuantizeDesc is 112 bytes in the library, 120 here",
        "QuantizeDesc.experts is missing in the library, at byte 112 here",
    ]


@needs_gxx
def test_a_library_without_an_entry_point_of_the_table_is_refused_naming_it(tmp_path):
    """A build of other sources (one lacking entry points the table declares) is refused before
    anything is bound, naming what it lacks."""
    lib = c_side(tmp_path, boundary.DESCRIPTORS)  # the layout report alone
    with pytest.raises(RuntimeError, match="lacks entry points nvfp4/boundary.py declares .*: nvfp4_workspace_bytes, nvfp4_plan_create,"):
        boundary.bind(lib)
