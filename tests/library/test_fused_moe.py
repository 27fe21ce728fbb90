"""nvfp4.fused_moe on a layer quantized the two-level way from bf16 weights: finite, within 1e-2 of a
float64 emulation of the same two-level math (tests/two_level_reference.py quantizes its activations),
its error against the unquantized bf16 layer stated; dropped routing ids; clear errors; and on a GPU
the same under a CUDA graph replayed with new tokens and routing, on a side queue, and compiled."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_moe import DEVICE, HAS_KERNEL
from two_level_reference import E2M1_VALUES, E4M3_VALUES, quantize_two_level

import nvfp4
from conftest import requires_cuda

needs_kernel = pytest.mark.skipif(not HAS_KERNEL, reason="needs a GPU with a CUDA kernel path (sm_90)")


def layer(experts: int, hidden: int, inter: int, tokens: int, top_k: int, seed: int, device=DEVICE, dtype=torch.bfloat16):
    """bf16 weights N(0, 0.02) and activations N(0, 1) with outliers up to 100, the experts quantized
    from them with input scales calibrated on them, and a softmax top-k routing."""
    g = torch.Generator().manual_seed(seed)
    w13 = (torch.randn(experts, 2 * inter, hidden, generator=g) * 0.02).to(dtype)
    w2 = (torch.randn(experts, hidden, inter, generator=g) * 0.02).to(dtype)
    x = torch.randn(tokens, hidden, generator=g)
    outliers = torch.randint(tokens * hidden, (max(1, tokens // 4),), generator=g)
    x.view(-1)[outliers] = torch.rand(len(outliers), generator=g) * 200 - 100
    x = x.to(dtype)
    weights, ids = torch.topk(torch.softmax(torch.randn(tokens, experts, generator=g), -1), top_k, -1)
    unquantized = bf16_layer(x, weights, ids, w13, w2)
    act_amax = max(float(activations(x, w13[e]).abs().max()) for e in range(experts))
    in13 = torch.full((experts,), float(x.abs().max()) / 2688.0)
    in2 = torch.full((experts,), act_amax / 2688.0)
    quantized = nvfp4.Experts.quantized(w13.to(device), w2.to(device), in13.to(device), in2.to(device))
    return x.to(device), weights.to(device), ids.to(device), quantized, unquantized


def activations(x: torch.Tensor, w13: torch.Tensor) -> torch.Tensor:
    gate, up = (x.float() @ w13.float().T).chunk(2, dim=-1)
    return F.silu(gate) * up


def bf16_layer(x, weights, ids, w13, w2) -> torch.Tensor:
    """The layer without quantization, in float32 from the bf16 weights."""
    out = torch.zeros(x.shape, dtype=torch.float32)
    for t in range(x.shape[0]):
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            out[t] += float(weights[t, j]) * (activations(x[t : t + 1], w13[e]) @ w2[e].float().T)[0]
    return out


def dequantized(codes: np.ndarray, scale_bytes: np.ndarray) -> np.ndarray:
    """FP4 bytes [rows, K/2] and scale bytes [rows, K/16] -> float64 [rows, K] (without any global scale)."""
    both = np.stack([codes & 0xF, codes >> 4], -1).reshape(codes.shape[0], -1)
    values = E2M1_VALUES[both & 7] * np.where(both & 8, -1.0, 1.0)
    return values * np.repeat(E4M3_VALUES[scale_bytes], 16, axis=1)


def emulated_layer(x, weights, ids, experts: nvfp4.Experts) -> np.ndarray:
    """The same two-level math in float64: each routed row quantized by the independent recipe with
    its expert's input scale, the GEMMs in float64 times alpha, rounded to x's dtype where the layer
    rounds (its GEMMs' outputs and the activation), summed with the weights (rounded to x's dtype, as
    the layer's combine takes them) in float64."""
    ex = experts.to("cpu")
    x, ids = x.cpu(), ids.cpu()
    weights = weights.cpu().to(x.dtype).double()

    def gemm(rows: torch.Tensor, e: int, input_scale, w, blocked, alpha) -> torch.Tensor:
        codes, scale_bytes = quantize_two_level(rows, np.full(rows.shape[0], float(input_scale[e]), np.float32))
        plain = nvfp4.plain_from_blocked(blocked[e].view(torch.uint8), w.shape[1]).numpy()
        product = dequantized(codes, scale_bytes) @ dequantized(w[e].numpy(), plain).T * alpha[e].double().numpy()
        return torch.from_numpy(product).to(x.dtype)

    out = np.zeros(x.shape)
    for e in range(ex.num_experts):
        token, j = (ids == e).nonzero(as_tuple=True)
        if not len(token):
            continue
        gate, up = gemm(x[token], e, ex.w13_input_scale, ex.w13, ex.w13_scale, ex.w13_alpha).double().chunk(2, dim=-1)
        act = (F.silu(gate) * up).to(x.dtype)
        down = gemm(act, e, ex.w2_input_scale, ex.w2, ex.w2_scale, ex.w2_alpha).double().numpy()
        np.add.at(out, token.numpy(), weights[token, j].numpy()[:, None] * down)
    return out


def relative(got, expected) -> float:
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    return float(np.linalg.norm(got - expected) / np.linalg.norm(expected))


@pytest.mark.parametrize("top_k", [2, 8])
def test_fused_moe_matches_the_float64_emulation_and_states_its_error(top_k, capsys):
    x, weights, ids, experts, unquantized = layer(8, 256, 128, 12, top_k, seed=top_k)
    y = nvfp4.fused_moe(x, weights, ids, experts)
    assert y.dtype == x.dtype and y.shape == x.shape and torch.isfinite(y).all()
    assert relative(y.float().cpu(), emulated_layer(x, weights, ids, experts)) < 1e-2
    error = relative(y.float().cpu(), unquantized)
    with capsys.disabled():
        print(f"\n  fused_moe, top-{top_k}: relative error against the unquantized bf16 layer {error:.3f}")
    assert error < 0.3  # W4A4 in two GEMMs: about 0.1 each


def test_pairs_routed_outside_the_experts_are_dropped():
    x, weights, ids, experts, _ = layer(4, 128, 64, 6, 2, seed=5)
    dropped = ids.clone()
    dropped[:, 1] = -1
    dropped[0, 0] = 4
    y = nvfp4.fused_moe(x, weights, dropped, experts)
    kept_only = nvfp4.fused_moe(x, torch.where(dropped >= 0, weights, 0.0), dropped.clamp(0, 3), experts)
    assert torch.isfinite(y).all() and not y[0].any()
    torch.testing.assert_close(y[1:], kept_only[1:], rtol=2.0**-7, atol=1e-4)  # the same sums, in GEMMs of other row counts


def test_fp16_input_gives_fp16_output():
    x, weights, ids, experts, _ = layer(4, 128, 64, 5, 2, seed=6, dtype=torch.float16)
    y = nvfp4.fused_moe(x, weights, ids, experts)
    assert y.dtype == torch.float16 and torch.isfinite(y).all()


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda a: {**a, "x": a["x"][:, :64]}, "x must be fp16 or bf16 \\[T, H\\] with H = 128"),
        (lambda a: {**a, "topk_ids": a["topk_ids"].float()}, "topk_ids must be int32 or int64"),
        (lambda a: {**a, "topk_weights": a["topk_weights"][:, :1]}, "topk_weights must be floating point"),
        (lambda a: {**a, "activation": "gelu"}, "activation must be one of"),
        (lambda a: {**a, "experts": "w13"}, "experts must be an nvfp4.Experts"),
        (lambda a: {**a, "x": a["x"].clone().requires_grad_()}, "fused_moe is for inference: x requires grad"),
    ],
)
def test_bad_fused_moe_input_raises_a_clear_error(change, message):
    x, weights, ids, experts, _ = layer(4, 128, 64, 3, 2, seed=7)
    args = change({"x": x, "topk_weights": weights, "topk_ids": ids, "experts": experts, "activation": "silu"})
    with pytest.raises(ValueError, match=message):
        nvfp4.fused_moe(**args)


