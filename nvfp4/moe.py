"""The Mixture-of-Experts forms of the grouped GEMM, whose row counts live on the GPU (docs/MOE.md).

    out = nvfp4.grouped_gemm_masked(a, sfa, b, sfb, masked_m)                      # a [E, max_m, K/2]
    out = nvfp4.grouped_gemm_offsets(a, sfa, b, sfb, expert_offsets, sf_offsets)  # a [total_m, K/2]

Expert e multiplies its rows of A by b[e] ([N, K/2] FP4), times alpha[e] where given, into the same
rows of out (fp16 or bf16). The counts (masked_m, or the offsets) and alpha are read on the GPU only:
nothing waits for the GPU, and a CUDA graph captured once replays with whatever counts the tensors
hold then. Rows no expert owns (in the
masked form, rows at or past masked_m[e]) are not written. Scales are in the blocked form,
[..., ceil(rows/128), K/64, 32, 4, 4] E4M3, the memory of the reordered layout.
"""

import ctypes
import warnings

import torch

from .boundary import ExpertDesc
from .dispatch import path_of
from .kernel_path import KernelPath, check_on_current_device
from .launch_queue import current_queue
from .layout import OUT_DTYPES, described, described_placement
from .portable import dequantize
from .quantize import blocked_from_plain, blocked_scale_shape, check_scale_bytes, plain_from_blocked

FP4 = (torch.float4_e2m1fn_x2, torch.uint8)
SCALE = (torch.float8_e4m3fn, torch.uint8)
MAX_EXPERTS = 1024  # the kernels' bound (kMaxExperts in csrc/experts.cuh: one schedule thread an expert)


def kernel_for(tensor: torch.Tensor) -> KernelPath | None:
    """The CUDA kernel of the tensor's device where it computes there (a GPU with a kernel that is
    trusted), else None. The kernels run on the current device: tensors on another one are an error."""
    if not tensor.is_cuda:
        return None
    check_on_current_device(tensor, torch.cuda.current_device())
    path = path_of(tensor.device)
    return path if isinstance(path, KernelPath) else None


