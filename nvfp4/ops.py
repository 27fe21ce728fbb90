"""The library's ops, registered with torch.library (torch.ops.nvfp4.*) with fake implementations,
so that torch.compile traces through them and CUDA graphs capture them.

    out = nvfp4.grouped_gemm(a, b, sfa, sfb)            # a new fp16 [M, N] per group
    nvfp4.grouped_gemm(a, b, sfa, sfb, out=out)         # written into the caller's tensors
    out = nvfp4.grouped_gemm(a, b, sfa, sfb, alpha=alpha, out_dtype=torch.bfloat16)  # two-level scales

Per group g: a[g] FP4 [M, K/2] (float4_e2m1fn_x2 or uint8, two codes a byte, low nibble first),
b[g] FP4 [N, K/2], sfa[g] and sfb[g] their E4M3 scales (one per 16 K elements) in the reordered
layout the leaderboard gives, [32, 4, ceil(rows/128), 4, K/64, 1] (reorder_scales makes it from
plain [rows, K/16] scales); out[g] = alpha[g] * (a * sfa) @ (b * sfb)^T in fp16 or bf16, [M, N],
alpha (optional) float32 [groups] on the device, read there only and applied to the fp32 sums
before rounding. K is a positive multiple of 64; M and N may be 0. Everything runs on the caller's
current queue of the current device, where the tensors must be (CPU tensors take the portable path).
"""

from itertools import chain, repeat
from operator import attrgetter, itemgetter, mul

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode as _current_dispatch_mode

from .dispatch import run
from .layout import OUT_DTYPES
from .moe import kernel_for, masked_into, masked_problem, offsets_into, offsets_problem
from .quantize import check_quantize_input, new_quantize_outputs, quantize_into

_shape_of, _first = attrgetter("shape"), itemgetter(0)


def _call(a, b, sfa, sfb, out) -> tuple[list, list]:
    """The op's arguments as the package's (tensors, sizes); ValueError for lists that do not match."""
    groups = len(a)
    if not groups or any(len(x) != groups for x in (b, sfa, sfb, out)):
        raise ValueError(
            f"nvfp4.grouped_gemm: a, b, sfa, sfb and out need one tensor per group: {len(a)}, {len(b)}, {len(sfa)}, {len(sfb)}, {len(out)}"
        )
    # Sizes by maps over the groups (C-level loops: a per-group Python loop cost half the host time
    # of an eager call with 61 groups); a group that is not a pair of 2-D tensors is named.
    pairs = all(map(isinstance, chain(a, b), repeat(torch.Tensor)))
    a_shapes, b_shapes = (list(map(_shape_of, a)), list(map(_shape_of, b))) if pairs else ((), ())
    if not pairs or {*map(len, a_shapes), *map(len, b_shapes)} != {2}:
        bad = next(
            g
            for g, (x, y) in enumerate(zip(a, b))
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.dim() == y.dim() == 2)
        )
        raise ValueError(f"nvfp4 grouped gemm, group {bad}: a and b must be 2-D tensors, [M, K/2] and [N, K/2]")
    rows, k_half = zip(*a_shapes)
    sizes = list(zip(rows, map(_first, b_shapes), map(mul, k_half, repeat(2)), repeat(1)))
    return [*chain.from_iterable(zip(a, b, out)), *chain.from_iterable(zip(sfa, sfb))], sizes


def _out_dtype(out_dtype, what: str) -> torch.dtype:
    """The dtype of new outputs: fp16 unless out_dtype says bf16; ValueError for any other."""
    if out_dtype is None:
        return torch.float16
    if out_dtype not in OUT_DTYPES:
        raise ValueError(f"nvfp4.{what}: out_dtype must be torch.float16 or torch.bfloat16, got {out_dtype}")
    return out_dtype


def _given_out_dtype(out, out_dtype, what: str) -> None:
    """ValueError when out_dtype is given with out tensors of another dtype."""
    if out_dtype is None:
        return
    dtypes = {t.dtype for t in (out if isinstance(out, (list, tuple)) else [out]) if isinstance(t, torch.Tensor)}
    if dtypes - {out_dtype}:
        raise ValueError(f"nvfp4.{what}: out_dtype={out_dtype} but out holds {sorted(map(str, dtypes))}; give one or the other")