W13, W2, IN = torch.randn(3, 128, 128).bfloat16(), torch.randn(3, 128, 64).bfloat16(), torch.ones(3)
BAD_QUANTIZED = {
    "w13 2-D": ((W13[0], W2), "w13 must be fp16 or bf16 \\[E, 2F, H\\]"),
    "w2 float32": ((W13, W2.float()), "w2 must be fp16 or bf16 \\[E, H, F\\], got torch.float32"),
    "w13 odd 2F": ((W13[:, :127], W2), "w13 \\[E, 2F, H\\] and w2 \\[E, H, F\\] must agree"),
    "w2 of another F": ((W13, W2[:, :, :32]), "must agree, got \\(3, 128, 128\\) and \\(3, 128, 32\\)"),
}


@pytest.mark.parametrize("case", list(BAD_QUANTIZED))
def test_experts_quantized_from_weights_it_cannot_use_is_a_value_error_naming_them(case):
    (w13, w2), message = BAD_QUANTIZED[case]
    with pytest.raises(ValueError, match=message):
        nvfp4.Experts.quantized(w13, w2, IN, IN)


def test_experts_to_a_dtype_is_refused():
    experts = nvfp4.Experts.quantized(W13, W2, IN, IN)
    with pytest.raises(ValueError, match="Experts.to takes a device"):
        experts.to(torch.float16)


