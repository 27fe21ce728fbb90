"""The first-use self-check of a kernel never run on real hardware, and the fallbacks it picks."""

import os
import time

import pytest
import torch
from numpy_reference import assert_matches_exact

import nvfp4
from conftest import requires_cuda
from nvfp4.build import kernel_target
from nvfp4.dispatch import select_path
from nvfp4.kernel_path import TILES_CHOSEN
from nvfp4.layout import from_leaderboard, group_tensors, plain_scales
from nvfp4.portable import blocked_scales, dequantize, portable_kernel, scaled_mm_kernel
from nvfp4.self_check import SELF_CHECK_ENV, exact_products, first_mismatch, self_check_input, self_checked, trusted
from reference import generate_full_range_input, to_blocked


def test_blocked_scales_are_the_layout_scaled_mm_takes():
    data = generate_full_range_input((1, 130, 300), (128, 256, 136), (256, 512, 768), 3, seed=5, device="cpu")
    for (sfa, sfb), (sfa_plain, sfb_plain) in zip(data[2], data[1]):
        for reordered, plain in ((sfa, sfa_plain), (sfb, sfb_plain)):
            rows = plain.shape[0]
            blocked, expected = blocked_scales(reordered), to_blocked(plain[..., 0])
            # padding rows hold random values in the reordered tensor and zeros in to_blocked's: compare the real rows
            real = torch.zeros(blocked.numel(), dtype=torch.bool)
            for r in range(rows):
                for j in range(plain.shape[1]):
                    real[(r // 128 * (plain.shape[1] // 4) + j // 4) * 512 + (r % 32) * 16 + (r % 128) // 32 * 4 + j % 4] = True
            assert torch.equal(blocked.view(torch.uint8)[real], expected.view(torch.uint8)[real])


def test_the_self_check_problem_covers_what_it_claims():
    state = torch.random.get_rng_state()
    tensors, sizes = self_check_input(torch.device("cpu"))
    assert torch.equal(torch.random.get_rng_state(), state)  # the global random state is left alone
    ms = [m for m, _, _, _ in sizes]
    assert len(ms) >= 3 and any(m < 8 for m in ms) and any(m % 2 for m in ms) and any(m > 128 for m in ms)
    codes = set()
    groups = [group_tensors(tensors, g) for g in range(len(sizes))]
    for a, b, c, _, _ in groups:
        assert torch.isnan(c).all()  # poisoned: an unwritten element shows
        for t in (a, b):
            u = t.view(torch.uint8)
            codes |= set((u & 15).flatten().tolist()) | set((u >> 4).flatten().tolist())
    assert codes == set(range(16))
    scale_bytes = torch.cat([s.view(torch.uint8).flatten() for group in groups for s in group[3:]])
    assert scale_bytes.min() >= 1 and scale_bytes.max() == 0x7E  # positive, finite, up to 448
    portable_kernel(tensors, sizes)
    for _, _, out, _, _ in groups:
        assert torch.isfinite(out).all() and out.abs().max() < 65504 / 2 and (out != 0).float().mean() > 0.99


def test_a_mismatch_is_named_by_group_and_element():
    tensors, sizes = self_check_input(torch.device("cpu"))
    exact = exact_products(tensors, sizes)
    portable_kernel(tensors, sizes)
    right = tensors[2 : 3 * len(sizes) : 3]
    assert first_mismatch(right, exact) is None
    wrong = [o.clone() for o in right]
    wrong[1][3, 7, 0] *= 1.01
    assert first_mismatch(wrong, exact).startswith("group 1: 1 of 19712 elements off, the first at row 3, column 7:")
    wrong[0][0, 0, 0] = float("nan")
    assert first_mismatch(wrong, exact).startswith("group 0: 1 of 640 elements off, the first at row 0, column 0: nan")


def test_the_bounds_take_a_correct_fp32_accumulation_in_any_order():
    """Summing each 16-element K block first, as tensor cores do, is as correct as the portable
    path's order: both stay within the bounds, where the harness's tolerance alone is too tight."""
    tensors, sizes = self_check_input(torch.device("cpu"))
    exact = exact_products(tensors, sizes)
    blockwise = []
    for g, (m, n, k, _) in enumerate(sizes):
        a, b, _, sfa, sfb = group_tensors(tensors, g)
        lhs = dequantize(a, plain_scales(sfa, m, k)).view(m, k // 16, 16)
        rhs = dequantize(b, plain_scales(sfb, n, k)).view(n, k // 16, 16)
        partial = torch.einsum("mbj,nbj->mnb", lhs, rhs)  # fp32 per block
        total = torch.zeros(m, n)
        for block in range(k // 16):
            total += partial[..., block]
        blockwise.append(total.half().unsqueeze(-1))
    assert first_mismatch(blockwise, exact) is None


class WrongKernel:
    """A stand-in kernel path that computes the right thing except one element."""

    arch, emulated = 100, True
    tiles, tile_shapes = TILES_CHOSEN, (TILES_CHOSEN,)

    def __call__(self, tensors, sizes, operand_rank, alpha=None):
        portable_kernel(tensors, sizes, alpha)
        tensors[3 * 2 + 2][100, 5, 0] = -tensors[3 * 2 + 2][100, 5, 0]


class AlphaIgnoringKernel:
    """A stand-in kernel path that is right without alpha and leaves alpha out (an epilogue that
    never multiplies)."""

    arch, emulated = 100, True
    tiles, tile_shapes = TILES_CHOSEN, (TILES_CHOSEN,)

    def __call__(self, tensors, sizes, operand_rank, alpha=None):
        portable_kernel(tensors, sizes)


def test_a_wrong_result_falls_back_to_the_portable_path_with_one_warning(capfd):
    assert self_checked(WrongKernel(), torch.device("cpu")).path is portable_kernel
    err = capfd.readouterr().err
    assert (
        err.count("\n") == 1
        and "failed its first-use self-check" in err
        and "group 2: 1 of 17680 elements off, the first at row 100, column 5" in err
    )


def test_a_kernel_that_ignores_alpha_falls_back(capfd):
    """The check's second call (bf16 output, alpha per group) catches an epilogue that the fp16 call
    without alpha cannot."""
    assert self_checked(AlphaIgnoringKernel(), torch.device("cpu")).path is portable_kernel
    assert "bf16 output with alpha: group 0:" in capfd.readouterr().err


def test_a_kernel_that_raises_falls_back_too(capfd):
    def broken(tensors, sizes, operand_rank, alpha=None):
        raise RuntimeError("nvfp4 grouped gemm: launch failed: too many resources requested for launch")

    broken.arch, broken.emulated, broken.tiles, broken.tile_shapes = 100, True, TILES_CHOSEN, (TILES_CHOSEN,)
    assert self_checked(broken, torch.device("cpu")).path is portable_kernel
    assert "RuntimeError: nvfp4 grouped gemm: launch failed" in capfd.readouterr().err


@requires_cuda
@pytest.mark.skipif(
    not torch.cuda.is_available() or kernel_target(torch.cuda.get_device_capability()) is None,
    reason="needs a GPU with a CUDA kernel path (sm_90)",
)
def test_a_correct_kernel_passes_silently_and_fast(capfd):
    """The check itself, on this GPU's own kernel (the sm_90a one on an H200)."""
    device = torch.device("cuda", torch.cuda.current_device())
    path = select_path(device)
    self_checked(path, device)  # torch's own kernels warmed up, as the harness's first call would have
    start = time.perf_counter()
    assert self_checked(path, device) is path
    assert time.perf_counter() - start < 1.0
    assert capfd.readouterr().err == ""
    data = generate_full_range_input((5, 77), (128, 256), (256, 512), 2, seed=9)
    assert_matches_exact(nvfp4.custom_kernel(data), data)


def fake_fp4_scaled_mm(a, b, scale_a, scale_b, bias=None, out_dtype=None):
    """torch._scaled_mm's FP4 block-scaled contract, on the CPU: a [M, K/2] and b [K/2, N] packed
    E2M1 (b the transpose of an [N, K/2] tensor), each scale vector in the blocked layout of
    docs/PROBLEM.md section 3 (scale (r, j) at ((r // 128) * rest_k + j // 4) * 512 +
    (r % 32) * 16 + (r % 128) // 32 * 4 + j % 4), fp16 out."""
    from reference import decode_fp4

    assert a.dtype == b.dtype == torch.float4_e2m1fn_x2 and out_dtype == torch.float16 and bias is None
    assert a.stride(1) == 1 and b.stride(0) == 1  # K contiguous in both

    def scales(blocked, rows, cols):
        r, j = torch.arange(rows)[:, None], torch.arange(cols)[None, :]
        index = ((r // 128) * -(-cols // 4) + j // 4) * 512 + (r % 32) * 16 + (r % 128) // 32 * 4 + j % 4
        return blocked.view(torch.uint8)[index].view(torch.float8_e4m3fn).float().repeat_interleave(16, dim=1)

    lhs, rhs = decode_fp4(a), decode_fp4(b.T)
    k16 = lhs.shape[1] // 16
    return ((lhs * scales(scale_a, lhs.shape[0], k16)) @ (rhs * scales(scale_b, rhs.shape[0], k16)).T).half()


def test_the_scaled_mm_fallback_hands_its_operands_over_as_scaled_mm_takes_them(monkeypatch):
    monkeypatch.setattr(torch, "_scaled_mm", fake_fp4_scaled_mm)
    data = generate_full_range_input((5, 130, 0), (128, 136, 256), (256, 512, 256), 3, seed=12, device="cpu")
    for _, _, c in data[0]:
        c.fill_(float("nan"))
    scaled_mm_kernel(*from_leaderboard(data))
    assert_matches_exact([c for _, _, c in data[0]], data)


class CountingKernel:
    """A stand-in kernel path that is right, and counts its calls (a check makes two: fp16 without
    alpha, bf16 with alpha)."""

    arch, emulated = 100, True
    tiles, tile_shapes = TILES_CHOSEN, (TILES_CHOSEN,)

    def __init__(self):
        self.calls = 0

    def __call__(self, tensors, sizes, operand_rank, alpha=None):
        self.calls += 1
        portable_kernel(tensors, sizes, alpha)


def test_a_passing_check_is_recorded_and_checked_again_by_the_next_process(tmp_path):
    verdict = str(tmp_path / "lib.so.self_check")
    kernel = CountingKernel()
    assert self_checked(kernel, torch.device("cpu"), verdict) is kernel
    assert open(verdict).read() == "pass\n"
    assert self_checked(kernel, torch.device("cpu"), verdict) is kernel and kernel.calls == 4


def test_a_recorded_failure_spares_later_processes_the_kernel(tmp_path, capfd):
    verdict = str(tmp_path / "lib.so.self_check")
    assert self_checked(WrongKernel(), torch.device("cpu"), verdict).path is portable_kernel
    assert open(verdict).read().startswith("fail: group 2: 1 of 17680 elements off")
    capfd.readouterr()
    kernel = CountingKernel()
    assert self_checked(kernel, torch.device("cpu"), verdict).path is portable_kernel and kernel.calls == 0
    assert "an earlier process found group 2: 1 of 17680 elements off" in capfd.readouterr().err


def test_a_check_whose_process_died_counts_as_a_failure(tmp_path, capfd):
    """The leaderboard's compile step runs the check first: if the kernel kills that process (a
    fault poisons its CUDA context, a hang traps), the test and benchmark processes fall back."""
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    verdict = tmp_path / "lib.so.self_check"
    verdict.write_text(f"running {dead}\n")
    kernel = CountingKernel()
    assert self_checked(kernel, torch.device("cpu"), str(verdict)).path is portable_kernel and kernel.calls == 0
    assert f"an earlier check (process {dead}) never finished" in capfd.readouterr().err
    verdict.write_text(f"running {os.getpid()}\n")  # a check still running elsewhere: check here too
    assert self_checked(kernel, torch.device("cpu"), str(verdict)) is kernel and kernel.calls == 2


def test_an_unwritable_verdict_leaves_each_process_to_check_alone(tmp_path):
    kernel = CountingKernel()
    assert self_checked(kernel, torch.device("cpu"), str(tmp_path / "missing" / "lib.so.self_check")) is kernel


def test_the_verdict_lies_beside_the_build_and_the_check_can_be_switched_off(tmp_path, monkeypatch):
    kernel = CountingKernel()
    kernel.lib = type("Library", (), {"_name": str(tmp_path / "nvfp4_sm100a.so")})()
    monkeypatch.delenv(SELF_CHECK_ENV, raising=False)
    assert trusted(kernel, torch.device("cpu")) is kernel and kernel.calls == 2
    assert (tmp_path / "nvfp4_sm100a.so.self_check").read_text() == "pass\n"
    monkeypatch.setenv(SELF_CHECK_ENV, "0")
    assert trusted(kernel, torch.device("cpu")) is kernel and kernel.calls == 2


def test_a_fallback_computes_the_calls_of_its_device(capfd):
    """After a failed check, every call on the device goes to the fallback, through the package's
    entry point: exact, in every output; after dispatch.use_path's block, the device's own path again."""
    from nvfp4 import dispatch

    device = torch.device("cpu")
    with dispatch.use_path(device, self_checked(WrongKernel(), device)):
        assert "failed its first-use self-check" in capfd.readouterr().err
        assert nvfp4.path_in_use(device).startswith("portable PyTorch path, the fallback after the sm_100a kernel with tcgen05 emulated")
        data = generate_full_range_input((5, 130, 0), (128, 136, 256), (256, 512, 256), 3, seed=13, device="cpu")
        for _, _, c in data[0]:
            c.fill_(float("nan"))
        assert_matches_exact(nvfp4.custom_kernel(data), data)
        a = [x[..., 0] for x, _, _ in data[0]]
        b = [y[..., 0] for _, y, _ in data[0]]
        out = nvfp4.grouped_gemm(a, b, [s for s, _ in data[2]], [s for _, s in data[2]])
        assert_matches_exact([o.unsqueeze(-1) for o in out], data)
    assert "fallback" not in nvfp4.path_in_use(device)
