"""custom_kernel, the package's and submission.py's, on the device at hand: validation, and exactness
on official and full-range data."""

import pytest
import torch
from numpy_reference import assert_matches_exact, group_product

import nvfp4
import submission
from harness.runners import clone_data
from nvfp4.kernel_path import kernel_takes, kernel_unsupported
from nvfp4.layout import from_leaderboard
from nvfp4.portable import portable_kernel
from nvfp4.validate import validate
from reference import generate_full_range_input, generate_input

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

CASES = [
    ((96, 128), (128, 256), (256, 512)),  # official-like
    ((1, 7, 40), (128, 256, 384), (256, 512, 768)),  # M = 1, M not a multiple of 8
    ((0, 16), (128, 128), (256, 256)),  # an empty group
]


def poisoned(data):
    """A copy of data whose outputs hold NaN, so unwritten elements show."""
    data = clone_data(data)
    for _, _, c in data[0]:
        c.fill_(float("nan"))
    return data


ENTRIES = pytest.mark.parametrize("entry", [nvfp4.custom_kernel, submission.custom_kernel], ids=["package", "submission.py"])


@ENTRIES
@pytest.mark.parametrize("make", [generate_input, generate_full_range_input])
@pytest.mark.parametrize("m,n,k", CASES)
def test_custom_kernel_matches_the_reference_and_writes_every_element(entry, make, m, n, k):
    data = make(m, n, k, len(m), seed=sum(m) + 17, device=DEVICE)
    assert_matches_exact(entry(poisoned(data)), data)


@ENTRIES
def test_custom_kernel_writes_into_the_given_c_and_returns_it(entry):
    data = generate_input((16,), (128,), (256,), 1, seed=1, device=DEVICE)
    c = data[0][0][2]
    assert entry(data)[0] is c


def test_portable_path_is_exact_against_float64():
    data = poisoned(generate_full_range_input((33,), (256,), (1024,), 1, seed=4, device=DEVICE))
    (a, b, c), (sfa, sfb) = data[0][0], data[1][0]
    expected = torch.from_numpy(group_product(a, b, sfa, sfb)).to(torch.float16).float()
    portable_kernel(*from_leaderboard(data))
    torch.testing.assert_close(c[:, :, 0].float().cpu(), expected, rtol=1e-3, atol=1e-3)


def broken(data, group, what):
    data = clone_data(data)
    abc, sfs, sfr, sizes = data
    a, b, c = abc[group]
    if what == "dtype":
        abc[group] = (a, b, c.float())
    elif what == "shape":
        abc[group] = (a[:-1], b, c)
    elif what == "size":
        sizes[group] = (sizes[group][0], sizes[group][1], 100, 1)
    elif what == "scales":
        sfr[group] = (sfr[group][0][:, :, :, :, :1], sfr[group][1])
    elif what == "L":
        sizes[group] = sizes[group][:3] + (2,)
    return data


@pytest.mark.parametrize(
    "what,message",
    [
        ("dtype", "c has dtype torch.float32"),
        ("shape", "a has shape"),
        ("size", "K must be a positive multiple of 64"),
        ("scales", "sfa has shape"),
        ("L", "L must be 1"),
    ],
)
@ENTRIES
def test_bad_input_raises_a_clear_error_naming_the_group(entry, what, message):
    data = generate_input((64, 64), (128, 128), (256, 256), 2, seed=2, device=DEVICE)
    with pytest.raises(ValueError, match=f"group 1: {message}"):
        entry(broken(data, 1, what))


def test_mismatched_group_counts_are_rejected():
    data = generate_input((64, 64), (128, 128), (256, 256), 2, seed=2, device=DEVICE)
    data[3].pop()
    with pytest.raises(ValueError, match="one entry per group"):
        nvfp4.custom_kernel(data)


