"""The problem's reference: input generation, the reference kernel and the correctness check.

Protocol-compatible with the leaderboard's reference (docs/PROBLEM.md sections 2-4): the same
distributions, layouts and order of random draws, so a seed gives the same tensors. It runs
on any machine: FP4 `torch._scaled_mm` where the GPU has FP4 tensor cores (sm_100 class),
an exact decode with fp32 accumulation everywhere else, the CPU included.
"""

import torch

from task import input_t, output_t
from utils import get_device, make_match_reference

SF_VEC = 16  # K elements per scale factor
ATOM_ROWS, ATOM_SF_COLS = 128, 4  # one reordered scale atom: 128 rows x 4 scale columns, 512 bytes

# E2M1 code -> value; bit 3 is the sign, code 8 is -0.
FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


# ----------------------------------------------------------------------------- layouts
def to_blocked(sf: torch.Tensor) -> torch.Tensor:
    """Flatten a plain [MN, K // 16] scale matrix into the tensor cores' blocked order (section 3)."""
    rows, cols = sf.shape
    rest_mn, rest_k = ceil_div(rows, ATOM_ROWS), ceil_div(cols, ATOM_SF_COLS)
    padded = torch.nn.functional.pad(sf.view(torch.uint8), (0, rest_k * 4 - cols, 0, rest_mn * 128 - rows))
    atoms = padded.view(rest_mn, 4, 32, rest_k, 4).permute(0, 3, 2, 1, 4)  # [rb][kb][r%32][(r%128)//32][j%4]
    return atoms.reshape(-1).view(sf.dtype)


def reorder_scales(sf: torch.Tensor, device: torch.device) -> torch.Tensor:
    """The reordered scale tensor the harness hands to submissions, as the leaderboard builds it.

    Memory is [L][rest_mn][rest_k][32][4][4]; the returned view has shape
    [32, 4, rest_mn, 4, rest_k, L]. Padding holds randint(1, 3) values drawn on `device`
    over the whole padded shape (the leaderboard's draw), overwritten where real scales go.
    """
    mn, sf_k, l = sf.shape
    rest_mn, rest_k = ceil_div(mn, ATOM_ROWS), ceil_div(sf_k, ATOM_SF_COLS)
    mem = torch.randint(1, 3, (l, rest_mn, rest_k, 32, 4, 4), dtype=torch.int8, device=device)
    mem = mem.to(torch.float8_e4m3fn)
    # The same memory seen as a padded plain matrix: [l][rb][(r%128)//32][r%32][kb][j%4].
    plain_view = mem.permute(0, 1, 4, 3, 2, 5)
    padded = plain_view.reshape(l, rest_mn * 128, rest_k * 4).clone()
    padded[:, :mn, :sf_k] = sf.permute(2, 0, 1).to(device)
    plain_view.copy_(padded.view(l, rest_mn, 4, 32, rest_k, 4))
    return mem.permute(3, 4, 1, 5, 2, 0)