def check_tensor(name: str, t, dtypes, shape, device=None) -> None:
    """ValueError naming `name` unless t is a tensor of one of dtypes, of the shape (and on device)."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} is not a tensor but {type(t).__name__}")
    if t.dtype not in dtypes:
        raise ValueError(f"{name} has dtype {t.dtype}, expected {' or '.join(map(str, dtypes))}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {tuple(shape)}")
    if device is not None and t.device != device:
        raise ValueError(f"{name} is on {t.device}, a on {device}")


def _check_experts(what: str, a, b, sfb):
    if not isinstance(b, torch.Tensor) or b.dim() != 3:
        raise ValueError(f"nvfp4.{what}: b must be [E, N, K/2], got {described(b)}")
    experts, n, half_k = b.shape
    k = 2 * half_k
    if not experts or not n or k <= 0 or k % 64:
        raise ValueError(f"nvfp4.{what}: E={experts} and N={n} must be positive and K={k} a positive multiple of 64")
    check_tensor(f"nvfp4.{what}: b", b, FP4, (experts, n, half_k), a.device)
    check_tensor(f"nvfp4.{what}: sfb", sfb, SCALE, (experts, *blocked_scale_shape(n, k)), a.device)
    return experts, n, k


def _check_alpha(what: str, alpha, experts: int, n: int, device) -> None:
    if alpha is None:
        return
    if not isinstance(alpha, torch.Tensor) or alpha.dtype != torch.float32 or tuple(alpha.shape) not in ((experts,), (experts, n)):
        raise ValueError(
            f"nvfp4.{what}: alpha must be float32 [E] = [{experts}] or [E, N] = [{experts}, {n}], got " + described(alpha, with_dtype=True)
        )
    if alpha.device != device or not alpha.is_contiguous():
        raise ValueError(f"nvfp4.{what}: alpha must be contiguous and on {device} with a, got {described_placement(alpha)}")


def masked_problem(a, sfa, b, sfb, masked_m, out=None, alpha=None) -> tuple[int, int, int, int]:
    """(E, max_m, N, K) of a masked call; ValueError naming what is wrong."""
    if not isinstance(a, torch.Tensor) or a.dim() != 3:
        raise ValueError(f"nvfp4.grouped_gemm_masked: a must be [E, max_m, K/2], got {described(a)}")
    experts, n, k = _check_experts("grouped_gemm_masked", a, b, sfb)
    max_m = a.shape[1]
    check_tensor("nvfp4.grouped_gemm_masked: a", a, FP4, (experts, max_m, k // 2))
    check_tensor("nvfp4.grouped_gemm_masked: sfa", sfa, SCALE, (experts, *blocked_scale_shape(max_m, k)), a.device)
    check_tensor("nvfp4.grouped_gemm_masked: masked_m", masked_m, (torch.int32,), (experts,), a.device)
    if out is not None:
        check_tensor("nvfp4.grouped_gemm_masked: out", out, OUT_DTYPES, (experts, max_m, n), a.device)
    _check_alpha("grouped_gemm_masked", alpha, experts, n, a.device)
    return experts, max_m, n, k


def offsets_problem(a, sfa, b, sfb, expert_offsets, sf_offsets, out=None, alpha=None) -> tuple[int, int, int, int, int]:
    """(E, total_m, scale rows of sfa, N, K) of an offset call; ValueError naming what is wrong."""
    if not isinstance(a, torch.Tensor) or a.dim() != 2:
        raise ValueError(f"nvfp4.grouped_gemm_offsets: a must be [total_m, K/2], got {described(a)}")
    experts, n, k = _check_experts("grouped_gemm_offsets", a, b, sfb)
    total = a.shape[0]
    check_tensor("nvfp4.grouped_gemm_offsets: a", a, FP4, (total, k // 2))
    if not isinstance(sfa, torch.Tensor) or sfa.dim() != 5:
        raise ValueError(f"nvfp4.grouped_gemm_offsets: sfa must be [sf_rows/128, K/64, 32, 4, 4], got {described(sfa)}")
    check_tensor("nvfp4.grouped_gemm_offsets: sfa", sfa, SCALE, (sfa.shape[0], k // 64, 32, 4, 4), a.device)
    if not sfa.shape[0] and total:  # sfa's size first: a's may be data-dependent under torch.compile
        raise ValueError(f"nvfp4.grouped_gemm_offsets: sfa holds no 128-row block of scales for a's {total} rows (sf_rows_capacity)")
    check_tensor("nvfp4.grouped_gemm_offsets: expert_offsets", expert_offsets, (torch.int32,), (experts + 1,), a.device)
    check_tensor("nvfp4.grouped_gemm_offsets: sf_offsets", sf_offsets, (torch.int32,), (experts,), a.device)
    if out is not None:
        check_tensor("nvfp4.grouped_gemm_offsets: out", out, OUT_DTYPES, (total, n), a.device)
    _check_alpha("grouped_gemm_offsets", alpha, experts, n, a.device)
    return experts, total, sfa.shape[0] * 128, n, k


def _integer_vector(t) -> bool:
    return isinstance(t, torch.Tensor) and t.dim() == 1 and not t.is_floating_point() and not t.is_complex()


def offset_layout(counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(expert_offsets [E + 1], sf_offsets [E]) int32 for experts of counts[e] rows placed one after
    another: A and out rows offsets[e] .. offsets[e + 1], scale rows from sf_offsets[e], each
    expert's scale rows padded to 128. Computed where counts are, without a host sync."""
    if not _integer_vector(counts):
        raise ValueError(f"nvfp4.offset_layout: counts must be an integer tensor [E], got {described(counts)}")
    counts = counts.to(torch.int32).clamp(min=0)
    zero = counts.new_zeros(1)
    offsets = torch.cat((zero, counts.cumsum(0, dtype=torch.int32)))
    padded = (counts + 127) // 128 * 128
    return offsets, padded.cumsum(0, dtype=torch.int32) - padded  # each expert's first scale row: [E], also for E = 0


def sf_rows_capacity(total_m: int, experts: int) -> int:
    """Scale rows that hold any split of total_m rows over the experts with offset_layout()."""
    return (total_m + 127 * experts + 127) // 128 * 128


def expert_of_rows(expert_offsets: torch.Tensor, sf_offsets: torch.Tensor, total: int, sf_rows: int):
    """Per row of A: its expert (-1: none, or one whose counts the layout cannot hold) and its scale row.
    An expert whose first row lies before an earlier expert's holds none, so no row has two experts."""
    rows = torch.arange(total, device=expert_offsets.device, dtype=torch.int32)
    first, end = expert_offsets[:-1], expert_offsets[1:]
    earlier = torch.cat([first.new_zeros(1), first.cummax(0).values[:-1].clamp(min=0)])
    valid = (
        (first >= earlier)
        & (first <= end)
        & (end <= total)
        & (sf_offsets >= 0)
        & (sf_offsets % 128 == 0)
        & (sf_offsets + end - first <= sf_rows)
    )
    inside = (rows[:, None] >= first[None, :]) & (rows[:, None] < end[None, :]) & valid[None, :]
    expert = torch.where(inside.any(1), inside.int().argmax(1), -1)
    safe = expert.clamp(min=0)
    sf_row = torch.where(expert >= 0, sf_offsets[safe] + rows - first[safe], 0)
    return expert, sf_row


