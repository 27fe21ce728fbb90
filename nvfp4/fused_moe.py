"""A whole Mixture-of-Experts layer on NVFP4 experts, its routing kept on the GPU.

    y = nvfp4.fused_moe(x, topk_weights, topk_ids, experts)        # x [T, H] bf16 or fp16 -> y [T, H]

Each token's top-k (expert, weight) pairs become rows grouped by expert (a stable sort on the GPU);
the rows are gathered and quantized with their expert's input global scale straight into the offset
form's layout (one kernel on a GPU), multiplied by w13 (gate and up) with alpha in the GEMM's
epilogue, activated (SiLU(gate) * up, or ReLU(gate)^2 * up, in float32), quantized again, multiplied
by w2, and each token's rows are summed with its weights (rounded to x's dtype) by a batched GEMM
that accumulates in float32. Nothing reads a GPU value on the host, so the layer runs on the
caller's current queue, inside a CUDA graph capture (call it once before capturing, or
nvfp4.prepare()) and under torch.compile(fullgraph=True).
An id outside [0, E) drops its pair (expert parallelism's convention for experts held elsewhere).
"""

import torch
import torch.nn.functional as F

from .experts import Experts
from .layout import described
from .moe import expert_of_rows, kernel_for, offset_scales, sf_rows_capacity
from .ops import grouped_gemm_offsets
from .quantize import blocked_scale_shape, launch_quantize, plain_from_blocked, quantize_portable

ACTIVATIONS = ("silu", "relu2")


def check_fused_moe_input(x, topk_weights, topk_ids, experts, activation) -> None:
    if not isinstance(experts, Experts):
        raise ValueError(f"nvfp4.fused_moe: experts must be an nvfp4.Experts (nvfp4.load_experts makes one), got {type(experts).__name__}")
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.dtype not in (torch.float16, torch.bfloat16) or x.shape[1] != experts.hidden:
        raise ValueError(f"nvfp4.fused_moe: x must be fp16 or bf16 [T, H] with H = {experts.hidden}, got " + described(x, with_dtype=True))
    tokens = x.shape[0]
    if (
        not isinstance(topk_ids, torch.Tensor)
        or topk_ids.dim() != 2
        or topk_ids.shape[0] != tokens
        or topk_ids.dtype not in (torch.int32, torch.int64)
    ):
        raise ValueError(
            f"nvfp4.fused_moe: topk_ids must be int32 or int64 [T, top_k] with T = {tokens}, got " + described(topk_ids, with_dtype=True)
        )
    if (
        not isinstance(topk_weights, torch.Tensor)
        or tuple(topk_weights.shape) != tuple(topk_ids.shape)
        or not topk_weights.is_floating_point()
    ):
        raise ValueError(
            f"nvfp4.fused_moe: topk_weights must be floating point of topk_ids' shape {tuple(topk_ids.shape)}, got "
            + described(topk_weights, with_dtype=True)
        )
    if not topk_ids.shape[1]:
        raise ValueError("nvfp4.fused_moe: top_k must be at least 1")
    devices = {x.device, topk_ids.device, topk_weights.device, experts.device}
    if len(devices) > 1:
        raise ValueError(
            f"nvfp4.fused_moe: x, topk_weights, topk_ids and the experts must be on one device, got {sorted(map(str, devices))}"
        )
    if activation not in ACTIVATIONS:
        raise ValueError(f"nvfp4.fused_moe: activation must be one of {ACTIVATIONS}, got {activation!r}")
    if x.requires_grad and torch.is_grad_enabled():  # the GEMMs have no backward: x's gradient would be dropped unsaid
        raise ValueError(
            "nvfp4.fused_moe is for inference: x requires grad, and the layer computes no gradient for it "
            "(call it under torch.no_grad() or torch.inference_mode(), or pass x.detach())"
        )


