"""Two-level NVFP4, as real checkpoints scale: alpha in every GEMM form's fp32 epilogue (one value per
group or expert, or per expert and column), fp16 or bf16 output, and quantization with a global scale
bit for bit against an independent implementation of the recipe. On the CPU (the portable path) and,
where there is one, on the GPU's kernel: on a side queue held busy and across graph replays with
alpha and data rewritten between them."""

import numpy as np
import pytest
import torch
from test_moe import DEVICE, HAS_KERNEL, kernel, moe_operands, offset_form, use_emulated_sm100  # noqa: F401 (kernel: a fixture)
from two_level_reference import awkward_activations, quantize_two_level

import nvfp4
from conftest import requires_cuda
from nvfp4.quantize import quantize_portable

needs_kernel = pytest.mark.skipif(not HAS_KERNEL, reason="needs a GPU with a CUDA kernel path (sm_90)")
OUT_DTYPES = [torch.float16, torch.bfloat16]
ROUNDING = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}  # at most half an ulp, relative to the value


def decoded(packed: torch.Tensor, blocked: torch.Tensor) -> torch.Tensor:
    """FP4 [rows, K/2] with blocked scales -> float64 [rows, K], exactly."""
    from nvfp4.portable import dequantize

    rows = packed.shape[0]
    plain = nvfp4.plain_from_blocked(blocked.view(torch.uint8), rows).view(torch.float8_e4m3fn).float()
    return dequantize(packed.view(torch.uint8).cpu(), plain.cpu()).double()


def assert_scaled_exact(got: torch.Tensor, lhs: torch.Tensor, rhs: torch.Tensor, alpha: torch.Tensor, what: str) -> None:
    """got [rows, N] against alpha * lhs @ rhs^T in float64 (alpha [] or [N]): within the rounding of
    got's dtype and what fp32 accumulation may add where terms cancel."""
    value = (lhs @ rhs.T) * alpha.double().cpu()
    accumulation = 2 * (lhs.shape[1] / 16) * 2.0**-23 * (lhs.abs() @ rhs.abs().T) * alpha.double().cpu().abs()
    bound = ROUNDING[got.dtype] * value.abs() + accumulation + 2.0**-25  # fp16 subnormals: half an ulp at most 2^-25
    error = (got.double().cpu() - value).abs()
    bad = ~(error <= bound)
    assert not bad.any(), f"{what}: {int(bad.sum())} of {bad.numel()} off, e.g. {got[bad][0].item()} for {value[bad.cpu()][0].item():.6g}"


def big_operands(experts: int, max_m: int, n: int, k: int, seed: int):
    """moe_operands with B's scales over every positive E4M3 code too: raw sums far past 65504."""
    a, sfa, b, sfb, counts = moe_operands(experts, max_m, n, k, seed)
    g = torch.Generator().manual_seed(seed + 1)
    sfb.view(torch.uint8).copy_(torch.randint(0x60, 0x7F, sfb.shape, generator=g, dtype=torch.uint8))
    return a, sfa, b, sfb, counts


