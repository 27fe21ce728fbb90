"""The portable path (exact decode, fp32 accumulation, any device) and the FP4 torch._scaled_mm path."""

import torch

from .layout import group_tensors, matrix, plain_scales


def decode_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """4-bit codes (sign, 2 exponent bits, 1 mantissa bit) -> float32, from the format's definition."""
    codes = codes.to(torch.int32)
    exponent, mantissa = (codes >> 1) & 3, (codes & 1).to(torch.float32)
    magnitude = torch.where(exponent == 0, 0.5 * mantissa, torch.exp2(exponent - 1.0) * (1.0 + 0.5 * mantissa))
    return torch.where(codes & 8 != 0, -magnitude, magnitude)


def dequantize(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """FP4 [rows, K/2] (or [rows, K/2, 1]), low nibble first, with plain [rows, K/16] scales -> float32 [rows, K]."""
    codes = matrix(packed).view(torch.uint8)
    values = torch.stack((decode_e2m1(codes & 0xF), decode_e2m1(codes >> 4)), dim=-1).flatten(1)
    return values * scales.repeat_interleave(16, dim=1)


def scaled(product: torch.Tensor, alpha: torch.Tensor | None, g: int) -> torch.Tensor:
    """A group's fp32 product times its alpha (no host read of alpha: it may live on a GPU)."""
    return product if alpha is None else product * alpha[g]


def portable_kernel(tensors: list, sizes, alpha=None) -> None:
    """Exact decode, fp32 accumulation, times alpha[g] where given, rounded to c's dtype; reads the
    reordered scales, as the GPU kernels do."""
    for g, (m, n, k, _) in enumerate(sizes):
        if m and n:
            a, b, c, sfa, sfb = group_tensors(tensors, g)
            product = dequantize(a, plain_scales(sfa, m, k)) @ dequantize(b, plain_scales(sfb, n, k)).T
            matrix(c).copy_(scaled(product, alpha, g))


def blocked_scales(reordered: torch.Tensor) -> torch.Tensor:
    """A reordered [32, 4, rest, 4, rest_k, 1] scale view as the flat blocked tensor `_scaled_mm`
    takes: its memory order [L][rest][rest_k][32][4][4] (docs/PROBLEM.md section 3); no copy when packed."""
    return reordered.permute(5, 2, 4, 0, 1, 3).reshape(-1)


def scaled_mm_kernel(tensors: list, sizes, alpha=None) -> None:
    """Per-group FP4 block-scaled `torch._scaled_mm` (sm_100-class GPUs only), as the reference
    computes there: the fallback when the sm_100a kernel fails its first-use self-check."""
    for g, (m, n, _, _) in enumerate(sizes):
        if m and n:
            a, b, c, sfa, sfb = group_tensors(tensors, g)
            lhs, rhs = matrix(a).view(torch.float4_e2m1fn_x2), matrix(b).view(torch.float4_e2m1fn_x2)
            out_dtype = c.dtype if alpha is None else torch.float32
            product = torch._scaled_mm(lhs, rhs.T, blocked_scales(sfa), blocked_scales(sfb), out_dtype=out_dtype)
            matrix(c).copy_(scaled(product, alpha, g))
