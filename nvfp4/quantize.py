"""NVFP4 quantization of activations: fp16 or bf16 [..., M, K] to FP4 codes and E4M3 block scales.

    q, sf = nvfp4.quantize(x)                  # q [..., M, K/2] float4_e2m1fn_x2, sf [..., ceil(M/128), K/64, 32, 4, 4]
    q, sf = nvfp4.quantize(x, masked_m)        # x [E, max_m, K]: only rows below masked_m[e] are written
    q, sf = nvfp4.quantize(x, global_scale=g)  # two-level: x ~ code * sf * g (g as checkpoints store input_scale)

Per 16 elements of a row: amax = max |x| in float32; the scale s = amax / 6 (a float32 quotient)
rounded to nearest-even E4M3 and saturated at 448; each code the nearest-even E2M1 value of x / s
(a float32 quotient), saturated at 6. With a global scale G: s = E4M3((amax / 6) / G) and each code
that of x / (s * G), every step a float32 operation (G = 1 gives the same as none). The scales come
in the blocked form, the memory of the reordered layout (docs/MOE.md). The CUDA kernel (csrc/quantize.cuh) and quantize_portable() here
agree bit for bit; what zeros, subnormals, inf and NaN become is in docs/MOE.md.
"""

import ctypes
import math

import torch

from .boundary import QuantizeDesc
from .kernel_path import KernelPath
from .launch_queue import current_queue
from .layout import described, described_placement

E2M1_TIES = ((0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False), (3.5, True), (5.0, False))  # (threshold, inclusive)