def alpha_for(experts: int, n: int, per_column: bool, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    shape = (experts, n) if per_column else (experts,)
    return (torch.exp2(torch.rand(shape, generator=g) * 6 - 24) * (1 + torch.rand(shape, generator=g))).to(DEVICE)


@pytest.fixture(params=["this device's path", "emulated sm_100a"])
def path(request):
    """The path of the device the tests run on (portable on the CPU, the GPU's kernel), and on an sm_90
    GPU with nvcc also the sm_100a kernel under the tcgen05 emulation."""
    if request.param != "emulated sm_100a":
        yield request.param
        return
    with use_emulated_sm100():
        yield request.param


# ----------------------------------------------------------------------------- the GEMM forms
@pytest.mark.parametrize("out_dtype", OUT_DTYPES, ids=["fp16", "bf16"])
def test_list_form_applies_alpha_to_sums_past_fp16s_range(out_dtype, path):
    a, sfa, b, sfb, _ = big_operands(3, 40, 64, 512, seed=1)
    m = [40, 7, 33]
    lhs = [a[g, : m[g]] for g in range(3)]
    alpha = alpha_for(3, 64, False, seed=2)
    raw = (decoded(lhs[0], sfa[0]) @ decoded(b[0], sfb[0]).T).abs().max()
    assert raw > 1e6, "the test's raw sums must pass fp16's 65504 by far"
    out = nvfp4.grouped_gemm(
        [x.view(torch.uint8) for x in lhs],
        list(b.view(torch.uint8)),
        [nvfp4.reordered_from_blocked(sfa[g], m[g]) for g in range(3)],
        [nvfp4.reordered_from_blocked(sfb[g], 64) for g in range(3)],
        alpha=alpha,
        out_dtype=out_dtype,
    )
    for g in range(3):
        assert out[g].dtype == out_dtype
        assert_scaled_exact(out[g], decoded(lhs[g], sfa[g]), decoded(b[g], sfb[g]), alpha[g], f"group {g}")


@pytest.mark.parametrize("per_column", [False, True], ids=["per expert", "per column"])
@pytest.mark.parametrize("out_dtype", OUT_DTYPES, ids=["fp16", "bf16"])
def test_moe_forms_apply_alpha_per_expert_or_column(out_dtype, per_column, path):
    experts, max_m, n, k = 5, 70, 128, 256
    a, sfa, b, sfb, counts = big_operands(experts, max_m, n, k, seed=3)
    alpha = alpha_for(experts, n, per_column, seed=4)
    out = nvfp4.grouped_gemm_masked(a, sfa, b, sfb, counts, alpha=alpha, out_dtype=out_dtype)
    a_off, sfa_off, offsets, sf_offsets, _ = offset_form(a, sfa, counts)
    out_off = nvfp4.grouped_gemm_offsets(a_off, sfa_off, b, sfb, offsets, sf_offsets, alpha=alpha, out_dtype=out_dtype)
    first = offsets.tolist()
    for e, m in enumerate(counts.tolist()):
        if m:
            lhs, rhs = decoded(a[e, :m], sfa[e]), decoded(b[e], sfb[e])
            assert_scaled_exact(out[e, :m], lhs, rhs, alpha[e], f"masked, expert {e}")
            assert_scaled_exact(out_off[first[e] : first[e + 1]], lhs, rhs, alpha[e], f"offsets, expert {e}")


def test_without_alpha_the_output_is_what_alpha_one_gives_bit_for_bit():
    a, sfa, b, sfb, counts = moe_operands(4, 50, 64, 256, seed=5)
    plain = nvfp4.grouped_gemm_masked(a, sfa, b, sfb, counts)
    ones = nvfp4.grouped_gemm_masked(a, sfa, b, sfb, counts, alpha=torch.ones(4, device=DEVICE))
    rows = torch.arange(50, device=DEVICE)[None, :] < counts[:, None]
    assert plain.dtype == torch.float16 and torch.equal(plain[rows], ones[rows])


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda o: nvfp4.grouped_gemm_masked(*o[:5], alpha=torch.ones(3, device=DEVICE)), r"alpha must be float32 \[E\]"),
        (lambda o: nvfp4.grouped_gemm_masked(*o[:5], alpha=torch.ones(4, device=DEVICE, dtype=torch.float64)), "alpha must be float32"),
        (lambda o: nvfp4.grouped_gemm_masked(*o[:5], alpha=torch.ones(4).numpy()), "alpha must be float32 .* got a ndarray, not a tensor"),
        (
            lambda o: nvfp4.grouped_gemm_masked(*o[:5], alpha=torch.ones(64, 4, device=DEVICE).t()),
            "alpha must be contiguous and on .* not contiguous",
        ),
        (lambda o: nvfp4.grouped_gemm_masked(*o[:5], out_dtype=torch.float32), "out_dtype must be torch.float16 or torch.bfloat16"),
        (
            lambda o: nvfp4.grouped_gemm_masked(
                *o[:5], out=torch.empty(4, 8, 64, dtype=torch.float16, device=DEVICE), out_dtype=torch.bfloat16
            ),
            "out_dtype=torch.bfloat16 but out holds",
        ),
        (
            lambda o: nvfp4.grouped_gemm(
                [o[0][0]],
                [o[2][0]],
                [nvfp4.reordered_from_blocked(o[1][0], 8)],
                [nvfp4.reordered_from_blocked(o[3][0], 64)],
                alpha=torch.ones(2, device=DEVICE),
            ),
            r"alpha must be a float32 tensor \[groups\] = \[1\]",
        ),
    ],
)
def test_bad_alpha_or_output_dtype_raises_a_clear_error(call, message):
    operands = moe_operands(4, 8, 64, 256, seed=6)
    with pytest.raises(ValueError, match=message):
        call(operands)