# ----------------------------------------------------------------------------- generation
def _official_fp4(l: int, mn: int, k: int, device) -> torch.Tensor:
    codes = torch.randint(255, size=(l, mn, k // 2), dtype=torch.uint8, device=device)
    codes &= 0b1011_1011  # each nibble keeps its sign and two low bits: {0, +-0.5, +-1, +-1.5}
    return codes.permute(1, 2, 0).view(torch.float4_e2m1fn_x2)


def _official_scales(l: int, mn: int, k: int) -> torch.Tensor:
    sf = torch.randint(1, 3, (l, mn, ceil_div(k, SF_VEC)), dtype=torch.int8)
    return sf.to(torch.float8_e4m3fn).permute(1, 2, 0)


def _full_range_fp4(l: int, mn: int, k: int, device) -> torch.Tensor:
    codes = torch.randint(256, size=(l, mn, k // 2), dtype=torch.uint8, device=device)
    return codes.permute(1, 2, 0).view(torch.float4_e2m1fn_x2)


def _full_range_scales(l: int, mn: int, k: int, wide: bool) -> torch.Tensor:
    """Positive E4M3 scales spread like quantized data: a log-normal level per row, noise per block.

    On the `wide` side 5% of the blocks take a uniformly random positive finite code
    (0x01..0x7E), so the whole code range up to 448 is exercised; the other side stays
    small (at most 2^-2, subnormals included) so that no product of two scales overflows
    the fp16 output.
    """
    sf_k = ceil_div(k, SF_VEC)
    level, top = (-1.0, 8.8) if wide else (-5.0, -2.0)
    row_level = torch.randn(l, mn, 1) * 1.5 + level
    log2_scale = (row_level + torch.randn(l, mn, sf_k)).clamp(-9.0, top)
    sf = torch.exp2(log2_scale).to(torch.float8_e4m3fn).view(torch.uint8)
    if wide:
        uniform = torch.randint(1, 0x7F, (l, mn, sf_k), dtype=torch.uint8)
        sf = torch.where(torch.rand(l, mn, sf_k) < 0.05, uniform, sf)
    return sf.view(torch.float8_e4m3fn).permute(1, 2, 0)


def _generate(m, n, k, g, seed, device, full_range: bool) -> input_t:
    if not (len(m) == len(n) == len(k) == g):
        raise ValueError(f"m, n and k need g={g} entries each, got {len(m)}, {len(n)}, {len(k)}")
    device = torch.device(device) if device is not None else get_device()
    torch.manual_seed(seed)
    l = 1
    abc, sfs, sfs_reordered, sizes = [], [], [], []
    for group, (mi, ni, ki) in enumerate(zip(m, n, k)):
        if full_range:
            a, b = _full_range_fp4(l, mi, ki, device), _full_range_fp4(l, ni, ki, device)
        else:
            a, b = _official_fp4(l, mi, ki, device), _official_fp4(l, ni, ki, device)
        c = torch.randn((l, mi, ni), dtype=torch.float16, device=device).permute(1, 2, 0)
        if full_range:
            a_wide = group % 2 == 0  # the side with the full code range alternates between groups
            sfa, sfb = _full_range_scales(l, mi, ki, a_wide), _full_range_scales(l, ni, ki, not a_wide)
        else:
            sfa, sfb = _official_scales(l, mi, ki), _official_scales(l, ni, ki)
        abc.append((a, b, c))
        sfs.append((sfa, sfb))
        sfs_reordered.append((reorder_scales(sfa, device), reorder_scales(sfb, device)))
        sizes.append((mi, ni, ki, l))
    return abc, sfs, sfs_reordered, sizes


def generate_input(m: tuple, n: tuple, k: tuple, g: int, seed: int, device=None) -> input_t:
    """The official inputs for one case (docs/PROBLEM.md section 2), on CUDA if present, else the CPU.

    The plain-layout scales stay on the CPU, as on the leaderboard.
    """
    return _generate(m, n, k, g, seed, device, full_range=False)


def generate_full_range_input(m: tuple, n: tuple, k: tuple, g: int, seed: int, device=None) -> input_t:
    """Inputs like real NVFP4 data: all 16 FP4 codes and arbitrary positive E4M3 scales."""
    return _generate(m, n, k, g, seed, device, full_range=True)


# ----------------------------------------------------------------------------- reference
def decode_fp4(packed: torch.Tensor) -> torch.Tensor:
    """[MN, K // 2] packed E2M1 (low nibble first) -> [MN, K] float32, exactly."""
    codes = packed.view(torch.uint8)
    lut = torch.tensor(FP4_VALUES, dtype=torch.float32, device=codes.device)
    pairs = torch.stack((lut[(codes & 0xF).long()], lut[(codes >> 4).long()]), dim=-1)
    return pairs.reshape(codes.shape[0], 2 * codes.shape[1])


def dequantize(packed: torch.Tensor, sf: torch.Tensor) -> torch.Tensor:
    """[MN, K // 2] FP4 with [MN, K // 16] E4M3 scales -> [MN, K] float32 values times scales (exact)."""
    values = decode_fp4(packed)
    scales = sf.to(device=values.device, dtype=torch.float32)
    return values * scales.repeat_interleave(SF_VEC, dim=1)[:, : values.shape[1]]


def has_fp4_scaled_mm(device: torch.device) -> bool:
    """FP4 `torch._scaled_mm` needs sm_100-class tensor cores."""
    return device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 10


def _group_scaled_mm(a, b, sfa, sfb) -> torch.Tensor:
    return torch._scaled_mm(
        a.view(torch.float4_e2m1fn_x2),
        b.transpose(0, 1).view(torch.float4_e2m1fn_x2),
        to_blocked(sfa).to(a.device),
        to_blocked(sfb).to(a.device),
        bias=None,
        out_dtype=torch.float16,
    )


def _group_decoded(a, b, sfa, sfb) -> torch.Tensor:
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return (dequantize(a, sfa) @ dequantize(b, sfb).T).to(torch.float16)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


def ref_kernel(data: input_t, use_scaled_mm: bool | None = None) -> output_t:
    """C_i = A_i @ B_i^T with block scales, written into each group's c and returned.

    `use_scaled_mm=None` picks FP4 `_scaled_mm` where the device has it and the exact
    decode elsewhere; True or False forces one path (for comparing them).
    """
    abc_tensors, sf_tensors, _, problem_sizes = data
    out = []
    for (a, b, c), (sfa, sfb), (m, n, k, l) in zip(abc_tensors, sf_tensors, problem_sizes):
        scaled_mm = has_fp4_scaled_mm(a.device) if use_scaled_mm is None else use_scaled_mm
        for li in range(l):
            if m == 0 or n == 0:
                continue
            args = (a[:, :, li], b[:, :, li], sfa[:, :, li], sfb[:, :, li])
            c[:, :, li] = _group_scaled_mm(*args) if scaled_mm else _group_decoded(*args)
        out.append(c)
    return out


TOLERANCE = {"rtol": 1e-03, "atol": 1e-03}
check_implementation = make_match_reference(ref_kernel, **TOLERANCE)
