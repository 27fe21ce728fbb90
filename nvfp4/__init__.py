"""NVFP4 block-scaled grouped GEMM: per group, alpha * (A * SFA) @ (B * SFB)^T in fp16 or bf16, exact,
and the MoE layer built on it.

    import nvfp4
    out = nvfp4.grouped_gemm(a, b, sfa, sfb)    # torch.ops.nvfp4.grouped_gemm
    experts = nvfp4.load_experts("model.safetensors", "model.layers.3.mlp.experts")
    y = nvfp4.fused_moe(x, topk_weights, topk_ids, experts)

On an H100/H200 (sm_90a) and a B200 (sm_100a) a CUDA kernel, JIT-built on first use and cached in
torch's extension cache; elsewhere a portable PyTorch path. Launches go to the caller's current
queue; calls can be captured in CUDA graphs and traced by torch.compile. The leaderboard's
submission.py is generated from this package (tools/bundle.py).
"""

from .checkpoint import load_experts
from .dispatch import path_in_use, prepare
from .experts import Experts
from .fused_moe import fused_moe
from .layout import reordered_from_plain as reorder_scales
from .leaderboard import custom_kernel
from .moe import offset_layout, offset_scales, sf_rows_capacity
from .ops import grouped_gemm, grouped_gemm_masked, grouped_gemm_offsets, quantize
from .quantize import blocked_from_plain, plain_from_blocked, reordered_from_blocked

__all__ = [
    "Experts",
    "blocked_from_plain",
    "custom_kernel",
    "fused_moe",
    "grouped_gemm",
    "grouped_gemm_masked",
    "grouped_gemm_offsets",
    "load_experts",
    "offset_layout",
    "offset_scales",
    "path_in_use",
    "plain_from_blocked",
    "prepare",
    "quantize",
    "reorder_scales",
    "reordered_from_blocked",
    "sf_rows_capacity",
]
