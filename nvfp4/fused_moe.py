"""A whole Mixture-of-Experts layer on NVFP4 experts, its routing kept on the GPU.

    y = nvfp4.fused_moe(x, topk_weights, topk_ids, experts)        # x [T, H] bf16 or fp16 -> y [T, H]

Each token's top-k (expert, weight) pairs become rows grouped by expert (a stable sort on the GPU);
the rows are quantized with their expert's input global scale, multiplied by w13 (gate and up) with
alpha in the GEMM's epilogue, activated (SiLU(gate) * up, or ReLU(gate)^2 * up), quantized again,
multiplied by w2, and each token's rows are summed with its weights in float32. Nothing reads a
GPU value on the host, so the layer runs on the caller's current queue, inside a CUDA graph capture
(call it once before capturing, or nvfp4.prepare()) and under torch.compile(fullgraph=True).
An id outside [0, E) drops its pair (expert parallelism's convention for experts held elsewhere).
"""
import torch
import torch.nn.functional as F

from .experts import Experts
from .moe import offset_layout, offset_scales, sf_rows_capacity
from .ops import grouped_gemm_offsets, quantize
from .quantize import plain_from_blocked

ACTIVATIONS = ("silu", "relu2")


def check_fused_moe_input(x, topk_weights, topk_ids, experts, activation) -> None:
    if not isinstance(experts, Experts):
        raise ValueError(f"nvfp4.fused_moe: experts must be an nvfp4.Experts (nvfp4.load_experts makes one), got {type(experts).__name__}")
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.dtype not in (torch.float16, torch.bfloat16) or x.shape[1] != experts.hidden:
        raise ValueError(f"nvfp4.fused_moe: x must be fp16 or bf16 [T, H] with H = {experts.hidden}, got "
                         f"{getattr(x, 'dtype', type(x).__name__)} {tuple(getattr(x, 'shape', ()))}")
    tokens = x.shape[0]
    if not isinstance(topk_ids, torch.Tensor) or topk_ids.dim() != 2 or topk_ids.shape[0] != tokens or topk_ids.dtype not in (
            torch.int32, torch.int64):
        raise ValueError(f"nvfp4.fused_moe: topk_ids must be int32 or int64 [T, top_k] with T = {tokens}, got "
                         f"{getattr(topk_ids, 'dtype', type(topk_ids).__name__)} {tuple(getattr(topk_ids, 'shape', ()))}")
    if not isinstance(topk_weights, torch.Tensor) or tuple(topk_weights.shape) != tuple(topk_ids.shape) or not topk_weights.is_floating_point():
        raise ValueError(f"nvfp4.fused_moe: topk_weights must be floating point of topk_ids' shape {tuple(topk_ids.shape)}, got "
                         f"{getattr(topk_weights, 'dtype', type(topk_weights).__name__)} {tuple(getattr(topk_weights, 'shape', ()))}")
    if not topk_ids.shape[1]:
        raise ValueError("nvfp4.fused_moe: top_k must be at least 1")
    devices = {x.device, topk_ids.device, topk_weights.device, experts.device}
    if len(devices) > 1:
        raise ValueError(f"nvfp4.fused_moe: x, topk_weights, topk_ids and the experts must be on one device, got {sorted(map(str, devices))}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"nvfp4.fused_moe: activation must be one of {ACTIVATIONS}, got {activation!r}")


class Routing:
    """Rows grouped by expert: row i is pair order[i] (token order[i] // top_k) of expert expert[i]
    (E for a dropped pair, sorted last and owned by no expert), with the offset form's layout."""

    def __init__(self, topk_ids: torch.Tensor, experts: int):
        flat = topk_ids.reshape(-1).long()
        key = torch.where((flat >= 0) & (flat < experts), flat, experts)
        self.key, self.order = torch.sort(key, stable=True)
        counts = torch.zeros(experts + 1, dtype=torch.int32, device=flat.device).scatter_add_(0, key, torch.ones_like(key, dtype=torch.int32))
        self.offsets, self.sf_offsets = offset_layout(counts[:experts])
        self.rows = flat.numel()
        self.sf_rows = sf_rows_capacity(self.rows, experts)
        self.expert = self.key.clamp(max=experts - 1)  # a dropped row's scale: any finite one (its result is not used)

    def quantize(self, rows: torch.Tensor, input_scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The grouped rows as FP4 with their expert's input global scale, scales in the offset layout."""
        q, sf = quantize(rows, global_scale=input_scale[self.expert].contiguous())
        plain = plain_from_blocked(sf.view(torch.uint8), self.rows).view(torch.float8_e4m3fn)
        return q, offset_scales(plain, self.offsets, self.sf_offsets, self.sf_rows)

    def gemm(self, rows: torch.Tensor, input_scale: torch.Tensor, weight, weight_scale, alpha, dtype) -> torch.Tensor:
        q, sf = self.quantize(rows, input_scale)
        return grouped_gemm_offsets(q, sf, weight, weight_scale, self.offsets, self.sf_offsets, alpha=alpha, out_dtype=dtype)


def activate(gate_up: torch.Tensor, activation: str) -> torch.Tensor:
    """SiLU(gate) * up or ReLU(gate)^2 * up of [rows, 2F] (gate's columns first), in float32, rounded
    to the input's dtype."""
    gate, up = gate_up.float().chunk(2, dim=-1)
    act = F.silu(gate) if activation == "silu" else F.relu(gate).square()
    return (act * up).to(gate_up.dtype)


def fused_moe(x: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor, experts: Experts, activation: str = "silu") -> torch.Tensor:
    """The MoE layer's output [T, H] in x's dtype: for each token t, the sum over its top-k pairs j of
    topk_weights[t, j] * expert topk_ids[t, j] applied to x[t] (see the module's description)."""
    check_fused_moe_input(x, topk_weights, topk_ids, experts, activation)
    tokens, top_k = topk_ids.shape
    if not tokens:
        return x.new_zeros(x.shape)
    routing = Routing(topk_ids, experts.num_experts)
    rows = x[routing.order // top_k]  # [T * top_k, H], grouped by expert
    gate_up = routing.gemm(rows, experts.w13_input_scale, experts.w13, experts.w13_scale, experts.w13_alpha, x.dtype)
    down = routing.gemm(activate(gate_up, activation), experts.w2_input_scale, experts.w2, experts.w2_scale, experts.w2_alpha, x.dtype)
    per_pair = torch.empty_like(down).index_copy_(0, routing.order, down).view(tokens, top_k, -1)  # back in (token, j) order
    kept = (topk_ids >= 0) & (topk_ids < experts.num_experts)
    weights = torch.where(kept, topk_weights.float(), 0.0)[..., None]
    return torch.where(kept[..., None], per_pair.float() * weights, 0.0).sum(1).to(x.dtype)