def offset_scales(plain: torch.Tensor, expert_offsets: torch.Tensor, sf_offsets: torch.Tensor, sf_rows: int) -> torch.Tensor:
    """sfa of the offset form from the scales of A's rows in order, plain [total_m, K/16] (E4M3;
    plain_from_blocked() gives them from quantize()'s): row r of expert e goes to scale row
    sf_offsets[e] + r - expert_offsets[e]; [sf_rows/128, K/64, 32, 4, 4], zeros elsewhere. No host sync,
    so the offsets are not checked against plain's rows: rows past them have zero scales."""
    check_scale_bytes("offset_scales", plain, "[total_m, K/16] with K a multiple of 64", 2)
    if plain.dim() != 2 or plain.shape[1] % 4:
        raise ValueError(f"nvfp4.offset_scales: plain must be [total_m, K/16] with K a multiple of 64, got {tuple(plain.shape)}")
    for name, offsets in (("expert_offsets", expert_offsets), ("sf_offsets", sf_offsets)):
        if not _integer_vector(offsets):
            raise ValueError(f"nvfp4.offset_scales: {name} must be an integer tensor (offset_layout), got {described(offsets)}")
    if expert_offsets.shape[0] != sf_offsets.shape[0] + 1:
        raise ValueError(
            f"nvfp4.offset_scales: expert_offsets [E + 1] and sf_offsets [E] (offset_layout), got {tuple(expert_offsets.shape)} "
            f"and {tuple(sf_offsets.shape)}"
        )
    if sf_rows < 0:
        raise ValueError(f"nvfp4.offset_scales: sf_rows must not be negative (sf_rows_capacity), got {sf_rows!r}")
    total, cols = plain.shape
    expert, sf_row = expert_of_rows(expert_offsets, sf_offsets, total, sf_rows)
    placed = plain.new_zeros((sf_rows + 1, cols), dtype=torch.uint8)  # the last row takes the rows of no expert
    placed.index_copy_(0, torch.where(expert >= 0, sf_row, sf_rows).long(), plain.view(torch.uint8))
    return blocked_from_plain(placed[:sf_rows]).view(plain.dtype)


def _decoded_per_expert(packed: torch.Tensor, blocked: torch.Tensor) -> torch.Tensor:
    """FP4 [E, rows, K/2] with blocked scales [E, ...] -> float32 [E, rows, K], exactly."""
    rows = packed.shape[1]
    return torch.stack(
        [
            dequantize(packed[e], plain_from_blocked(blocked[e].view(torch.uint8), rows).view(torch.float8_e4m3fn).float())
            for e in range(packed.shape[0])
        ]
    )


def _expert_alpha(alpha: torch.Tensor | None, e: int | None = None) -> torch.Tensor | float:
    """Expert e's alpha shaped to multiply its [rows, N] products (every expert's, to multiply
    [E, rows, N], when e is None)."""
    if alpha is None:
        return 1.0
    if e is not None:
        return alpha[e]
    return alpha[:, None, None] if alpha.dim() == 1 else alpha[:, None, :]


def masked_portable(a, sfa, b, sfb, masked_m, out, alpha=None) -> None:
    """Exact decode, float32 accumulation, times alpha, rows below masked_m[e] written; no host sync."""
    max_m = a.shape[1]
    product = torch.bmm(_decoded_per_expert(a, sfa), _decoded_per_expert(b, sfb).transpose(1, 2))
    product = (product * _expert_alpha(alpha)).to(out.dtype)
    rows = torch.arange(max_m, device=a.device)[None, :, None] < masked_m.clamp(0, max_m)[:, None, None]
    out.copy_(torch.where(rows, product, out))


def offsets_portable(a, sfa, b, sfb, expert_offsets, sf_offsets, out, alpha=None) -> None:
    """Exact decode, float32 accumulation, times alpha, each expert's rows written; no host sync."""
    total, sf_rows = a.shape[0], sfa.shape[0] * 128
    if not total:
        return
    expert, sf_row = expert_of_rows(expert_offsets, sf_offsets, total, sf_rows)
    scales = plain_from_blocked(sfa.view(torch.uint8), sf_rows).view(torch.float8_e4m3fn).float()[sf_row.long()]
    a_dec = dequantize(a, scales)
    b_dec = _decoded_per_expert(b, sfb)
    result = out.clone()
    for e in range(b.shape[0]):
        result = torch.where((expert == e)[:, None], ((a_dec @ b_dec[e].T) * _expert_alpha(alpha, e)).to(out.dtype), result)
    out.copy_(result)


