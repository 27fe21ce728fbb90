"""submission.py on the device at hand: validation, and exactness on official and full-range data."""
import pytest
import torch

import submission
from numpy_reference import assert_matches_exact, group_product
from reference import generate_full_range_input, generate_input
from runners import clone_data

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

CASES = [
    ((96, 128), (128, 256), (256, 512)),        # official-like
    ((1, 7, 40), (128, 256, 384), (256, 512, 768)),  # M = 1, M not a multiple of 8
    ((0, 16), (128, 128), (256, 256)),           # an empty group
]


def poisoned(data):
    """A copy of data whose outputs hold NaN, so unwritten elements show."""
    data = clone_data(data)
    for _, _, c in data[0]:
        c.fill_(float("nan"))
    return data


@pytest.mark.parametrize("make", [generate_input, generate_full_range_input])
@pytest.mark.parametrize("m,n,k", CASES)
def test_custom_kernel_matches_the_reference_and_writes_every_element(make, m, n, k):
    data = make(m, n, k, len(m), seed=sum(m) + 17, device=DEVICE)
    assert_matches_exact(submission.custom_kernel(poisoned(data)), data)


def test_custom_kernel_writes_into_the_given_c_and_returns_it():
    data = generate_input((16,), (128,), (256,), 1, seed=1, device=DEVICE)
    c = data[0][0][2]
    assert submission.custom_kernel(data)[0] is c


def test_portable_path_is_exact_against_float64():
    data = generate_full_range_input((33,), (256,), (1024,), 1, seed=4, device=DEVICE)
    (a, b, _), (sfa, sfb) = data[0][0], data[1][0]
    expected = torch.from_numpy(group_product(a, b, sfa, sfb)).to(torch.float16).float()
    got = submission.portable_kernel(poisoned(data))[0][:, :, 0].float().cpu()
    torch.testing.assert_close(got, expected, rtol=1e-3, atol=1e-3)


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


@pytest.mark.parametrize("what,message", [
    ("dtype", "c has dtype torch.float32"),
    ("shape", "a has shape"),
    ("size", "K must be a positive multiple of 64"),
    ("scales", "sfa_reordered has shape"),
    ("L", "L must be 1"),
])
def test_bad_input_raises_a_clear_error_naming_the_group(what, message):
    data = generate_input((64, 64), (128, 128), (256, 256), 2, seed=2, device=DEVICE)
    with pytest.raises(ValueError, match=f"group 1: {message}"):
        submission.custom_kernel(broken(data, 1, what))


def test_mismatched_group_counts_are_rejected():
    data = generate_input((64, 64), (128, 128), (256, 256), 2, seed=2, device=DEVICE)
    data[3].pop()
    with pytest.raises(ValueError, match="one entry per group"):
        submission.custom_kernel(data)
