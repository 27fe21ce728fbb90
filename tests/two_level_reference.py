"""An independent NumPy implementation of the two-level quantization recipe (docs/MOE.md), written
from the formats' definitions: every E4M3 and E2M1 value enumerated, nearest taken, ties to the even
code; float32 steps as NumPy float32 operations. It shares no code with nvfp4/quantize.py."""

import numpy as np
import torch

E4M3_VALUES = np.array(
    [(b & 7) / 8 * 2.0**-6 if b >> 3 == 0 else (1 + (b & 7) / 8) * 2.0 ** ((b >> 3) - 7) for b in range(127)]
)  # 0x00-0x7E
E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def nearest_even(values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Index of the grid value nearest each value (ties: the even index), saturated at the grid's
    top; NaN gives 0."""
    v = np.nan_to_num(values.astype(np.float64), nan=0.0, posinf=grid[-1], neginf=0.0)
    v = np.minimum(v, grid[-1])
    upper = np.clip(np.searchsorted(grid, v), 1, len(grid) - 1)
    lower = upper - 1
    below, above = v - grid[lower], grid[upper] - v
    return np.where((below < above) | ((below == above) & (lower % 2 == 0)), lower, upper)


def quantize_two_level(x: torch.Tensor, global_scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x fp16 or bf16 [rows, K], global_scale float32 [rows] -> (codes uint8 [rows, K/2], low nibble
    first; scale bytes uint8 [rows, K/16]): s = E4M3((amax / 6) / G), code = E2M1(x / (s * G))."""
    rows, k = x.shape
    xf = x.float().numpy().reshape(rows, k // 16, 16)
    g = global_scale.astype(np.float32)[:, None]
    amax = np.where(np.isnan(xf), np.float32(np.inf), np.abs(xf)).max(-1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        wanted = (amax / np.float32(6)) / g
        scale_bytes = nearest_even(wanted, E4M3_VALUES)
        s = E4M3_VALUES[scale_bytes].astype(np.float32) * g
        quotient = np.abs(xf) / s[..., None]
    magnitude = np.where(s[..., None] > 0, nearest_even(quotient, E2M1_VALUES), 0)
    sign = (x.view(torch.int16).numpy().reshape(rows, k // 16, 16) < 0).astype(np.int64)
    codes = (magnitude | sign << 3).reshape(rows, k).astype(np.uint8)
    return codes[:, 0::2] | codes[:, 1::2] << 4, scale_bytes.astype(np.uint8)


def awkward_activations(rows: int, k: int, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, np.ndarray]:
    """Rows at scales from tiny to huge with zeros, subnormals, -0, inf and NaN, and per row a global
    scale from 2^-20 to 2^4 (so that some blocks saturate at 448 and some underflow to zero scales)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, k, generator=g) * torch.exp2(torch.randint(-30, 14, (rows, 1), generator=g).float())
    x[torch.rand(rows, k, generator=g) < 0.1] = 0.0
    x = x.to(dtype)
    x[0, :16] = torch.finfo(dtype).smallest_normal / 4
    x[1, :16] = -0.0
    x[2, 3], x[3, 5], x[4, 7] = float("nan"), float("inf"), -float("inf")
    scale = torch.exp2(torch.rand(rows, generator=g) * 24 - 20) * (1 + torch.rand(rows, generator=g))
    return x, scale.numpy().astype(np.float32)
