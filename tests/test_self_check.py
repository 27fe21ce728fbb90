"""The first-use self-check of a kernel never run on real hardware, and the fallbacks it picks."""
import time

import pytest
import torch

import submission
from numpy_reference import assert_matches_exact
from reference import generate_full_range_input, to_blocked

from conftest import requires_cuda


def test_blocked_scales_are_the_layout_scaled_mm_takes():
    data = generate_full_range_input((1, 130, 300), (128, 256, 136), (256, 512, 768), 3, seed=5, device="cpu")
    for (sfa, sfb), (sfa_plain, sfb_plain) in zip(data[2], data[1]):
        for reordered, plain in ((sfa, sfa_plain), (sfb, sfb_plain)):
            rows = plain.shape[0]
            blocked, expected = submission.blocked_scales(reordered), to_blocked(plain[..., 0])
            # padding rows hold random values in the reordered tensor and zeros in to_blocked's: compare the real rows
            real = torch.zeros(blocked.numel(), dtype=torch.bool)
            for r in range(rows):
                for j in range(plain.shape[1]):
                    real[(r // 128 * (plain.shape[1] // 4) + j // 4) * 512 + (r % 32) * 16 + (r % 128) // 32 * 4 + j % 4] = True
            assert torch.equal(blocked.view(torch.uint8)[real], expected.view(torch.uint8)[real])


def test_the_self_check_problem_covers_what_it_claims():
    state = torch.random.get_rng_state()
    data = submission.self_check_input(torch.device("cpu"))
    assert torch.equal(torch.random.get_rng_state(), state)  # the global random state is left alone
    ms = [m for m, _, _, _ in data[3]]
    assert len(ms) >= 3 and any(m < 8 for m in ms) and any(m % 2 for m in ms) and any(m > 128 for m in ms)
    codes = set()
    for a, b, c in data[0]:
        assert torch.isnan(c).all()  # poisoned: an unwritten element shows
        for t in (a, b):
            u = t.view(torch.uint8)
            codes |= set((u & 15).flatten().tolist()) | set((u >> 4).flatten().tolist())
    assert codes == set(range(16))
    scale_bytes = torch.cat([s.view(torch.uint8).flatten() for pair in data[2] for s in pair])
    assert scale_bytes.min() >= 1 and scale_bytes.max() == 0x7E  # positive, finite, up to 448
    for out in submission.portable_kernel(data):
        assert torch.isfinite(out).all() and out.abs().max() < 65504 / 2 and (out != 0).float().mean() > 0.99


def test_a_mismatch_is_named_by_group_and_element():
    data = submission.self_check_input(torch.device("cpu"))
    expected = submission.portable_kernel(data)
    assert submission.first_mismatch([o.clone() for o in expected], expected) is None
    wrong = [o.clone() for o in expected]
    wrong[1][3, 7, 0] *= 1.01
    assert submission.first_mismatch(wrong, expected).startswith("group 1: 1 of 19712 elements off, the first at row 3, column 7:")
    wrong[0][0, 0, 0] = float("nan")
    assert submission.first_mismatch(wrong, expected).startswith("group 0: 1 of 640 elements off, the first at row 0, column 0: nan")


class WrongKernel:
    """A stand-in kernel path that computes the right thing except one element."""
    arch, emulated = 100, True

    def __call__(self, data):
        out = submission.portable_kernel(data)
        out[2][100, 5, 0] = -out[2][100, 5, 0]
        return out


def test_a_wrong_result_falls_back_to_the_portable_path_with_one_warning(capfd):
    assert submission.self_checked(WrongKernel(), torch.device("cpu")) is submission.portable_kernel
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "failed its first-use self-check" in err and "group 2: 1 of 17680 elements off, the first at row 100, column 5" in err


def test_a_kernel_that_raises_falls_back_too(capfd):
    def broken(data):
        raise RuntimeError("nvfp4 grouped gemm: launch failed: too many resources requested for launch")
    broken.arch, broken.emulated = 100, True
    assert submission.self_checked(broken, torch.device("cpu")) is submission.portable_kernel
    assert "RuntimeError: nvfp4 grouped gemm: launch failed" in capfd.readouterr().err


@requires_cuda
@pytest.mark.skipif(not torch.cuda.is_available() or submission.kernel_target(torch.cuda.get_device_capability()) is None,
                    reason="needs a GPU with a CUDA kernel path")
def test_a_correct_kernel_passes_silently_and_fast(capfd):
    """The check itself, on this GPU's own kernel (the sm_90a one on an H200)."""
    device = torch.device("cuda", torch.cuda.current_device())
    path = submission.select_path(device)
    submission.self_checked(path, device)  # torch's own kernels warmed up, as the harness's first call would have
    start = time.perf_counter()
    assert submission.self_checked(path, device) is path
    assert time.perf_counter() - start < 1.0
    assert capfd.readouterr().err == ""
    data = generate_full_range_input((5, 77), (128, 256), (256, 512), 2, seed=9)
    assert_matches_exact(submission.custom_kernel(data), data)