def layout_variants(data):
    """(name, input, whether the bulk check must accept it, None for either): the input, layouts the
    full checks also accept, and inputs each of which the full checks refuse for one reason. Group 0
    must have more than 128 rows, group 1 a single row block, group 2 no rows."""

    def changed(edit):
        d = clone_data(data)
        edit(*d)
        return d

    def group0(abc, sfr, i, make, group=0):  # tensor i of a, b, c, sfa, sfb replaced by make(it)
        held, j = (abc, i) if i < 3 else (sfr, i - 3)
        parts = list(held[group])
        parts[j] = make(parts[j])
        held[group] = tuple(parts)

    def odd_unit_stride(t):  # the row-block dimension (size 1 here) with a stride no layout would give it
        return t.as_strided(t.shape, t.stride()[:2] + (7,) + t.stride()[3:])

    def misaligned(t):  # the same shape and strides, one element further into a larger buffer
        e = t.element_size()
        raw = torch.zeros(t.numel() * e + 16, dtype=torch.uint8)[e : e + t.numel() * e]
        return raw.view(t.dtype).view(t.shape)

    def transposed(t):  # a (rows, cols, 1) view of a (cols, rows, 1) tensor: not contiguous
        return t.new_empty((t.shape[1], t.shape[0], 1)).transpose(0, 1)

    variants = [
        ("as generated", data, True),
        (
            "A and B as uint8",
            changed(lambda abc, sfs, sfr, sizes: [group0(abc, sfr, i, lambda t: t.view(torch.uint8)) for i in (0, 1)]),
            True,
        ),
        ("sfa's size-1 dimension with another stride", changed(lambda abc, sfs, sfr, sizes: group0(abc, sfr, 3, odd_unit_stride, 1)), None),
        (
            "the empty group's sfa in another layout",
            changed(lambda abc, sfs, sfr, sizes: group0(abc, sfr, 3, lambda t: t.clone(memory_format=torch.contiguous_format), 2)),
            True,
        ),
        (
            "the empty group's a and c misaligned",
            changed(lambda abc, sfs, sfr, sizes: [group0(abc, sfr, i, misaligned, 2) for i in (0, 2)]),
            True,
        ),
    ]
    refused = {
        "c in float32": lambda abc, sfs, sfr, sizes: group0(abc, sfr, 2, lambda t: t.float()),
        "a shorter": lambda abc, sfs, sfr, sizes: group0(abc, sfr, 0, lambda t: t[:-1]),
        "sfb in uint8": lambda abc, sfs, sfr, sizes: group0(abc, sfr, 4, lambda t: t.view(torch.uint8)),
        "K not a multiple of 64": lambda abc, sfs, sfr, sizes: sizes.__setitem__(0, (sizes[0][0], sizes[0][1], 96, 1)),
        "L = 2": lambda abc, sfs, sfr, sizes: sizes.__setitem__(0, sizes[0][:3] + (2,)),
        "N not a multiple of 8": lambda abc, sfs, sfr, sizes: sizes.__setitem__(0, (sizes[0][0], 12, sizes[0][2], 1)),
        "b misaligned": lambda abc, sfs, sfr, sizes: group0(abc, sfr, 1, misaligned),
        "c not contiguous": lambda abc, sfs, sfr, sizes: group0(abc, sfr, 2, transposed),
        "sfa with another layout": lambda abc, sfs, sfr, sizes: group0(
            abc, sfr, 3, lambda t: t.clone(memory_format=torch.contiguous_format)
        ),
        "a group of four tensors": lambda abc, sfs, sfr, sizes: abc.__setitem__(0, abc[0] + (abc[0][2],)),
        "one group too many": lambda abc, sfs, sfr, sizes: abc.append(abc[0]),
        "no groups": lambda abc, sfs, sfr, sizes: [x.clear() for x in (abc, sfs, sfr, sizes)],
    }
    variants += [(name, changed(edit), False) for name, edit in refused.items()]
    return variants


def test_the_bulk_input_check_takes_only_what_the_full_checks_take():
    """kernel_takes spares a first sight the per-attribute checks; it must never accept an input that
    validate() or kernel_unsupported() refuses, and it must accept the official layout."""
    data = generate_full_range_input((130, 1, 0), (256, 128, 384), (256, 512, 128), 3, seed=5, device="cpu")
    for name, d, must_take in layout_variants(data):
        tensors, sizes = from_leaderboard(d)
        try:
            validate(tensors, sizes, 3)
            full = kernel_unsupported(tensors, sizes, 64, -1) is None
        except (ValueError, TypeError):
            full = False
        takes = kernel_takes(tensors, tuple(sizes), [t.data_ptr() for t in tensors], 64, -1, 3)
        assert full == (must_take is not False), name  # the variant is what its name says
        assert full or not takes, name
        assert takes == must_take or must_take is None, name
        assert not kernel_takes(tensors, tuple(sizes), [t.data_ptr() for t in tensors], 64, 0, 3), name


def test_running_the_file_without_a_gpu_says_so_and_exits_0():
    """The leaderboard's compile step is `python3 submission.py`."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, "submission.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "no CUDA GPU here, nothing to build" in proc.stdout


def test_groups_beyond_the_kernels_tile_fields_go_to_the_portable_path():
    """The C++ plan refuses more than 512 row blocks of 128; Python sends such a group elsewhere first."""
    data = generate_input((65600,), (128,), (256,), 1, seed=3, device="cpu")
    tensors, sizes = from_leaderboard(data)
    assert "M up to 65536" in kernel_unsupported(tensors, sizes, 64, -1)  # CPU tensors: device index -1
    assert not kernel_takes(tensors, tuple(sizes), [t.data_ptr() for t in tensors], 64, -1, 3)