def test_x_that_requires_grad_runs_under_no_grad():
    x, weights, ids, experts, _ = layer(4, 128, 64, 3, 2, seed=7)
    with torch.no_grad():
        y = nvfp4.fused_moe(x.clone().requires_grad_(), weights, ids, experts)
    assert torch.equal(y, nvfp4.fused_moe(x, weights, ids, experts))


def test_torch_compile_traces_fused_moe_in_one_graph():
    """One graph (fullgraph) computing the same layer; inductor's own code for the activation and the
    combine may round differently in the last bf16 bit, so the two agree to bf16's precision."""
    x, weights, ids, experts, _ = layer(4, 128, 64, 5, 2, seed=8)
    compiled = torch.compile(nvfp4.fused_moe, fullgraph=True)
    assert relative(compiled(x, weights, ids, experts).float().cpu(), nvfp4.fused_moe(x, weights, ids, experts).float().cpu()) < 1e-2


# ----------------------------------------------------------------------------- on a GPU
@requires_cuda
@needs_kernel
@pytest.mark.parametrize(
    "shape",
    [(16, 1024, 512, 24, 8), (8, 2048, 1024, 40, 2), (8, 7168, 2048, 6, 8)],
    ids=["E16 H1024 F512 top-8", "E8 H2048 F1024 top-2", "E8 H7168 F2048 top-8"],
)
def test_fused_moe_on_the_gpu_matches_the_emulation(shape, capsys):
    experts, hidden, inter, tokens, top_k = shape
    x, weights, ids, quantized, unquantized = layer(experts, hidden, inter, tokens, top_k, seed=9)
    y = nvfp4.fused_moe(x, weights, ids, quantized)
    assert torch.isfinite(y).all()
    assert relative(y.float().cpu(), emulated_layer(x, weights, ids, quantized)) < 1e-2
    with capsys.disabled():
        print(
            f"\n  fused_moe on {torch.cuda.get_device_name()}, {shape}: relative error against the unquantized bf16 layer "
            f"{relative(y.float().cpu(), unquantized):.3f}"
        )


@requires_cuda
@needs_kernel
def test_fused_moe_graph_replays_with_new_tokens_and_routing_on_a_busy_side_queue():
    """The layer captured once on a side queue; each replay follows ~30 ms of GPU work on that queue
    that writes new tokens, weights and routing into the captured tensors: each replay's output is
    the eager layer's on what the tensors hold then."""
    x, weights, ids, experts, _ = layer(16, 512, 256, 32, 4, seed=10)
    nvfp4.fused_moe(x, weights, ids, experts)  # first use outside the capture
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(side):
        with torch.cuda.graph(graph, stream=side):
            out = nvfp4.fused_moe(x, weights, ids, experts)
    for replay in range(3):
        fresh_x, fresh_w, fresh_ids, _, _ = layer(16, 512, 256, 32, 4, seed=11 + replay)
        with torch.cuda.stream(side):
            torch.cuda._sleep(1 << 26)
            x.copy_(fresh_x * 0.5)
            weights.copy_(fresh_w)
            ids.copy_(fresh_ids)
            out.fill_(float("nan"))
            graph.replay()
        side.synchronize()
        assert torch.equal(out, nvfp4.fused_moe(x, weights, ids, experts)), f"replay {replay}"


@requires_cuda
@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_the_routed_quantize_kernel_matches_its_portable_form_bit_for_bit(dtype):
    """The kernel that gathers the routed rows and quantizes each with its expert's global scale into
    the offset form's layout, against the same in PyTorch ops (quantize_portable, offset_scales), on
    rows with zeros, subnormals, inf and NaN, some pairs dropped: every owned row's codes and every
    scale byte (zeros outside the experts' rows) equal."""
    from two_level_reference import awkward_activations

    from nvfp4.fused_moe import Routing, _quantize_routed, quantize_routed_portable

    nvfp4.prepare()
    x, scale = awkward_activations(300, 512, dtype, seed=12)
    x = x.to(DEVICE)
    g = torch.Generator().manual_seed(13)
    ids = torch.randint(-1, 20, (300, 4), generator=g).to(DEVICE)  # -1: dropped
    routing = Routing(ids, 20)
    input_scale = torch.from_numpy(scale[:20]).to(DEVICE)
    q, sf = _quantize_routed(x, routing.token, routing.offsets, routing.sf_offsets, input_scale, routing.sf_rows)
    q_ref, sf_ref = torch.empty_like(q), torch.zeros_like(sf)
    quantize_routed_portable(x, routing.token, routing.offsets, routing.sf_offsets, input_scale, q_ref, sf_ref)
    owned = int(routing.offsets[-1])
    assert 0 < owned < routing.rows
    assert torch.equal(q[:owned].view(torch.uint8), q_ref[:owned].view(torch.uint8))
    assert torch.equal(sf.view(torch.uint8), sf_ref.view(torch.uint8))