# ----------------------------------------------------------------------------- quantize with a global scale
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_two_level_quantize_matches_the_independent_recipe_bit_for_bit(dtype):
    x, scale = awkward_activations(300, 256, dtype, seed=7)
    q, sf = torch.empty(300, 128, dtype=torch.uint8), torch.empty(3, 4, 32, 4, 4, dtype=torch.uint8)
    quantize_portable(x, None, q, sf, torch.from_numpy(scale))
    codes, scales = quantize_two_level(x, scale)
    np.testing.assert_array_equal(q.numpy(), codes)
    np.testing.assert_array_equal(nvfp4.plain_from_blocked(sf, 300).numpy(), scales)


def test_a_global_scale_of_one_gives_the_one_level_recipe():
    x, _ = awkward_activations(130, 128, torch.bfloat16, seed=8)
    one_level, two_level = nvfp4.quantize(x), nvfp4.quantize(x, global_scale=torch.ones(()))
    for got, expected in zip(two_level, one_level):
        assert torch.equal(got.view(torch.uint8), expected.view(torch.uint8))


def test_global_scale_per_batch_entry_per_row_or_one():
    x, scale = awkward_activations(3 * 64, 128, torch.float16, seed=9)
    x3 = x.reshape(3, 64, 128)
    per_entry = torch.from_numpy(scale[:3])
    q, sf = nvfp4.quantize(x3, global_scale=per_entry)
    q_rows, sf_rows = nvfp4.quantize(x3, global_scale=per_entry[:, None].expand(3, 64).contiguous())
    assert torch.equal(q.view(torch.uint8), q_rows.view(torch.uint8)) and torch.equal(sf.view(torch.uint8), sf_rows.view(torch.uint8))
    codes, _ = quantize_two_level(x, np.repeat(scale[:3], 64))
    np.testing.assert_array_equal(q.view(torch.uint8).reshape(-1, 64).numpy(), codes)
    with pytest.raises(ValueError, match="global_scale must be float32"):
        nvfp4.quantize(x3, global_scale=torch.ones(5))


# ----------------------------------------------------------------------------- on a GPU
@requires_cuda
@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_two_level_quantize_kernel_matches_the_independent_recipe_bit_for_bit(dtype, kernel):
    x, scale = awkward_activations(650, 512, dtype, seed=10)
    q, sf = nvfp4.quantize(x.to(DEVICE), global_scale=torch.from_numpy(scale).to(DEVICE))
    codes, scales = quantize_two_level(x, scale)
    np.testing.assert_array_equal(q.view(torch.uint8).cpu().numpy(), codes)
    np.testing.assert_array_equal(nvfp4.plain_from_blocked(sf.view(torch.uint8), 650).cpu().numpy(), scales)
    counts = torch.tensor([300, 0], dtype=torch.int32, device=DEVICE)  # masked, one scale per expert
    per_expert = torch.from_numpy(scale[:2]).to(DEVICE)
    q_m, _ = nvfp4.quantize(x[:600].to(DEVICE).reshape(2, 300, 512), counts, per_expert)
    codes_m, _ = quantize_two_level(x[:300], np.repeat(scale[:1], 300))
    np.testing.assert_array_equal(q_m[0].view(torch.uint8).cpu().numpy(), codes_m)


