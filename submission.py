"""NVFP4 block-scaled grouped GEMM: C_i = (A_i * SFA_i) @ (B_i * SFB_i)^T in fp16, for every group i.

One self-contained file (the leaderboard's unit). `custom_kernel` validates its input and
dispatches on the device: a portable PyTorch path (exact decode, fp32 accumulation) that
runs anywhere, the CPU included.
"""
import torch

from task import input_t, output_t


# ----------------------------------------------------------------------------- validation
def _check(cond: bool, group: int, what: str) -> None:
    if not cond:
        raise ValueError(f"nvfp4 grouped gemm, group {group}: {what}")


def validate(data: input_t) -> None:
    """Raise ValueError naming the group and the problem for any input the kernels cannot take."""
    if not (isinstance(data, (tuple, list)) and len(data) == 4):
        raise ValueError("input must be (abc_tensors, sfasfb_tensors, sfasfb_reordered_tensors, problem_sizes)")
    abc, _, sf_reordered, sizes = data
    if not (len(abc) == len(sf_reordered) == len(sizes)) or not sizes:
        raise ValueError(f"need one entry per group: {len(abc)} abc, {len(sf_reordered)} scale pairs, {len(sizes)} sizes")
    device = abc[0][0].device
    for g, ((a, b, c), (sfa, sfb), size) in enumerate(zip(abc, sf_reordered, sizes)):
        _check(len(size) == 4, g, f"problem size must be (M, N, K, L), got {size}")
        m, n, k, l = size
        _check(l == 1, g, f"L must be 1, got {l}")
        _check(k > 0 and k % 64 == 0, g, f"K must be a positive multiple of 64, got {k}")
        for name, t, dtypes, shape in (
            ("a", a, (torch.float4_e2m1fn_x2, torch.uint8), (m, k // 2, 1)),
            ("b", b, (torch.float4_e2m1fn_x2, torch.uint8), (n, k // 2, 1)),
            ("c", c, (torch.float16,), (m, n, 1)),
            ("sfa_reordered", sfa, (torch.float8_e4m3fn,), (32, 4, -(-m // 128), 4, k // 64, 1)),
            ("sfb_reordered", sfb, (torch.float8_e4m3fn,), (32, 4, -(-n // 128), 4, k // 64, 1)),
        ):
            _check(isinstance(t, torch.Tensor), g, f"{name} is not a tensor")
            _check(t.dtype in dtypes, g, f"{name} has dtype {t.dtype}, expected {' or '.join(map(str, dtypes))}")
            _check(tuple(t.shape) == shape, g, f"{name} has shape {tuple(t.shape)}, expected {shape}")
            _check(t.device == device, g, f"{name} is on {t.device}, group 0's a on {device}")


# ----------------------------------------------------------------------------- portable path
def _decode_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """4-bit codes (sign, 2 exponent bits, 1 mantissa bit) -> float32, from the format's definition."""
    codes = codes.to(torch.int32)
    exponent, mantissa = (codes >> 1) & 3, (codes & 1).to(torch.float32)
    magnitude = torch.where(exponent == 0, 0.5 * mantissa, torch.exp2(exponent - 1.0) * (1.0 + 0.5 * mantissa))
    return torch.where(codes & 8 != 0, -magnitude, magnitude)


def _plain_scales(reordered: torch.Tensor, rows: int, k: int) -> torch.Tensor:
    """Reordered [32, 4, rest, 4, rest_k, 1] scales -> plain [rows, K // 16] float32."""
    plain = reordered[..., 0].permute(2, 1, 0, 4, 3).reshape(reordered.shape[2] * 128, -1)
    return plain[:rows, : k // 16].to(torch.float32)


def _dequantize(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    codes = packed[..., 0].view(torch.uint8)
    values = torch.stack((_decode_e2m1(codes & 0xF), _decode_e2m1(codes >> 4)), dim=-1).flatten(1)
    return values * scales.repeat_interleave(16, dim=1)


def portable_kernel(data: input_t) -> output_t:
    """Exact decode, fp32 accumulation; reads the reordered scales, as the GPU kernels do."""
    abc, _, sf_reordered, sizes = data
    for (a, b, c), (sfa, sfb), (m, n, k, _) in zip(abc, sf_reordered, sizes):
        if m and n:
            lhs = _dequantize(a, _plain_scales(sfa, m, k))
            rhs = _dequantize(b, _plain_scales(sfb, n, k))
            c[..., 0] = (lhs @ rhs.T).to(torch.float16)
    return [c for _, _, c in abc]


# ----------------------------------------------------------------------------- dispatch
def select_path(device: torch.device):
    """The implementation for a device: the portable path on every device for now."""
    return portable_kernel


def custom_kernel(data: input_t) -> output_t:
    validate(data)
    return select_path(data[0][0][0].device)(data)
