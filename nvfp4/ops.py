"""The library's ops, registered with torch.library (torch.ops.nvfp4.*) with fake implementations,
so that torch.compile traces through them and CUDA graphs capture them.

    out = nvfp4.grouped_gemm(a, b, sfa, sfb)            # a new fp16 [M, N] per group
    nvfp4.grouped_gemm(a, b, sfa, sfb, out=out)         # written into the caller's tensors

Per group g: a[g] FP4 [M, K/2] (float4_e2m1fn_x2 or uint8, two codes a byte, low nibble first),
b[g] FP4 [N, K/2], sfa[g] and sfb[g] their E4M3 scales (one per 16 K elements) in the reordered
layout the leaderboard gives, [32, 4, ceil(rows/128), 4, K/64, 1] (reorder_scales makes it from
plain [rows, K/16] scales); out[g] = (a * sfa) @ (b * sfb)^T in fp16, [M, N]. K is a positive
multiple of 64; M and N may be 0. Everything runs on the caller's current queue of the current
device, where the tensors must be (CPU tensors take the portable path).
"""
from itertools import chain

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode as _current_dispatch_mode

from .dispatch import run
from .moe import kernel_for, masked_into, masked_problem, offsets_into, offsets_problem
from .quantize import check_quantize_input, new_quantize_outputs, quantize_into


def _call(a, b, sfa, sfb, out) -> tuple[list, list]:
    """The op's arguments as the package's (tensors, sizes); ValueError for lists that do not match."""
    groups = len(a)
    if not groups or any(len(x) != groups for x in (b, sfa, sfb, out)):
        raise ValueError(f"nvfp4.grouped_gemm: a, b, sfa, sfb and out need one tensor per group: {len(a)}, {len(b)}, {len(sfa)}, "
                         f"{len(sfb)}, {len(out)}")
    sizes = []
    for g, (x, y) in enumerate(zip(a, b)):
        if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.dim() == 2 and y.dim() == 2):
            raise ValueError(f"nvfp4 grouped gemm, group {g}: a and b must be 2-D tensors, [M, K/2] and [N, K/2]")
        sizes.append((x.shape[0], y.shape[0], 2 * x.shape[1], 1))
    return [*chain.from_iterable(zip(a, b, out)), *chain.from_iterable(zip(sfa, sfb))], sizes


def _new_outputs(a, b) -> list[torch.Tensor]:
    return [x.new_empty((x.shape[0], y.shape[0]), dtype=torch.float16) for x, y in zip(a, b)]


def _into(a: list[torch.Tensor], b: list[torch.Tensor], sfa: list[torch.Tensor], sfb: list[torch.Tensor],
          out: list[torch.Tensor]) -> None:
    """The grouped GEMM into the caller's out tensors."""
    run(*_call(a, b, sfa, sfb, out), 2)


def _new(a: list[torch.Tensor], b: list[torch.Tensor], sfa: list[torch.Tensor], sfb: list[torch.Tensor]) -> list[torch.Tensor]:
    """The grouped GEMM into new fp16 [M, N] tensors."""
    out = _new_outputs(a, b)
    _into(a, b, sfa, sfb, out)
    return out


grouped_gemm_out = torch.library.custom_op("nvfp4::grouped_gemm_out", _into, mutates_args=("out",))
grouped_gemm_new = torch.library.custom_op("nvfp4::grouped_gemm", _new, mutates_args=())


@grouped_gemm_out.register_fake
def _grouped_gemm_out_fake(a, b, sfa, sfb, out) -> None:
    return None


@grouped_gemm_new.register_fake
def _grouped_gemm_fake(a, b, sfa, sfb) -> list[torch.Tensor]:
    return _new_outputs(a, b)


def grouped_gemm(a, b, sfa, sfb, out=None) -> list[torch.Tensor]:
    """Per group, (a * sfa) @ (b * sfb)^T in fp16 (see the module's description): into `out` when
    given (and returned), else into new tensors.

    Called eagerly on plain tensors, it runs the implementation directly: the torch.library
    dispatcher's own cost (tens of microseconds of host time for lists of tensors) buys nothing
    there. Traced by torch.compile, or under a dispatch mode (FakeTensorMode, say), it goes through
    torch.ops.nvfp4, whose fake implementations answer."""
    direct = not torch.compiler.is_compiling() and _current_dispatch_mode() is None and a and type(a[0]) is torch.Tensor
    if out is None:
        return _new(a, b, sfa, sfb) if direct else torch.ops.nvfp4.grouped_gemm(a, b, sfa, sfb)
    if direct:
        _into(a, b, sfa, sfb, out)
    else:
        torch.ops.nvfp4.grouped_gemm_out(a, b, sfa, sfb, out)
    return out


def _eager(first) -> bool:
    """Whether a call runs its implementation directly: eager, on plain tensors."""
    return not torch.compiler.is_compiling() and _current_dispatch_mode() is None and type(first) is torch.Tensor


# ---- the MoE forms (nvfp4/moe.py) and quantization (nvfp4/quantize.py)
def _masked_new(a: torch.Tensor, sfa: torch.Tensor, b: torch.Tensor, sfb: torch.Tensor, masked_m: torch.Tensor) -> torch.Tensor:
    out = a.new_empty((a.shape[0], a.shape[1], b.shape[1]), dtype=torch.float16)
    masked_into(a, sfa, b, sfb, masked_m, out)
    return out


