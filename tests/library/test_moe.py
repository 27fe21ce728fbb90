"""The MoE forms (nvfp4.grouped_gemm_masked, nvfp4.grouped_gemm_offsets) and nvfp4.quantize: exact
against float64 on full-range data, rows past each expert's count left alone, the counts read on the
GPU only (a captured graph replayed with new counts and new data), and quantization bit for bit the
portable recipe."""

import warnings

import pytest
import torch

import nvfp4
from conftest import ROOT, requires_cuda
from nvfp4.build import kernel_target
from nvfp4.moe import MAX_EXPERTS
from nvfp4.quantize import quantize_portable
from nvfp4.self_check import exact_products, first_mismatch

HAS_KERNEL = torch.cuda.is_available() and kernel_target(torch.cuda.get_device_capability()) is not None
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
needs_kernel = pytest.mark.skipif(not HAS_KERNEL, reason="needs a GPU with a CUDA kernel path (sm_90)")


def counts_of(experts: int, max_m: int, generator: torch.Generator) -> torch.Tensor:
    """Rows per expert: about 40% empty, one full, the rest anywhere in 1..max_m."""
    counts = torch.randint(1, max_m + 1, (experts,), generator=generator, dtype=torch.int32)
    counts[torch.rand(experts, generator=generator) < 0.4] = 0
    counts[int(torch.randint(experts, (1,), generator=generator))] = max_m
    return counts