def _kernel_takes(kernel: KernelPath | None, tensors, experts: int, n: int, k: int) -> KernelPath | None:
    if kernel is None:
        return None
    reason = None
    if experts > MAX_EXPERTS:
        reason = f"E={experts} is more experts than the kernels' {MAX_EXPERTS}"
    elif n % 8:
        reason = f"N={n} is not a multiple of 8"
    elif k % kernel.k_multiple:
        reason = f"K={k} is not a multiple of {kernel.k_multiple}"
    elif any(not t.is_contiguous() or t.data_ptr() % 16 for t in tensors):
        reason = "the kernels need contiguous, 16-byte aligned tensors"
    if reason:
        warnings.warn(f"nvfp4 MoE grouped gemm: {reason}; using the portable path", stacklevel=4)
        return None
    return kernel


def _launch(
    kernel: KernelPath,
    a,
    b,
    sfa,
    sfb,
    out,
    alpha,
    experts,
    total_rows,
    sf_rows,
    n,
    k,
    masked_m=None,
    offsets=None,
    sf_offsets=None,
    rows_per_expert=0,
) -> None:
    """The MoE GEMM on the caller's current queue: the masked form given masked_m and rows_per_expert,
    the offset form given offsets and sf_offsets (their descriptor built once, in one place)."""
    device = out.device
    desc = ExpertDesc(
        a=a.data_ptr(),
        b=b.data_ptr(),
        c=out.data_ptr(),
        sfa=sfa.data_ptr(),
        sfb=sfb.data_ptr(),
        masked_m=0 if masked_m is None else masked_m.data_ptr(),
        offsets=0 if offsets is None else offsets.data_ptr(),
        sf_offsets=0 if sf_offsets is None else sf_offsets.data_ptr(),
        experts=experts,
        total_rows=total_rows,
        rows_per_expert=rows_per_expert,
        sf_rows=sf_rows,
        n=n,
        k=k,
        alpha=0 if alpha is None else alpha.data_ptr(),
        alpha_stride=int(alpha is not None and alpha.dim() == 2),
        out_bf16=int(out.dtype == torch.bfloat16),
    )
    nbytes = kernel.lib.nvfp4_experts_workspace_bytes(desc)
    queue = current_queue(device.index)
    err = ctypes.create_string_buffer(512)
    workspace = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=device)  # the caller's queue's memory (a capture's: its pool)
    if kernel.lib.nvfp4_experts_launch(desc, kernel.num_sms, workspace.data_ptr(), queue, err, len(err)):
        raise RuntimeError(f"nvfp4 MoE grouped gemm: {err.value.decode()}")


def masked_into(
    a: torch.Tensor,
    sfa: torch.Tensor,
    b: torch.Tensor,
    sfb: torch.Tensor,
    masked_m: torch.Tensor,
    out: torch.Tensor,
    alpha: torch.Tensor | None = None,
) -> None:
    """The masked form into out: the kernel of the tensors' device, or the portable path."""
    experts, max_m, n, k = masked_problem(a, sfa, b, sfb, masked_m, out, alpha)
    kernel = _kernel_takes(kernel_for(a), (a, sfa, b, sfb, masked_m, out), experts, n, k)
    if kernel is None:
        masked_portable(a, sfa, b, sfb, masked_m, out, alpha)
        return
    sf_rows = experts * ((max_m + 127) // 128 * 128)
    _launch(kernel, a, b, sfa, sfb, out, alpha, experts, experts * max_m, sf_rows, n, k, masked_m=masked_m, rows_per_expert=max_m)


def offsets_into(
    a: torch.Tensor,
    sfa: torch.Tensor,
    b: torch.Tensor,
    sfb: torch.Tensor,
    expert_offsets: torch.Tensor,
    sf_offsets: torch.Tensor,
    out: torch.Tensor,
    alpha: torch.Tensor | None = None,
) -> None:
    """The offset form into out: the kernel of the tensors' device, or the portable path."""
    tensors = (a, sfa, b, sfb, expert_offsets, sf_offsets, out)
    experts, total, sf_rows, n, k = offsets_problem(*tensors, alpha)
    kernel = _kernel_takes(kernel_for(a), tensors, experts, n, k)
    if kernel is None:
        offsets_portable(*tensors, alpha)
        return
    _launch(kernel, a, b, sfa, sfb, out, alpha, experts, total, sf_rows, n, k, offsets=expert_offsets, sf_offsets=sf_offsets)
