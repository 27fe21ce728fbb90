"""NVFP4 block-scaled grouped GEMM: per group, (A * SFA) @ (B * SFB)^T in fp16, exact.

    import nvfp4
    out = nvfp4.grouped_gemm(a, b, sfa, sfb)    # torch.ops.nvfp4.grouped_gemm

On an H100/H200 (sm_90a) and a B200 (sm_100a) a CUDA kernel, JIT-built on first use and cached in
torch's extension cache; elsewhere a portable PyTorch path. Launches go to the caller's current
queue; calls can be captured in CUDA graphs and traced by torch.compile. The leaderboard's
submission.py is generated from this package (tools/bundle.py).
"""
from .dispatch import path_in_use, prepare
from .layout import reordered_from_plain as reorder_scales
from .leaderboard import custom_kernel
from .ops import grouped_gemm

__all__ = ["grouped_gemm", "reorder_scales", "prepare", "path_in_use", "custom_kernel"]