def _offsets_new(a: torch.Tensor, sfa: torch.Tensor, b: torch.Tensor, sfb: torch.Tensor, expert_offsets: torch.Tensor,
                 sf_offsets: torch.Tensor) -> torch.Tensor:
    out = a.new_empty((a.shape[0], b.shape[1]), dtype=torch.float16)
    offsets_into(a, sfa, b, sfb, expert_offsets, sf_offsets, out)
    return out


def _quantize(x: torch.Tensor, masked_m: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    check_quantize_input(x, masked_m)
    q, sf = new_quantize_outputs(x)
    quantize_into(x, masked_m, q, sf, kernel_for(x))
    return q, sf


masked_out_op = torch.library.custom_op("nvfp4::grouped_gemm_masked_out", masked_into, mutates_args=("out",))
masked_op = torch.library.custom_op("nvfp4::grouped_gemm_masked", _masked_new, mutates_args=())
offsets_out_op = torch.library.custom_op("nvfp4::grouped_gemm_offsets_out", offsets_into, mutates_args=("out",))
offsets_op = torch.library.custom_op("nvfp4::grouped_gemm_offsets", _offsets_new, mutates_args=())
quantize_op = torch.library.custom_op("nvfp4::quantize", _quantize, mutates_args=())


@masked_out_op.register_fake
def _masked_out_fake(a, sfa, b, sfb, masked_m, out) -> None:
    masked_problem(a, sfa, b, sfb, masked_m, out)


@masked_op.register_fake
def _masked_fake(a, sfa, b, sfb, masked_m) -> torch.Tensor:
    masked_problem(a, sfa, b, sfb, masked_m)
    return a.new_empty((a.shape[0], a.shape[1], b.shape[1]), dtype=torch.float16)


@offsets_out_op.register_fake
def _offsets_out_fake(a, sfa, b, sfb, expert_offsets, sf_offsets, out) -> None:
    offsets_problem(a, sfa, b, sfb, expert_offsets, sf_offsets, out)


@offsets_op.register_fake
def _offsets_fake(a, sfa, b, sfb, expert_offsets, sf_offsets) -> torch.Tensor:
    offsets_problem(a, sfa, b, sfb, expert_offsets, sf_offsets)
    return a.new_empty((a.shape[0], b.shape[1]), dtype=torch.float16)


@quantize_op.register_fake
def _quantize_fake(x, masked_m) -> tuple[torch.Tensor, torch.Tensor]:
    check_quantize_input(x, masked_m)
    return new_quantize_outputs(x)


def grouped_gemm_masked(a, sfa, b, sfb, masked_m, out=None) -> torch.Tensor:
    """Expert e: out[e, :masked_m[e]] = (a[e] * sfa[e]) @ (b[e] * sfb[e])^T in fp16; rows at or past
    masked_m[e] are not written. a [E, max_m, K/2] FP4, sfa [E, ceil(max_m/128), K/64, 32, 4, 4],
    b [E, N, K/2], sfb [E, ceil(N/128), K/64, 32, 4, 4], masked_m int32 [E] on the GPU (read there
    only), out [E, max_m, N] fp16 (new when not given). docs/MOE.md."""
    if out is None:
        return _masked_new(a, sfa, b, sfb, masked_m) if _eager(a) else torch.ops.nvfp4.grouped_gemm_masked(a, sfa, b, sfb, masked_m)
    if _eager(a):
        masked_into(a, sfa, b, sfb, masked_m, out)
    else:
        torch.ops.nvfp4.grouped_gemm_masked_out(a, sfa, b, sfb, masked_m, out)
    return out


def grouped_gemm_offsets(a, sfa, b, sfb, expert_offsets, sf_offsets, out=None) -> torch.Tensor:
    """Expert e: out rows expert_offsets[e] .. expert_offsets[e + 1] = those rows of (a * sfa) @
    (b[e] * sfb[e])^T in fp16. a [total_m, K/2] FP4, sfa [sf_rows/128, K/64, 32, 4, 4] with expert
    e's scale rows from sf_offsets[e] (offset_layout(), offset_scales()), b and sfb as in the masked
    form, the offsets int32 on the GPU (read there only), out [total_m, N] fp16. docs/MOE.md."""
    if out is None:
        if _eager(a):
            return _offsets_new(a, sfa, b, sfb, expert_offsets, sf_offsets)
        return torch.ops.nvfp4.grouped_gemm_offsets(a, sfa, b, sfb, expert_offsets, sf_offsets)
    if _eager(a):
        offsets_into(a, sfa, b, sfb, expert_offsets, sf_offsets, out)
    else:
        torch.ops.nvfp4.grouped_gemm_offsets_out(a, sfa, b, sfb, expert_offsets, sf_offsets, out)
    return out


def quantize(x, masked_m=None) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4 codes and blocked E4M3 scales of fp16 or bf16 x [..., M, K] (nvfp4/quantize.py)."""
    return _quantize(x, masked_m) if _eager(x) else torch.ops.nvfp4.quantize(x, masked_m)