def blocked_scale_shape(rows: int, k: int) -> tuple:
    """The blocked form of a [rows, K/16] scale matrix: [ceil(rows/128)][K/64][32][4][4] bytes."""
    return (-(-rows // 128), k // 64, 32, 4, 4)


def check_scale_bytes(what: str, t, shape_text: str, dims_at_least: int) -> None:
    """ValueError naming `what` unless t is a tensor of one-byte scales (E4M3, or any dtype of one
    byte: the layouts only move bytes) with at least dims_at_least dimensions."""
    if not isinstance(t, torch.Tensor) or t.dim() < dims_at_least or t.element_size() != 1:
        raise ValueError(f"nvfp4.{what}: scales must be one byte each (E4M3) {shape_text}, got {described(t, with_dtype=True)}")


def blocked_from_plain(plain: torch.Tensor) -> torch.Tensor:
    """Plain scales [..., rows, K/16] (rows padded to 128 with zeros) in the blocked form."""
    check_scale_bytes("blocked_from_plain", plain, "[..., rows, K/16] with K a multiple of 64", 2)
    if plain.shape[-1] % 4:
        raise ValueError(f"nvfp4.blocked_from_plain: K/16 must be a multiple of 4 (K of 64), got {tuple(plain.shape)}")
    *lead, rows, cols = plain.shape
    blocks = -(-rows // 128)
    padded = plain.new_zeros((*lead, blocks * 128, cols))
    padded[..., :rows, :] = plain
    return (
        padded.view(*lead, blocks, 4, 32, cols // 4, 4).transpose(-4, -2).contiguous()
    )  # [.., R, 4, 32, K/64, 4] -> [.., R, K/64, 32, 4, 4]


def check_blocked(what: str, blocked, rows: int) -> None:
    """ValueError naming `what` unless blocked is [..., R, K/64, 32, 4, 4] scales holding `rows` rows."""
    check_scale_bytes(what, blocked, "[..., R, K/64, 32, 4, 4]", 5)
    if tuple(blocked.shape[-3:]) != (32, 4, 4) or not 0 <= rows <= blocked.shape[-5] * 128:
        raise ValueError(f"nvfp4.{what}: {rows} rows of scales [..., R, K/64, 32, 4, 4] (R = ceil(rows/128)), got {tuple(blocked.shape)}")


def plain_from_blocked(blocked: torch.Tensor, rows: int) -> torch.Tensor:
    """Blocked scales [..., R, K/64, 32, 4, 4] as plain [..., rows, K/16]."""
    check_blocked("plain_from_blocked", blocked, rows)
    *lead, blocks, k_blocks = blocked.shape[:-3]
    plain = blocked.transpose(-4, -2).reshape(*lead, blocks * 128, k_blocks * 4)
    return plain[..., :rows, :]


def reordered_from_blocked(blocked: torch.Tensor, rows: int) -> torch.Tensor:
    """Blocked [R, K/64, 32, 4, 4] scales as the list form's reordered view [32, 4, ceil(rows/128),
    4, K/64, 1] of their first `rows` rows (no copy)."""
    check_blocked("reordered_from_blocked", blocked, rows)
    if blocked.dim() != 5:
        raise ValueError(f"nvfp4.reordered_from_blocked: scales must be [R, K/64, 32, 4, 4], got {tuple(blocked.shape)}")
    return blocked[: -(-rows // 128)].permute(2, 3, 0, 4, 1).unsqueeze(-1)


def _rows_mask(masked_m: torch.Tensor | None, batch: int, rows: int, device) -> torch.Tensor | None:
    if masked_m is None:
        return None
    return torch.arange(rows, device=device)[None, :] < masked_m.reshape(batch, 1).clamp(0, rows)


def quantize_portable(
    x: torch.Tensor, masked_m: torch.Tensor | None, q: torch.Tensor, sf: torch.Tensor, global_scale: torch.Tensor | None = None
) -> None:
    """The recipe in PyTorch, into q and sf (shapes as quantize() returns them); rows a mask leaves
    out keep what q and sf hold. No host sync: it runs inside a CUDA graph capture too."""
    *lead, rows, k = x.shape
    batch = math.prod(lead)  # not reshape's -1, which cannot tell the batch when rows is 0
    xs = x.reshape(batch, rows, k // 16, 16).float()
    amax = torch.where(torch.isnan(xs), torch.inf, xs.abs()).amax(-1)
    if global_scale is None:
        scales = (amax / 6.0).clamp(max=448.0).to(torch.float8_e4m3fn)
        s = scales.float().unsqueeze(-1)
    else:
        g = global_scale_rows(global_scale, x)[..., None]  # [batch, rows, 1]
        scales = (amax / 6.0 / g).clamp(max=448.0).to(torch.float8_e4m3fn)
        s = (scales.float() * g).unsqueeze(-1)
    v = (xs / s).abs()
    magnitude = sum(((v >= t) if inclusive else (v > t)).to(torch.uint8) for t, inclusive in E2M1_TIES)
    magnitude = torch.where(s > 0, magnitude, torch.zeros_like(magnitude))
    # The sign from x's own bits: a conversion to float32 may drop a NaN's (the GPU's does for fp16's
    # signaling NaNs).
    sign = x.view(torch.int16).reshape(xs.shape) < 0
    codes = (magnitude | (sign.to(torch.uint8) << 3)).reshape(batch, rows, k)
    packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
    blocked = blocked_from_plain(scales.view(torch.uint8))
    q_bytes, sf_bytes = q.view(torch.uint8).reshape(batch, rows, k // 2), sf.view(torch.uint8).reshape(batch, *blocked.shape[1:])
    mask = _rows_mask(masked_m, batch, rows, x.device)
    if mask is None:
        q_bytes.copy_(packed)
        sf_bytes.copy_(blocked)
        return
    q_bytes.copy_(torch.where(mask[..., None], packed, q_bytes))
    sf_mask = blocked_from_plain(mask[..., None].expand(batch, rows, k // 16).to(torch.uint8)).bool()
    sf_bytes.copy_(torch.where(sf_mask, blocked, sf_bytes))


def global_scale_strides(global_scale: torch.Tensor, x: torch.Tensor) -> tuple[int, int]:
    """(per batch entry, per row) strides of a global scale checked by check_quantize_input."""
    rows = x.shape[-2]
    if global_scale.numel() == 1:
        return 0, 0
    if global_scale.dim() == 1 and x.dim() == 3 and global_scale.shape[0] == x.shape[0]:
        return 1, 0
    return rows, 1


def global_scale_rows(global_scale: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The global scale of every (batch entry, row) of x, float32 [batch, rows] (a broadcast view)."""
    *lead, rows, _ = x.shape
    batch = math.prod(lead)
    if global_scale_strides(global_scale, x)[1]:  # one per row
        return global_scale.reshape(batch, rows)
    return global_scale.reshape(-1, 1).expand(batch, rows)


def check_quantize_input(x, masked_m, global_scale=None) -> None:
    if not isinstance(x, torch.Tensor) or x.dtype not in (torch.float16, torch.bfloat16) or x.dim() < 2:
        raise ValueError(f"nvfp4.quantize: x must be an fp16 or bf16 tensor [..., M, K], got {described(x, with_dtype=True)}")
    if x.shape[-1] % 64 or not x.shape[-1]:
        raise ValueError(f"nvfp4.quantize: K={x.shape[-1]} must be a positive multiple of 64")
    if masked_m is not None:
        if x.dim() != 3 or not isinstance(masked_m, torch.Tensor) or masked_m.dtype != torch.int32 or masked_m.shape != (x.shape[0],):
            raise ValueError(
                f"nvfp4.quantize: with masked_m, x must be [E, max_m, K] and masked_m int32 [E]; got x "
                f"{tuple(x.shape)}, masked_m {described(masked_m, with_dtype=True)}"
            )
        if masked_m.device != x.device:
            raise ValueError(f"nvfp4.quantize: masked_m is on {masked_m.device}, x on {x.device}")
    if global_scale is not None:
        lead = x.shape[:-1]
        shapes = {(), (1,), tuple(lead)} | ({(x.shape[0],)} if x.dim() == 3 else set())
        if not isinstance(global_scale, torch.Tensor) or global_scale.dtype != torch.float32 or tuple(global_scale.shape) not in shapes:
            raise ValueError(
                f"nvfp4.quantize: global_scale must be float32: one value ([] or [1]), one per batch entry of a 3-D x "
                f"([E]) or one per row ({list(lead)}); got {described(global_scale, with_dtype=True)} for x {tuple(x.shape)}"
            )
        if global_scale.device != x.device or not global_scale.is_contiguous():
            raise ValueError(
                f"nvfp4.quantize: global_scale must be contiguous and on {x.device} with x, got {described_placement(global_scale)}"
            )


def new_quantize_outputs(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    *lead, rows, k = x.shape
    return (
        x.new_empty((*lead, rows, k // 2), dtype=torch.float4_e2m1fn_x2),
        x.new_empty((*lead, *blocked_scale_shape(rows, k)), dtype=torch.float8_e4m3fn),
    )


def quantize_into(
    x: torch.Tensor,
    masked_m: torch.Tensor | None,
    q: torch.Tensor,
    sf: torch.Tensor,
    kernel: KernelPath | None,
    global_scale: torch.Tensor | None = None,
) -> None:
    """quantize() into q and sf: the CUDA kernel of `kernel` on the caller's current queue, or the
    portable recipe."""
    if kernel is None or not x.is_contiguous():
        quantize_portable(x, masked_m, q, sf, global_scale)
        return
    *lead, rows, _ = x.shape
    strides = global_scale_strides(global_scale, x) if global_scale is not None else (0, 0)
    launch_quantize(kernel, x, q, sf, math.prod(lead), rows, masked_m, global_scale, strides)


def launch_quantize(
    kernel: KernelPath,
    x: torch.Tensor,
    q: torch.Tensor,
    sf: torch.Tensor,
    batch: int,
    rows: int,
    masked_m=None,
    global_scale=None,
    strides=(0, 0),
    routed=None,
) -> None:
    """The quantization kernel on the caller's current queue (its arguments:
    nvfp4/boundary.py's QuantizeDesc); routed: (source_row, offsets, sf_offsets), int32 on the GPU, of the routed form."""
    pointer = lambda t: t.data_ptr() if t is not None else 0
    source_row, offsets, sf_offsets = routed or (None, None, None)
    experts = sf_offsets.shape[0] if sf_offsets is not None else 0
    desc = QuantizeDesc(
        x=x.data_ptr(),
        q=q.data_ptr(),
        sf=sf.data_ptr(),
        masked_m=pointer(masked_m),
        batch=batch,
        rows=rows,
        k=x.shape[-1],
        bf16=int(x.dtype == torch.bfloat16),
        global_scale=pointer(global_scale),
        global_scale_batch_stride=strides[0],
        global_scale_row_stride=strides[1],
        source_row=pointer(source_row),
        offsets=pointer(offsets),
        sf_offsets=pointer(sf_offsets),
        experts=experts,
    )
    err = ctypes.create_string_buffer(512)
    if kernel.lib.nvfp4_quantize(desc, kernel.num_sms, current_queue(x.get_device()), err, len(err)):
        raise RuntimeError(f"nvfp4.quantize: {err.value.decode()}")