def _new_outputs(a, b, out_dtype=None) -> list[torch.Tensor]:
    dtype = _out_dtype(out_dtype, "grouped_gemm")
    return [x.new_empty((x.shape[0], y.shape[0]), dtype=dtype) for x, y in zip(a, b)]


def _into(
    a: list[torch.Tensor],
    b: list[torch.Tensor],
    sfa: list[torch.Tensor],
    sfb: list[torch.Tensor],
    out: list[torch.Tensor],
    alpha: torch.Tensor | None = None,
) -> None:
    """The grouped GEMM into the caller's out tensors."""
    run(*_call(a, b, sfa, sfb, out), 2, alpha)


def _new(
    a: list[torch.Tensor],
    b: list[torch.Tensor],
    sfa: list[torch.Tensor],
    sfb: list[torch.Tensor],
    alpha: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
) -> list[torch.Tensor]:
    """The grouped GEMM into new [M, N] tensors (fp16 unless out_dtype says bf16)."""
    out = _new_outputs(a, b, out_dtype)
    _into(a, b, sfa, sfb, out, alpha)
    return out


grouped_gemm_out = torch.library.custom_op("nvfp4::grouped_gemm_out", _into, mutates_args=("out",))
grouped_gemm_new = torch.library.custom_op("nvfp4::grouped_gemm", _new, mutates_args=())


@grouped_gemm_out.register_fake
def _grouped_gemm_out_fake(a, b, sfa, sfb, out, alpha=None) -> None:
    return None


@grouped_gemm_new.register_fake
def _grouped_gemm_fake(a, b, sfa, sfb, alpha=None, out_dtype=None) -> list[torch.Tensor]:
    return _new_outputs(a, b, out_dtype)


def grouped_gemm(a, b, sfa, sfb, out=None, *, alpha=None, out_dtype=None) -> list[torch.Tensor]:
    """Per group, alpha[g] * (a * sfa) @ (b * sfb)^T in fp16 or bf16 (see the module's description):
    into `out` when given (and returned; its dtype is the output's), else into new tensors of
    out_dtype (default fp16). alpha: None, or float32 [groups] on the tensors' device.

    Called eagerly on plain tensors, it runs the implementation directly: the torch.library
    dispatcher's own cost (tens of microseconds of host time for lists of tensors) buys nothing
    there. Traced by torch.compile, or under a dispatch mode (FakeTensorMode, say), it goes through
    torch.ops.nvfp4, whose fake implementations answer."""
    if type(a) not in (list, tuple):  # one type test on the per-call path; below, `a and` would make a tensor torch's "ambiguous" error
        raise ValueError(
            f"nvfp4.grouped_gemm: a must be a list with one tensor per group, got {type(a).__name__} "
            f"(the MoE forms take stacked tensors: nvfp4.grouped_gemm_masked, nvfp4.grouped_gemm_offsets)"
        )
    if type(b) not in (list, tuple) or type(sfa) not in (list, tuple) or type(sfb) not in (list, tuple):
        _refuse_what_is_not_a_list(b=b, sfa=sfa, sfb=sfb)
    if out is not None and type(out) not in (list, tuple):
        _refuse_what_is_not_a_list(out=out)
    traced = _traced()
    direct = not traced and a and type(a[0]) is torch.Tensor
    if not direct and not traced and type(b) in (list, tuple) and not all(map(_tensor_like, chain(a, b))):  # the checks' error
        _call(a, b, sfa, sfb, a if out is None else out)
    if out is None:
        return _new(a, b, sfa, sfb, alpha, out_dtype) if direct else torch.ops.nvfp4.grouped_gemm(a, b, sfa, sfb, alpha, out_dtype)
    _given_out_dtype(out, out_dtype, "grouped_gemm")
    if direct:
        _into(a, b, sfa, sfb, out, alpha)
    else:
        torch.ops.nvfp4.grouped_gemm_out(a, b, sfa, sfb, out, alpha)
    return out


def _refuse_what_is_not_a_list(**lists) -> None:
    for name, x in lists.items():
        if type(x) not in (list, tuple) and not isinstance(x, torch.fx.Proxy):
            raise ValueError(f"nvfp4.grouped_gemm: {name} must be a list with one tensor per group, got {type(x).__name__}")