def moe_operands(experts: int, max_m: int, n: int, k: int, seed: int, device=DEVICE):
    """a [E, max_m, K/2], sfa, b [E, N, K/2], sfb (blocked) of full-range data: every FP4 code, A's
    scales over all positive E4M3 codes (subnormals to 448), B's up to 0.125 (no output near the fp16
    limit), random bytes in the scale padding; and the counts."""
    g = torch.Generator().manual_seed(seed)
    blocks = lambda rows: (-(-rows // 128), k // 64, 32, 4, 4)
    a = torch.randint(256, (experts, max_m, k // 2), generator=g, dtype=torch.uint8)
    b = torch.randint(256, (experts, n, k // 2), generator=g, dtype=torch.uint8)
    sfa = torch.randint(1, 0x7F, (experts, *blocks(max_m)), generator=g, dtype=torch.uint8)
    sfb = torch.randint(1, 0x21, (experts, *blocks(n)), generator=g, dtype=torch.uint8)
    counts = counts_of(experts, max_m, g)
    return (
        a.to(device).view(torch.float4_e2m1fn_x2),
        sfa.to(device).view(torch.float8_e4m3fn),
        b.to(device).view(torch.float4_e2m1fn_x2),
        sfb.to(device).view(torch.float8_e4m3fn),
        counts.to(device),
    )


def expert_mismatch(rows_of, a_rows, sfa_rows, b, sfb, counts) -> str | None:
    """The experts' outputs (rows_of(e) of out) against their float64 products; None when all match."""
    for e, m in enumerate(counts.tolist()):
        if not m:
            continue
        n, k = b.shape[1], 2 * b.shape[2]
        tensors = [a_rows(e), b[e], None, nvfp4.reordered_from_blocked(sfa_rows(e), m), nvfp4.reordered_from_blocked(sfb[e], n)]
        failure = first_mismatch([rows_of(e).unsqueeze(-1)], exact_products(tensors, [(m, n, k, 1)]))
        if failure:
            return f"expert {e} ({m} rows): {failure}"
    return None


def assert_masked_exact(out, a, sfa, b, sfb, counts):
    failure = expert_mismatch(lambda e: out[e, : counts[e]], lambda e: a[e, : counts[e]], lambda e: sfa[e], b, sfb, counts)
    assert failure is None, failure
    unwritten = torch.arange(a.shape[1], device=out.device)[None, :] >= counts[:, None]
    assert out[unwritten].isnan().all(), "rows at or past masked_m were written"


def offset_form(a, sfa, counts):
    """The same experts' rows one after another: (a [total_m, K/2], sfa, expert_offsets, sf_offsets)."""
    offsets, sf_offsets = nvfp4.offset_layout(counts)
    max_m, k = a.shape[1], 2 * a.shape[2]
    rows = [a[e, :m] for e, m in enumerate(counts.tolist())]
    plain = [nvfp4.plain_from_blocked(sfa[e].view(torch.uint8), max_m)[:m] for e, m in enumerate(counts.tolist())]
    sf_rows = nvfp4.sf_rows_capacity(int(counts.sum()), len(counts))
    sfa_off = nvfp4.offset_scales(torch.cat(plain).view(torch.float8_e4m3fn), offsets, sf_offsets, sf_rows)
    return torch.cat(rows), sfa_off, offsets, sf_offsets, k


def assert_offsets_exact(out, a_off, sfa_off, b, sfb, offsets, sf_offsets, counts):
    first = offsets.tolist()
    sf_first = sf_offsets.tolist()
    failure = expert_mismatch(
        lambda e: out[first[e] : first[e + 1]],
        lambda e: a_off[first[e] : first[e + 1]],
        lambda e: sfa_off[sf_first[e] // 128 :],
        b,
        sfb,
        counts,
    )
    assert failure is None, failure


def poisoned(*shape, device=DEVICE):
    return torch.full(shape, float("nan"), dtype=torch.float16, device=device)


# ----------------------------------------------------------------------------- on any device
def test_masked_form_is_exact_and_leaves_rows_past_the_count():
    a, sfa, b, sfb, counts = moe_operands(5, 140, 64, 256, seed=1)
    out = poisoned(5, 140, 64)
    assert nvfp4.grouped_gemm_masked(a, sfa, b, sfb, counts, out=out) is out
    assert_masked_exact(out, a, sfa, b, sfb, counts)


def test_offset_form_is_exact():
    a, sfa, b, sfb, counts = moe_operands(4, 130, 64, 256, seed=2)
    a_off, sfa_off, offsets, sf_offsets, _ = offset_form(a, sfa, counts)
    out = nvfp4.grouped_gemm_offsets(a_off, sfa_off, b, sfb, offsets, sf_offsets)
    assert_offsets_exact(out, a_off, sfa_off, b, sfb, offsets, sf_offsets, counts)


def test_an_expert_starting_before_an_earlier_one_gets_no_rows():
    """Offsets that go back (0, 10, 5, 12, 20): expert 1 ends before it starts and expert 2 starts
    inside expert 0, so neither has rows (no row of C has two experts writing it); experts 0 and 3
    are exact and rows 10 and 11, which no valid expert holds, are not written."""
    a, sfa, b, sfb, _ = moe_operands(4, 20, 64, 256, seed=5)
    a_off = a.view(torch.uint8)[0].contiguous().view(torch.float4_e2m1fn_x2)  # 20 rows
    sfa_off = torch.cat([sfa[0]] * 4)  # four blocks of 128 scale rows: every expert's own
    offsets = torch.tensor([0, 10, 5, 12, 20], dtype=torch.int32, device=DEVICE)
    sf_offsets = torch.tensor([0, 128, 256, 384], dtype=torch.int32, device=DEVICE)
    out = nvfp4.grouped_gemm_offsets(a_off, sfa_off, b, sfb, offsets, sf_offsets, out=poisoned(20, 64))
    counts = torch.tensor([10, 0, 0, 8], dtype=torch.int32)
    first, sf_first = [0, 10, 5, 12], [0, 128, 256, 384]
    failure = expert_mismatch(
        lambda e: out[first[e] : first[e] + counts[e]],
        lambda e: a_off[first[e] : first[e] + counts[e]],
        lambda e: sfa_off[sf_first[e] // 128 :],
        b,
        sfb,
        counts,
    )
    assert failure is None, failure
    assert out[10:12].isnan().all()


def test_offset_layout_pads_each_experts_scale_rows_to_128():
    offsets, sf_offsets = nvfp4.offset_layout(torch.tensor([5, 0, 129, 128], dtype=torch.int32))
    assert offsets.tolist() == [0, 5, 5, 134, 262]
    assert sf_offsets.tolist() == [0, 128, 128, 384]
    assert nvfp4.sf_rows_capacity(262, 4) >= 512


@pytest.mark.parametrize(
    "what,message",
    [
        ("masked_m int64", "masked_m has dtype torch.int64"),
        ("sfa short", "sfa has shape"),
        ("out wrong", "out has shape"),
    ],
)
def test_bad_moe_input_raises_a_clear_error(what, message):
    a, sfa, b, sfb, counts = moe_operands(2, 16, 64, 128, seed=3)
    out = None
    if what == "masked_m int64":
        counts = counts.long()
    elif what == "sfa short":
        sfa = sfa[:, :, :1]
    else:
        out = poisoned(2, 16, 32)
    with pytest.raises(ValueError, match=message):
        nvfp4.grouped_gemm_masked(a, sfa, b, sfb, counts, out=out)


NOT_TENSORS = {"None": lambda t: None, "a numpy array": lambda t: t.cpu().view(torch.uint8).numpy(), "a list": lambda t: [t]}


@pytest.mark.parametrize("form", ["masked", "offsets"])
@pytest.mark.parametrize("name", ["a", "b"])
@pytest.mark.parametrize("given", list(NOT_TENSORS))
def test_an_argument_that_is_not_a_tensor_is_a_value_error_naming_it(form, name, given):
    a, sfa, b, sfb, counts = moe_operands(2, 16, 64, 128, seed=3)
    args = {"a": a, "b": b}
    if form == "offsets":
        args["a"], sfa, offsets, sf_offsets, _ = offset_form(a, sfa, counts)
    args[name] = NOT_TENSORS[given](args[name])
    type_name = type(args[name]).__name__
    with pytest.raises(ValueError, match=f"nvfp4.grouped_gemm_{form}: {name} must be .* got a {type_name}, not a tensor"):
        if form == "masked":
            nvfp4.grouped_gemm_masked(args["a"], sfa, args["b"], sfb, counts)
        else:
            nvfp4.grouped_gemm_offsets(args["a"], sfa, args["b"], sfb, offsets, sf_offsets)


@pytest.mark.parametrize("given", list(NOT_TENSORS))
def test_quantize_of_something_that_is_not_a_tensor_is_a_value_error(given):
    with pytest.raises(ValueError, match="nvfp4.quantize: x must be an fp16 or bf16 tensor"):
        nvfp4.quantize(NOT_TENSORS[given](torch.ones(4, 64, dtype=torch.float16)))


def misaligned(t: torch.Tensor) -> torch.Tensor:
    """A contiguous copy of t whose data starts 2 bytes past a 16-byte boundary."""
    raw = torch.empty(t.numel() * t.element_size() + 16, dtype=torch.uint8, device=t.device)[2:]
    return raw[: t.numel() * t.element_size()].view(t.dtype).view(t.shape).copy_(t)


FLAWS = {  # argument -> how it is made wrong -> what a call must do: raise (a message) or warn and stay exact
    "a": {"int8": (lambda t: t.view(torch.int8), "a has dtype"), "misaligned": (misaligned, None)},
    "sfa": {"one K block short": (lambda t: t[:, :, :1], "sfa has shape"), "on the CPU": (lambda t: t.cpu(), None)},
    "b": {"another N": (lambda t: t[:, :56], "out has shape"), "strided": (lambda t: t.transpose(1, 2).contiguous().transpose(1, 2), None)},
    "sfb": {"float16": (lambda t: t.view(torch.float16), "sfb has dtype")},
    "masked_m": {"int64": (lambda t: t.long(), "masked_m has dtype"), "one short": (lambda t: t[:-1], "masked_m has shape")},
    "out": {"float32": (lambda t: t.float(), "out has dtype"), "strided": (lambda t: t.transpose(1, 2).contiguous().transpose(1, 2), None)},
    "alpha": {"float16": (lambda t: t.half(), "alpha must be float32"), "[E, 1]": (lambda t: t[:, None], "alpha must be float32")},
}


@pytest.mark.parametrize("name,flaw", [(name, flaw) for name, flaws in FLAWS.items() for flaw in flaws])
def test_every_flawed_masked_argument_is_refused_or_computed_exactly_elsewhere(name, flaw):
    """One argument at a time made wrong: the call raises a ValueError naming it (a tensor on the CPU
    beside GPU ones included), or, for what only the kernels cannot take (misaligned or strided
    tensors), warns on the GPU, takes the portable path and is exact."""
    a, sfa, b, sfb, counts = moe_operands(3, 24, 64, 128, seed=9)
    args = {"a": a, "sfa": sfa, "b": b, "sfb": sfb, "masked_m": counts, "out": poisoned(3, 24, 64)}
    args["alpha"] = torch.ones(3, dtype=torch.float32, device=DEVICE)
    make, message = FLAWS[name][flaw]
    args[name] = make(args[name])
    call = lambda: nvfp4.grouped_gemm_masked(**{k: v for k, v in args.items() if k != "alpha"}, alpha=args["alpha"])  # noqa: E731
    if flaw == "on the CPU" and DEVICE.type == "cuda":
        message = "sfa is on cpu"
    if message:
        with pytest.raises(ValueError, match=message):
            call()
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call()
    if DEVICE.type == "cuda":
        assert any("portable path" in str(w.message) for w in caught), f"no warning for {name} {flaw}"
    assert_masked_exact(out, args["a"], args["sfa"], args["b"], args["sfb"], args["masked_m"])


SCALES = torch.randint(1, 0x7F, (200, 8), dtype=torch.uint8)
COUNTS = torch.tensor([120, 0, 80], dtype=torch.int32)
BAD_HELPER_CALLS = {
    "blocked_from_plain of float32": (lambda: nvfp4.blocked_from_plain(SCALES.float()), "must be one byte each .* got torch.float32"),
    "blocked_from_plain of K/16 = 6": (lambda: nvfp4.blocked_from_plain(SCALES[:, :6]), "K/16 must be a multiple of 4"),
    "blocked_from_plain of a list": (lambda: nvfp4.blocked_from_plain([SCALES]), "got a list, not a tensor"),
    "plain_from_blocked of more rows than it holds": (
        lambda: nvfp4.plain_from_blocked(nvfp4.blocked_from_plain(SCALES), 300),
        "300 rows of scales",
    ),
    "plain_from_blocked of -1 rows": (lambda: nvfp4.plain_from_blocked(nvfp4.blocked_from_plain(SCALES), -1), "-1 rows of scales"),
    "reordered_from_blocked of more rows than it holds": (
        lambda: nvfp4.reordered_from_blocked(nvfp4.blocked_from_plain(SCALES), 1000),
        "1000 rows of scales",
    ),
    "offset_layout of a list": (lambda: nvfp4.offset_layout([3, 4]), "counts must be an integer tensor"),
    "offset_layout of float counts": (lambda: nvfp4.offset_layout(torch.tensor([1.7, 2.2])), "counts must be an integer tensor"),
    "offset_scales of float32": (
        lambda: nvfp4.offset_scales(SCALES.float(), *nvfp4.offset_layout(COUNTS), 512),
        "must be one byte each .* got torch.float32",
    ),
    "offset_scales with offsets of [E]": (
        lambda: nvfp4.offset_scales(SCALES, nvfp4.offset_layout(COUNTS)[0][:-1], nvfp4.offset_layout(COUNTS)[1], 512),
        "expert_offsets \\[E \\+ 1\\] and sf_offsets \\[E\\]",
    ),
    "offset_scales with sf_rows -1": (
        lambda: nvfp4.offset_scales(SCALES, *nvfp4.offset_layout(COUNTS), -1),
        "sf_rows must not be negative",
    ),
}


@pytest.mark.parametrize("call", list(BAD_HELPER_CALLS))
def test_a_layout_helper_given_what_it_cannot_use_raises_a_value_error(call):
    make, message = BAD_HELPER_CALLS[call]
    with pytest.raises(ValueError, match=message):
        make()


def test_torch_fx_records_each_op_it_traces_through():
    """torch.fx.symbolic_trace passes Proxies, not tensors: they go to torch.ops, not to the checks."""

    def layer(a, sfa, b, sfb, counts, x):
        return nvfp4.grouped_gemm_masked(a, sfa, b, sfb, counts), nvfp4.quantize(x)

    def list_form(a0, b, sfa0, sfb0):  # b a Proxy of a whole list
        return nvfp4.grouped_gemm([a0], b, [sfa0], [sfb0])

    for function, ops in ((layer, ["nvfp4.grouped_gemm_masked", "nvfp4.quantize"]), (list_form, ["nvfp4.grouped_gemm"])):
        traced = torch.fx.symbolic_trace(function)
        assert [str(n.target) for n in traced.graph.nodes if n.op == "call_function"] == ops


def test_torch_compile_takes_the_offset_form_with_rows_known_only_from_data():
    """A of rows selected by a mask (an unbacked size under torch.compile) traces: no check decides on it."""
    import torch._dynamo

    a, sfa, b, sfb, counts = moe_operands(2, 16, 64, 128, seed=3)
    a_off, sfa_off, offsets, sf_offsets, _ = offset_form(a, sfa, counts)
    keep = torch.ones(a_off.shape[0], dtype=torch.bool, device=DEVICE)

    def call(a, keep):
        return nvfp4.grouped_gemm_offsets(a.view(torch.uint8)[keep], sfa_off, b, sfb, offsets, sf_offsets)

    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        out = torch.compile(call, backend="eager", fullgraph=True)(a_off, keep)
    assert torch.equal(out, nvfp4.grouped_gemm_offsets(a_off, sfa_off, b, sfb, offsets, sf_offsets))


def test_offset_scales_takes_int64_offsets_and_any_scale_row_count():
    plain = torch.randint(1, 0x7F, (200, 8), dtype=torch.uint8)
    offsets, sf_offsets = nvfp4.offset_layout(torch.tensor([120, 0, 80]))
    expected = nvfp4.offset_scales(plain, offsets, sf_offsets, 384)
    assert torch.equal(nvfp4.offset_scales(plain, offsets.long(), sf_offsets.long(), 384), expected)
    assert torch.equal(nvfp4.offset_scales(plain, offsets, sf_offsets, 300), expected[:3])


def test_offset_layout_of_no_experts_gives_e_plus_one_and_e_offsets():
    offsets, sf_offsets = nvfp4.offset_layout(torch.zeros(0, dtype=torch.int32))
    assert offsets.tolist() == [0] and sf_offsets.shape == (0,)
    offsets, sf_offsets = nvfp4.offset_layout(torch.tensor([5, 0, 130]))
    assert offsets.tolist() == [0, 5, 5, 135] and sf_offsets.tolist() == [0, 128, 128]


def test_offsets_with_rows_but_no_scale_blocks_is_a_value_error():
    a, sfa, b, sfb, counts = moe_operands(2, 16, 64, 128, seed=3)
    a_off, sfa_off, offsets, sf_offsets, _ = offset_form(a, sfa, counts)
    with pytest.raises(ValueError, match="sfa holds no 128-row block of scales"):
        nvfp4.grouped_gemm_offsets(a_off, sfa_off[:0], b, sfb, offsets, sf_offsets)


def test_more_experts_than_the_kernels_take_warn_and_are_computed_exactly_elsewhere():
    """E one past the kernels' bound: on a GPU a warning naming E and the portable path (the kernel's
    own check would refuse it), exact on any device."""
    a, sfa, b, sfb, counts = moe_operands(MAX_EXPERTS + 1, 2, 8, 64, seed=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = nvfp4.grouped_gemm_masked(a, sfa, b, sfb, counts, out=poisoned(MAX_EXPERTS + 1, 2, 8))
    if DEVICE.type == "cuda":
        assert any(f"E={MAX_EXPERTS + 1} is more experts" in str(w.message) for w in caught)
    assert_masked_exact(out, a, sfa, b, sfb, counts)


def test_the_python_bound_on_experts_is_the_kernels():
    assert f"constexpr int kMaxExperts = {MAX_EXPERTS};" in (ROOT / "csrc" / "experts.cuh").read_text()


def test_the_moe_ops_have_fake_implementations():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a, sfa = torch.empty(4, 40, 64, dtype=torch.uint8), torch.empty(4, 1, 2, 32, 4, 4, dtype=torch.float8_e4m3fn)
        b, sfb = torch.empty(4, 24, 64, dtype=torch.uint8), torch.empty(4, 1, 2, 32, 4, 4, dtype=torch.float8_e4m3fn)
        counts = torch.empty(4, dtype=torch.int32)
        assert torch.ops.nvfp4.grouped_gemm_masked(a, sfa, b, sfb, counts).shape == (4, 40, 24)
        offsets, sf_offsets = torch.empty(5, dtype=torch.int32), torch.empty(4, dtype=torch.int32)
        a2, sfa2 = torch.empty(90, 64, dtype=torch.uint8), torch.empty(5, 2, 32, 4, 4, dtype=torch.float8_e4m3fn)
        assert torch.ops.nvfp4.grouped_gemm_offsets(a2, sfa2, b, sfb, offsets, sf_offsets).shape == (90, 24)
        q, sf = torch.ops.nvfp4.quantize(torch.empty(3, 200, 128, dtype=torch.bfloat16), None)
        assert q.shape == (3, 200, 64) and sf.shape == (3, 2, 2, 32, 4, 4) and sf.dtype == torch.float8_e4m3fn


def compiled_moe_step(device):
    """quantize, the masked GEMM into the caller's output and the offset form, traced by
    torch.compile as one graph; the compiled step called again after new activations, counts and
    weights are written into the same tensors: exact each time, rows past the counts unwritten."""
    experts, max_m, n, k = 6, 40, 64, 128
    _, _, b, sfb, counts = moe_operands(experts, max_m, n, k, seed=400, device=device)
    x = torch.empty(experts, max_m, k, dtype=torch.float16, device=device)
    a, sfa, _, _, off_counts = moe_operands(experts, max_m, n, k, seed=401, device=device)
    a_off, sfa_off, offsets, sf_offsets, _ = offset_form(a, sfa, off_counts)
    out = poisoned(experts, max_m, n, device=device)

    def step(x, counts, b, sfb, out, a_off, sfa_off, offsets, sf_offsets):
        q, sf = nvfp4.quantize(x, counts)
        nvfp4.grouped_gemm_masked(q, sf, b, sfb, counts, out=out)
        return q, sf, nvfp4.grouped_gemm_offsets(a_off, sfa_off, b, sfb, offsets, sf_offsets)

    operands = (x, counts, b, sfb, out, a_off, sfa_off, offsets, sf_offsets)
    explained = torch._dynamo.explain(step)(*operands)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    compiled = torch.compile(step, fullgraph=True)
    for seed in (402, 403):
        g = torch.Generator().manual_seed(seed)
        x.copy_(torch.randn(x.shape, generator=g) * torch.exp2(torch.randint(-8, 8, (experts, max_m, 1), generator=g).float()))
        counts.copy_(counts_of(experts, max_m, g))
        _, _, fresh_b, fresh_sfb, _ = moe_operands(experts, max_m, n, k, seed=seed, device=device)
        b.copy_(fresh_b)
        sfb.copy_(fresh_sfb)
        out.fill_(float("nan"))
        q, sf, out_off = compiled(*operands)
        assert_masked_exact(out, q, sf, b, sfb, counts)
        assert_offsets_exact(out_off, a_off, sfa_off, b, sfb, offsets, sf_offsets, off_counts)
        q_ref, sf_ref = torch.empty_like(q), torch.empty_like(sf)
        quantize_portable(x, counts, q_ref, sf_ref)
        for e, m in enumerate(counts.tolist()):
            assert torch.equal(q[e, :m].view(torch.uint8), q_ref[e, :m].view(torch.uint8)), f"expert {e}: codes"


def test_torch_compile_traces_the_moe_ops_with_no_graph_break():
    compiled_moe_step(DEVICE)


def special_values(dtype) -> torch.Tensor:
    """Rows of 64: random data at many scales with zeros and subnormals, then rows of special values."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(300, 256, generator=g) * torch.exp2(torch.randint(-30, 12, (300, 1), generator=g).float())
    x[torch.rand(300, 256, generator=g) < 0.1] = 0.0
    x = x.to(dtype)
    x[0, :16] = 0.0
    x[1, :16] = torch.finfo(dtype).smallest_normal / 4  # subnormal
    x[2, 3] = float("nan")
    x[3, 5] = float("inf")
    x[4, 7] = -float("inf")
    x[5, :16] = -0.0
    return x


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_quantize_special_values_become_what_the_docs_say(dtype):
    q, sf = nvfp4.quantize(special_values(dtype))
    codes = torch.stack((q.view(torch.uint8) & 0xF, q.view(torch.uint8) >> 4), -1).flatten(-2)
    plain = nvfp4.plain_from_blocked(sf.view(torch.uint8), 300)
    assert plain[0, 0] == 0 and (codes[0, :16] == 0).all()  # zeros: scale 0, codes +0
    assert plain[2, 0] == 0x7E and codes[2, 3] == 0  # NaN: scale 448, code +0
    assert plain[3, 0] == 0x7E and codes[3, 5] == 0x7 and codes[4, 7] == 0xF  # +-inf: scale 448, +-6
    assert (codes[5, :16] == 8).all()  # -0: the sign bit
    assert plain.view(torch.float8_e4m3fn).float().max() <= 448


def test_quantize_round_trip_is_within_fp4_precision():
    x = torch.randn(4, 70, 128, dtype=torch.float16, device=DEVICE)
    q, sf = nvfp4.quantize(x)
    from nvfp4.portable import dequantize

    for e in range(4):
        scales = nvfp4.plain_from_blocked(sf[e].view(torch.uint8), 70).view(torch.float8_e4m3fn).float()
        back = dequantize(q[e], scales)
        assert ((back - x[e].float()).abs() <= 0.5 * scales.repeat_interleave(16, 1) * 2 + 1e-6).all()  # half a step of 2 at most


@pytest.mark.parametrize("shape", [(3, 0, 64), (0, 5, 64), (2, 3, 0, 128)])
def test_quantize_of_no_rows_or_no_batch_gives_empty_outputs(shape):
    x = torch.ones(shape, dtype=torch.float16, device=DEVICE).transpose(-1, -2).contiguous().transpose(-1, -2)  # also not contiguous
    q, sf = nvfp4.quantize(x)
    *lead, rows, k = shape
    assert q.shape == (*lead, rows, k // 2) and sf.shape == (*lead, -(-rows // 128), k // 64, 32, 4, 4)


# ----------------------------------------------------------------------------- on a GPU
@pytest.fixture(params=["native", "emulated sm_100a"])
def kernel(request):
    """The cases: the device's own kernel on large ones; the sm_100a kernel under the tcgen05
    emulation (an sm_90 GPU with nvcc) on small ones."""
    if request.param == "native":
        nvfp4.prepare(torch.device("cuda", torch.cuda.current_device()))
        yield "native"
        return
    with use_emulated_sm100():
        yield "emulated"


def use_emulated_sm100():
    """A block in which the current GPU's calls run the sm_100a kernel under the tcgen05 emulation
    (its own path again after it); skips where there is no nvcc or no sm_90 GPU."""
    import shutil

    from nvfp4 import dispatch
    from nvfp4.kernel_path import KernelPath

    if not torch.cuda.is_available() or shutil.which("nvcc") is None or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs nvcc and an sm_90 GPU")
    from tools.nvcc_build import load

    device = torch.device("cuda", torch.cuda.current_device())
    return dispatch.use_path(device, KernelPath(load(100, emulate_tcgen05=True), device))


CASES = {  # (E, max_m, N, K)
    "native": [
        (8, 4096, 4096, 7168),
        (8, 1024, 7168, 2048),
        (64, 64, 7168, 2048),
        (256, 16, 3072, 4096),
        (32, 384, 4096, 1536),
        (2, 320, 3072, 4096),
    ],
    "emulated": [(8, 300, 256, 512), (64, 16, 128, 256), (3, 40, 136, 256)],
}


@requires_cuda
@needs_kernel
def test_both_forms_are_exact_over_the_cases(kernel):
    for i, (experts, max_m, n, k) in enumerate(CASES[kernel]):
        a, sfa, b, sfb, counts = moe_operands(experts, max_m, n, k, seed=100 + i)
        out = poisoned(experts, max_m, n)
        nvfp4.grouped_gemm_masked(a, sfa, b, sfb, counts, out=out)
        assert_masked_exact(out, a, sfa, b, sfb, counts)
        a_off, sfa_off, offsets, sf_offsets, _ = offset_form(a, sfa, counts)
        out_off = poisoned(a_off.shape[0], n)
        nvfp4.grouped_gemm_offsets(a_off, sfa_off, b, sfb, offsets, sf_offsets, out=out_off)
        assert_offsets_exact(out_off, a_off, sfa_off, b, sfb, offsets, sf_offsets, counts)


@requires_cuda
@needs_kernel
def test_a_captured_graph_replays_with_new_counts_and_new_data(kernel):
    """Both forms captured once; before each replay new counts and new data are written into the
    same tensors and the outputs poisoned: each replay is exact for what the tensors hold then."""
    experts, max_m, n, k = (16, 200, 512, 1024) if kernel == "native" else (6, 60, 128, 256)
    a, sfa, b, sfb, counts = moe_operands(experts, max_m, n, k, seed=200)
    capacity = experts * max_m  # the offset form's rows: every split of up to max_m rows per expert fits
    a_off = torch.zeros(capacity, k // 2, dtype=torch.uint8, device=DEVICE).view(torch.float4_e2m1fn_x2)
    sfa_off = torch.zeros(nvfp4.sf_rows_capacity(capacity, experts) // 128, k // 64, 32, 4, 4, dtype=torch.float8_e4m3fn, device=DEVICE)
    offsets, sf_offsets = nvfp4.offset_layout(counts)
    out, out_off = poisoned(experts, max_m, n), poisoned(capacity, n)
    nvfp4.grouped_gemm_masked(a, sfa, b, sfb, counts, out=out)  # first use outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        nvfp4.grouped_gemm_masked(a, sfa, b, sfb, counts, out=out)
        nvfp4.grouped_gemm_offsets(a_off, sfa_off, b, sfb, offsets, sf_offsets, out=out_off)
    for replay in range(3):
        fresh = moe_operands(experts, max_m, n, k, seed=201 + replay)
        for t, u in zip((a, sfa, b, sfb, counts), fresh):
            t.copy_(u)
        rows, sf_rows_fresh, offsets_fresh, sf_offsets_fresh, _ = offset_form(a, sfa, counts)
        a_off.view(torch.uint8)[: rows.shape[0]].copy_(rows.view(torch.uint8))
        sfa_off.view(torch.uint8)[: sf_rows_fresh.shape[0]].copy_(sf_rows_fresh.view(torch.uint8))
        offsets.copy_(offsets_fresh)
        sf_offsets.copy_(sf_offsets_fresh)
        out.fill_(float("nan"))
        out_off.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_masked_exact(out, a, sfa, b, sfb, counts)
        assert_offsets_exact(out_off, a_off, sfa_off, b, sfb, offsets, sf_offsets, counts)
        assert out_off[int(offsets[-1]) :].isnan().all(), "rows past the last expert were written"


@requires_cuda
@needs_kernel
def test_the_moe_calls_run_on_the_callers_queue_behind_its_work(kernel):
    """Counts, data and outputs rewritten on a side queue behind ~30 ms of GPU work, the calls made
    under that queue, only that queue synchronized: exact (a launch on any other queue would read
    the old counts and data, or leave NaN)."""
    experts, max_m, n, k = (16, 200, 512, 1024) if kernel == "native" else (6, 60, 128, 256)
    a, sfa, b, sfb, counts = moe_operands(experts, max_m, n, k, seed=300)
    fresh = moe_operands(experts, max_m, n, k, seed=301)
    x = torch.randn(experts, max_m, k, device=DEVICE).half()
    out = poisoned(experts, max_m, n)
    nvfp4.grouped_gemm_masked(a, sfa, b, sfb, counts, out=out)  # first use on the default queue
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(1 << 26)
        for t, u in zip((a, sfa, b, sfb, counts), fresh):
            t.copy_(u)
        x.mul_(3)
        out.fill_(float("nan"))
        nvfp4.grouped_gemm_masked(a, sfa, b, sfb, counts, out=out)
        q, sf = nvfp4.quantize(x, counts)
    side.synchronize()
    assert_masked_exact(out, a, sfa, b, sfb, counts)
    q_ref, sf_ref = torch.empty_like(q), torch.empty_like(sf)
    quantize_portable(x, counts, q_ref, sf_ref)
    for e, m in enumerate(counts.tolist()):
        assert torch.equal(q[e, :m].view(torch.uint8), q_ref[e, :m].view(torch.uint8))


@requires_cuda
@needs_kernel
def test_torch_compile_on_the_gpu(kernel):
    compiled_moe_step(torch.device("cuda"))


@requires_cuda
@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_quantize_kernel_matches_the_portable_recipe_bit_for_bit(dtype):
    nvfp4.prepare()
    random_bits = torch.randint(-(1 << 15), 1 << 15, (500, 256), generator=torch.Generator().manual_seed(8), dtype=torch.int16).view(dtype)
    x = torch.cat([special_values(dtype), random_bits, torch.randn(500, 256).to(dtype) * 1e-3]).to(DEVICE).reshape(2, 650, 256)
    q, sf = nvfp4.quantize(x)
    q_ref, sf_ref = (torch.empty_like(q), torch.empty_like(sf))
    quantize_portable(x, None, q_ref, sf_ref)
    assert torch.equal(q.view(torch.uint8), q_ref.view(torch.uint8))
    assert torch.equal(sf.view(torch.uint8), sf_ref.view(torch.uint8))
    counts = torch.tensor([0, 333], dtype=torch.int32, device=DEVICE)  # masked: rows past the count untouched
    q_masked, sf_masked = nvfp4.quantize(x, counts)
    assert torch.equal(q_masked[1, :333].view(torch.uint8), q_ref[1, :333].view(torch.uint8))
    plain_ref = nvfp4.plain_from_blocked(sf_ref[1].view(torch.uint8), 650)
    assert torch.equal(nvfp4.plain_from_blocked(sf_masked[1].view(torch.uint8), 650)[:333], plain_ref[:333])
