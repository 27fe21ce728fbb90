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
