"""The operands' layouts, and the one way the package holds a grouped GEMM's tensors.

A call's tensors travel as one flat list in a fixed order: a, b, c of every group, then sfa, sfb
of every group (the leaderboard's `abc` list flattened, then its reordered scale pairs), with the
sizes as (M, N, K, 1) per group, and optionally alpha, float32 [groups] on the device. a, b and c
are either the leaderboard's [rows, cols, 1] tensors (operand rank 3) or plain matrices (rank 2);
c is fp16 or bf16, one dtype for all groups; the scales are always in the leaderboard's reordered
layout, [32, 4, ceil(rows/128), 4, K/64, 1] (docs/PROBLEM.md, section 3).
"""

from itertools import chain

import torch

FP4_DTYPES = (torch.float4_e2m1fn_x2, torch.uint8)
OUT_DTYPES = (torch.float16, torch.bfloat16)  # c: every group's of one of them
E4M3_DTYPES = (torch.float8_e4m3fn,)
TENSOR_ROLES = (("a", FP4_DTYPES), ("b", FP4_DTYPES), ("c", OUT_DTYPES), ("sfa", E4M3_DTYPES), ("sfb", E4M3_DTYPES))


def described(t, with_dtype: bool = False) -> str:
    """A tensor's shape (after its dtype, with_dtype), or what was passed instead of a tensor: for error messages."""
    if not isinstance(t, torch.Tensor):
        return f"a {type(t).__name__}, not a tensor"
    return f"{t.dtype} {tuple(t.shape)}" if with_dtype else str(tuple(t.shape))


def described_placement(t: torch.Tensor) -> str:
    """A tensor's device, and that it is not contiguous where so: for error messages."""
    return f"{t.device}" + ("" if t.is_contiguous() else ", not contiguous")


def group_shapes(m: int, n: int, k: int, operand_rank: int) -> tuple:
    """The shapes of a group's a, b, c, sfa and sfb."""
    l_dim = (1,) if operand_rank == 3 else ()
    return (
        (m, k // 2, *l_dim),
        (n, k // 2, *l_dim),
        (m, n, *l_dim),
        (32, 4, -(-m // 128), 4, k // 64, 1),
        (32, 4, -(-n // 128), 4, k // 64, 1),
    )


def packed_scale_strides(k: int) -> tuple:
    """The first five strides of a reordered scale tensor in the layout the kernels read: its memory
    is [ceil(rows/128)][K/64][32][4][4] bytes."""
    return (16, 4, (k // 64) * 512, 1, 512)


def from_leaderboard(data) -> tuple[list, list]:
    """The leaderboard's (abc, sfasfb, sfasfb_reordered, problem_sizes) as (tensors, sizes), operand rank 3."""
    abc, _, scales, sizes = data
    return [*chain.from_iterable(abc), *chain.from_iterable(scales)], sizes


def group_tensors(tensors: list, g: int) -> tuple:
    """Group g's (a, b, c, sfa, sfb) from a call's flat tensor list."""
    groups = len(tensors) // 5
    return (*tensors[3 * g : 3 * g + 3], *tensors[3 * groups + 2 * g : 3 * groups + 2 * g + 2])


def matrix(t: torch.Tensor) -> torch.Tensor:
    """An operand as a plain matrix: the leaderboard's [rows, cols, 1] without its last dimension."""
    return t[..., 0] if t.dim() == 3 else t


def reordered_from_plain(plain: torch.Tensor) -> torch.Tensor:
    """Scales [rows, K/16] (E4M3, K/16 a multiple of 4) in the reordered layout: a view of packed
    memory, rows padded to a multiple of 128 with zeros."""
    if not isinstance(plain, torch.Tensor) or plain.dim() != 2 or plain.shape[1] % 4 or plain.element_size() != 1:
        raise ValueError(
            f"nvfp4.reorder_scales: plain scales must be E4M3 [rows, K/16] with K a multiple of 64 (K/16 a multiple of 4), "
            f"got {described(plain, with_dtype=True)}"
        )
    rows, cols = plain.shape
    row_blocks = -(-rows // 128)
    padded = torch.zeros((row_blocks * 128, cols), dtype=torch.uint8, device=plain.device)
    padded[:rows] = plain.view(torch.uint8)
    memory = padded.view(row_blocks, 4, 32, cols // 4, 4).permute(0, 3, 2, 1, 4).contiguous()  # [rb][kb][32][4][4]
    return memory.view(torch.float8_e4m3fn).unsqueeze(0).permute(3, 4, 1, 5, 2, 0)


def plain_scales(reordered: torch.Tensor, rows: int, k: int) -> torch.Tensor:
    """Reordered [32, 4, ceil(rows/128), 4, K/64, 1] scales -> plain [rows, K/16] float32."""
    plain = reordered[..., 0].permute(2, 1, 0, 4, 3).reshape(reordered.shape[2] * 128, reordered.shape[4] * 4)
    return plain[:rows, : k // 16].to(torch.float32)