def routed_outputs(x: torch.Tensor, rows: int, sf_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The codes [rows, K/2] and the offset form's zeroed sfa [sf_rows/128, K/64, 32, 4, 4] of a routed quantization."""
    k = x.shape[1]
    return (
        x.new_empty((rows, k // 2), dtype=torch.float4_e2m1fn_x2),
        x.new_zeros(blocked_scale_shape(sf_rows, k), dtype=torch.float8_e4m3fn),
    )


def _quantize_routed(
    x: torch.Tensor, source_row: torch.Tensor, offsets: torch.Tensor, sf_offsets: torch.Tensor, global_scale: torch.Tensor, sf_rows: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Routed row r = x row source_row[r], quantized with its expert's global scale (the expert
    whose offsets hold r), its scales at row sf_offsets[e] + r - offsets[e] of the offset form's sfa
    [sf_rows/128, K/64, 32, 4, 4] (zeros elsewhere). Rows of no expert: codes unspecified."""
    rows = source_row.shape[0]
    q, sf = routed_outputs(x, rows, sf_rows)
    kernel = kernel_for(x)
    if kernel is not None and x.is_contiguous():
        launch_quantize(kernel, x, q, sf, 1, rows, global_scale=global_scale, strides=(1, 0), routed=(source_row, offsets, sf_offsets))
    else:
        quantize_routed_portable(x, source_row, offsets, sf_offsets, global_scale, q, sf)
    return q, sf


def quantize_routed_portable(x, source_row, offsets, sf_offsets, global_scale, q, sf) -> None:
    """_quantize_routed in PyTorch ops (the same recipe: quantize_portable), into q and sf."""
    rows, sf_rows = source_row.shape[0], sf.shape[0] * 128
    expert, _ = expert_of_rows(offsets, sf_offsets, rows, sf_rows)
    routed = x[source_row.long()]
    blocked = x.new_empty(blocked_scale_shape(rows, x.shape[1]), dtype=torch.float8_e4m3fn)
    quantize_portable(routed, None, q, blocked, global_scale[expert.clamp(min=0)])
    plain = plain_from_blocked(blocked.view(torch.uint8), rows).view(torch.float8_e4m3fn)
    sf.copy_(offset_scales(plain, offsets, sf_offsets, sf_rows))


quantize_routed = torch.library.custom_op("nvfp4::quantize_routed", _quantize_routed, mutates_args=())


@quantize_routed.register_fake
def _quantize_routed_fake(x, source_row, offsets, sf_offsets, global_scale, sf_rows):
    return routed_outputs(x, source_row.shape[0], sf_rows)


class Routing:
    """The T * top_k (token, expert) pairs as rows grouped by expert: row i is pair order[i] (token
    order[i] // top_k); dropped pairs (kept false: an id outside [0, E)) are sorted last and owned by no
    expert; the offset form's layout."""

    def __init__(self, topk_ids: torch.Tensor, experts: int):
        self.kept = (topk_ids >= 0) & (topk_ids < experts)
        flat = topk_ids.reshape(-1).long()
        self.top_k = topk_ids.shape[1]
        key = torch.where(self.kept.reshape(-1), flat, experts)
        sorted_key, self.order = torch.sort(key, stable=True)
        # Expert e's rows start where the sorted keys reach e; its scale rows, padded to 128 each, after
        # the earlier experts' (offset_layout's layout, from the sorted keys in fewer launches).
        self.offsets = torch.searchsorted(sorted_key, torch.arange(experts + 1, device=flat.device), out_int32=True)
        padded = (self.offsets[1:] - self.offsets[:-1] + 127) // 128 * 128
        self.sf_offsets = torch.cumsum(padded, 0, dtype=torch.int32) - padded
        self.rows = flat.numel()
        self.sf_rows = sf_rows_capacity(self.rows, experts)
        self.token = (self.order // self.top_k).int()  # the x row of each routed row
        self.in_order = torch.arange(self.rows, dtype=torch.int32, device=flat.device)

    def gemm(
        self, x: torch.Tensor, source_row: torch.Tensor, input_scale: torch.Tensor, weight, weight_scale, alpha, out: torch.Tensor
    ) -> torch.Tensor:
        """out = the routed rows (x's rows source_row) times their experts' weights, with alpha."""
        q, sf = quantize_routed(x, source_row, self.offsets, self.sf_offsets, input_scale, self.sf_rows)
        return grouped_gemm_offsets(q, sf, weight, weight_scale, self.offsets, self.sf_offsets, out=out, alpha=alpha)

    def combine(self, down: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Each token's rows of down times its weights (dropped pairs' as 0), summed: [T, H] (a batched
        GEMM, accumulating in float32)."""
        row_of_pair = torch.empty_like(self.order).scatter_(0, self.order, torch.arange(self.rows, device=self.order.device))
        per_token = down[row_of_pair].view(-1, self.top_k, down.shape[1])
        weights = torch.where(self.kept, weights, 0.0).to(down.dtype)
        return torch.bmm(weights.unsqueeze(1), per_token).squeeze(1)


def activate(gate_up: torch.Tensor, activation: str) -> torch.Tensor:
    """SiLU(gate) * up or ReLU(gate)^2 * up of [rows, 2F] (gate's columns first), in float32, rounded
    to the input's dtype."""
    gate, up = gate_up.float().chunk(2, dim=-1)
    act = F.silu(gate) if activation == "silu" else F.relu(gate).square()
    return (act * up).to(gate_up.dtype)


def fused_moe(
    x: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor, experts: Experts, activation: str = "silu"
) -> torch.Tensor:
    """The MoE layer's output [T, H] in x's dtype: for each token t, the sum over its top-k pairs j of
    topk_weights[t, j] * expert topk_ids[t, j] applied to x[t] (see the module's description)."""
    check_fused_moe_input(x, topk_weights, topk_ids, experts, activation)
    if not topk_ids.shape[0]:
        return x.new_zeros(x.shape)
    routing = Routing(topk_ids, experts.num_experts)
    gate_up = x.new_empty((routing.rows, 2 * experts.intermediate))
    routing.gemm(x.contiguous(), routing.token, experts.w13_input_scale, experts.w13, experts.w13_scale, experts.w13_alpha, gate_up)
    down = x.new_zeros((routing.rows, experts.hidden))  # a dropped pair's row stays zero
    routing.gemm(
        activate(gate_up, activation), routing.in_order, experts.w2_input_scale, experts.w2, experts.w2_scale, experts.w2_alpha, down
    )
    return routing.combine(down, topk_weights)