def _traced() -> bool:
    """Whether a call is being traced (torch.compile) or runs under a dispatch mode (FakeTensorMode, say)."""
    return torch.compiler.is_compiling() or _current_dispatch_mode() is not None


def _eager(first) -> bool:
    """Whether a call runs its implementation directly: eager, on plain tensors."""
    return type(first) is torch.Tensor and not torch.compiler.is_compiling() and _current_dispatch_mode() is None


def _tensor_like(x) -> bool:
    """A tensor, or what a tracer passes in one's place (torch.fx's Proxy): what torch.ops may be given."""
    return isinstance(x, (torch.Tensor, torch.fx.Proxy))


# ---- the MoE forms (nvfp4/moe.py) and quantization (nvfp4/quantize.py)
def _masked_empty(a, b, out_dtype) -> torch.Tensor:
    return a.new_empty((a.shape[0], a.shape[1], b.shape[1]), dtype=_out_dtype(out_dtype, "grouped_gemm_masked"))


def _offsets_empty(a, b, out_dtype) -> torch.Tensor:
    return a.new_empty((a.shape[0], b.shape[1]), dtype=_out_dtype(out_dtype, "grouped_gemm_offsets"))


def _masked_new(
    a: torch.Tensor,
    sfa: torch.Tensor,
    b: torch.Tensor,
    sfb: torch.Tensor,
    masked_m: torch.Tensor,
    alpha: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    if not isinstance(b, torch.Tensor) or b.dim() != 3:  # the checks' ValueError before b sizes the output
        masked_problem(a, sfa, b, sfb, masked_m, None, alpha)
    out = _masked_empty(a, b, out_dtype)
    masked_into(a, sfa, b, sfb, masked_m, out, alpha)
    return out


def _offsets_new(
    a: torch.Tensor,
    sfa: torch.Tensor,
    b: torch.Tensor,
    sfb: torch.Tensor,
    expert_offsets: torch.Tensor,
    sf_offsets: torch.Tensor,
    alpha: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    if not isinstance(b, torch.Tensor) or b.dim() != 3:  # the checks' ValueError before b sizes the output
        offsets_problem(a, sfa, b, sfb, expert_offsets, sf_offsets, None, alpha)
    out = _offsets_empty(a, b, out_dtype)
    offsets_into(a, sfa, b, sfb, expert_offsets, sf_offsets, out, alpha)
    return out


def _quantize(
    x: torch.Tensor, masked_m: torch.Tensor | None, global_scale: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    check_quantize_input(x, masked_m, global_scale)
    q, sf = new_quantize_outputs(x)
    quantize_into(x, masked_m, q, sf, kernel_for(x), global_scale)
    return q, sf


masked_out_op = torch.library.custom_op("nvfp4::grouped_gemm_masked_out", masked_into, mutates_args=("out",))
masked_op = torch.library.custom_op("nvfp4::grouped_gemm_masked", _masked_new, mutates_args=())
offsets_out_op = torch.library.custom_op("nvfp4::grouped_gemm_offsets_out", offsets_into, mutates_args=("out",))
offsets_op = torch.library.custom_op("nvfp4::grouped_gemm_offsets", _offsets_new, mutates_args=())
quantize_op = torch.library.custom_op("nvfp4::quantize", _quantize, mutates_args=())


@masked_out_op.register_fake
def _masked_out_fake(a, sfa, b, sfb, masked_m, out, alpha=None) -> None:
    masked_problem(a, sfa, b, sfb, masked_m, out, alpha)


@masked_op.register_fake
def _masked_fake(a, sfa, b, sfb, masked_m, alpha=None, out_dtype=None) -> torch.Tensor:
    masked_problem(a, sfa, b, sfb, masked_m, None, alpha)
    return _masked_empty(a, b, out_dtype)


@offsets_out_op.register_fake
def _offsets_out_fake(a, sfa, b, sfb, expert_offsets, sf_offsets, out, alpha=None) -> None:
    offsets_problem(a, sfa, b, sfb, expert_offsets, sf_offsets, out, alpha)


@offsets_op.register_fake
def _offsets_fake(a, sfa, b, sfb, expert_offsets, sf_offsets, alpha=None, out_dtype=None) -> torch.Tensor:
    offsets_problem(a, sfa, b, sfb, expert_offsets, sf_offsets, None, alpha)
    return _offsets_empty(a, b, out_dtype)


@quantize_op.register_fake
def _quantize_fake(x, masked_m, global_scale=None) -> tuple[torch.Tensor, torch.Tensor]:
    check_quantize_input(x, masked_m, global_scale)
    return new_quantize_outputs(x)


def grouped_gemm_masked(a, sfa, b, sfb, masked_m, out=None, *, alpha=None, out_dtype=None) -> torch.Tensor:
    """Expert e: out[e, :masked_m[e]] = alpha[e] * (a[e] * sfa[e]) @ (b[e] * sfb[e])^T in fp16 or
    bf16; rows at or past masked_m[e] are not written. a [E, max_m, K/2] FP4, sfa [E, ceil(max_m/128),
    K/64, 32, 4, 4], b [E, N, K/2], sfb [E, ceil(N/128), K/64, 32, 4, 4], masked_m int32 [E] on the GPU
    (read there only), out [E, max_m, N] fp16 or bf16 (new when not given, of out_dtype, default fp16),
    alpha None or float32 [E] (or [E, N]: one per expert and column) on the device. docs/MOE.md."""
    eager = _eager(a)
    if not eager and not _tensor_like(a) and not _traced():  # the checks' ValueError rather than the dispatcher's
        masked_problem(a, sfa, b, sfb, masked_m, out, alpha)
    if out is None:
        if eager:
            return _masked_new(a, sfa, b, sfb, masked_m, alpha, out_dtype)
        return torch.ops.nvfp4.grouped_gemm_masked(a, sfa, b, sfb, masked_m, alpha, out_dtype)
    _given_out_dtype(out, out_dtype, "grouped_gemm_masked")
    if eager:
        masked_into(a, sfa, b, sfb, masked_m, out, alpha)
    else:
        torch.ops.nvfp4.grouped_gemm_masked_out(a, sfa, b, sfb, masked_m, out, alpha)
    return out


def grouped_gemm_offsets(a, sfa, b, sfb, expert_offsets, sf_offsets, out=None, *, alpha=None, out_dtype=None) -> torch.Tensor:
    """Expert e: out rows expert_offsets[e] .. expert_offsets[e + 1] = those rows of alpha[e] * (a * sfa)
    @ (b[e] * sfb[e])^T in fp16 or bf16. a [total_m, K/2] FP4, sfa [sf_rows/128, K/64, 32, 4, 4] with
    expert e's scale rows from sf_offsets[e] (offset_layout(), offset_scales()), b, sfb and alpha as in
    the masked form, the offsets int32 on the GPU (read there only), out [total_m, N]. docs/MOE.md."""
    eager = _eager(a)
    if not eager and not _tensor_like(a) and not _traced():  # the checks' ValueError rather than the dispatcher's
        offsets_problem(a, sfa, b, sfb, expert_offsets, sf_offsets, out, alpha)
    if out is None:
        if eager:
            return _offsets_new(a, sfa, b, sfb, expert_offsets, sf_offsets, alpha, out_dtype)
        return torch.ops.nvfp4.grouped_gemm_offsets(a, sfa, b, sfb, expert_offsets, sf_offsets, alpha, out_dtype)
    _given_out_dtype(out, out_dtype, "grouped_gemm_offsets")
    if eager:
        offsets_into(a, sfa, b, sfb, expert_offsets, sf_offsets, out, alpha)
    else:
        torch.ops.nvfp4.grouped_gemm_offsets_out(a, sfa, b, sfb, expert_offsets, sf_offsets, out, alpha)
    return out


def quantize(x, masked_m=None, global_scale=None) -> tuple[torch.Tensor, torch.Tensor]:
    """NVFP4 codes and blocked E4M3 scales of fp16 or bf16 x [..., M, K] (nvfp4/quantize.py);
    global_scale: None, or float32 on x's device, one value, one per batch entry of a 3-D x, or one
    per row, holding the dequantization scale (x ~ code * block scale * global scale)."""
    if _eager(x):
        return _quantize(x, masked_m, global_scale)
    if not _tensor_like(x) and not _traced():  # the checks' ValueError rather than the dispatcher's
        check_quantize_input(x, masked_m, global_scale)
    return torch.ops.nvfp4.quantize(x, masked_m, global_scale)