@requires_cuda
@needs_kernel
def test_alpha_is_read_on_the_callers_queue_and_at_each_graph_replay(kernel):
    """alpha, data and outputs rewritten on a side queue behind ~30 ms of GPU work, then the masked
    form under that queue: exact (a launch elsewhere would read the old alpha). Then one graph of both
    MoE forms and the list form, replayed three times with new alpha and data written between. On the
    device's kernel and on the sm_100a kernel under the tcgen05 emulation."""
    experts, max_m, n, k = (8, 100, 256, 512) if kernel == "native" else (4, 60, 256, 256)
    a, sfa, b, sfb, counts = big_operands(experts, max_m, n, k, seed=11)
    alpha = alpha_for(experts, n, False, seed=12)
    out = nvfp4.grouped_gemm_masked(a, sfa, b, sfb, counts, alpha=alpha, out_dtype=torch.bfloat16)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(1 << 26)
        alpha.mul_(3.0)
        out.fill_(float("nan"))
        nvfp4.grouped_gemm_masked(a, sfa, b, sfb, counts, out=out, alpha=alpha)
    side.synchronize()
    check_masked(out, a, sfa, b, sfb, counts, alpha)

    a_off, sfa_off, offsets, sf_offsets, _ = offset_form(a, sfa, counts)
    list_alpha = alpha[:2].clone()
    lists = (
        [a[e, :40].contiguous() for e in range(2)],
        [b[e] for e in range(2)],
        [nvfp4.reordered_from_blocked(sfa[e], 40) for e in range(2)],
        [nvfp4.reordered_from_blocked(sfb[e], n) for e in range(2)],
    )
    out_list = [torch.empty(40, n, dtype=torch.float16, device=DEVICE) for _ in range(2)]
    out_off = torch.empty(a_off.shape[0], n, dtype=torch.bfloat16, device=DEVICE)
    nvfp4.grouped_gemm(*lists, out=out_list, alpha=list_alpha)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        nvfp4.grouped_gemm_masked(a, sfa, b, sfb, counts, out=out, alpha=alpha)
        nvfp4.grouped_gemm_offsets(a_off, sfa_off, b, sfb, offsets, sf_offsets, out=out_off, alpha=alpha)
        nvfp4.grouped_gemm(*lists, out=out_list, alpha=list_alpha)
    for replay in range(3):
        alpha.copy_(alpha_for(experts, n, False, seed=20 + replay))
        list_alpha.copy_(alpha[:2] * 0.5)
        fresh = big_operands(experts, max_m, n, k, seed=30 + replay)
        for t, u in zip((a, sfa, b, sfb), fresh[:4]):
            t.copy_(u)
        for e in range(2):
            lists[0][e].copy_(a[e, :40])
        for t in (out, out_off, *out_list):
            t.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        check_masked(out, a, sfa, b, sfb, counts, alpha)
        first = offsets.tolist()
        for e, m in enumerate(counts.tolist()):
            if m:
                assert_scaled_exact(
                    out_off[first[e] : first[e + 1]],
                    decoded(a_off[first[e] : first[e + 1]], sfa_off[sf_offsets[e] // 128 :]),
                    decoded(b[e], sfb[e]),
                    alpha[e],
                    f"replay {replay}, offsets, expert {e}",
                )
        for e in range(2):
            assert_scaled_exact(out_list[e], decoded(a[e, :40], sfa[e]), decoded(b[e], sfb[e]), list_alpha[e], f"replay {replay}, list {e}")


def check_masked(out, a, sfa, b, sfb, counts, alpha):
    for e, m in enumerate(counts.tolist()):
        if m:
            assert_scaled_exact(out[e, :m], decoded(a[e, :m], sfa[e]), decoded(b[e], sfb[e]), alpha[e], f"masked, expert {e}")
