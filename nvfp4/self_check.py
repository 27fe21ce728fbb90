"""The first-use self-check of a kernel never run on real hardware of its architecture (sm_100a).

The first call in a process (outside any graph capture: the check synchronizes) runs the kernel on
a built-in problem in each of its tile shapes and compares it with the exact product. On a mismatch
or an error it warns once and hands back a correct fallback for the rest of the process. The
outcome is recorded beside the build, so that a process that finds a failure, or a check whose
process died (a fault or a hang kills the CUDA context), spares later processes the kernel.
"""

import os
import sys

import torch

from .kernel_path import TILE_SHAPE_NAMES, KernelPath
from .layout import group_tensors, plain_scales
from .portable import dequantize, portable_kernel, scaled_mm_kernel

# Kernels (by NVFP4_ARCH) that this project has never run on a real GPU of their architecture:
# the first call in a process checks them on a small problem before trusting them.
UNVERIFIED_KERNEL_ARCHS = frozenset({100})
SELF_CHECK_ENV = "NVFP4_SELF_CHECK"  # =0: trust the kernel without the check
TOLERANCE = 1e-3  # rtol = atol, the harness's


def self_check_input(device: torch.device, out_dtype: torch.dtype = torch.float16) -> tuple[list, list]:
    """The self-check's problem as (tensors, sizes), operand rank 3: three groups (M = 5, below 8;
    77, odd; 130, two row blocks), every FP4 code, positive E4M3 scales over the whole code range on
    one side of each group (the other at most 0.5, so no output comes near the fp16 limit), random
    scale padding, NaN-poisoned outputs. Drawn on the CPU from its own generator (the global random
    state is left alone), then moved."""
    generator = torch.Generator().manual_seed(0x5E1F)
    abc, scales, sizes = [], [], []
    for g, (m, n, k) in enumerate(((5, 128, 256), (77, 256, 512), (130, 136, 256))):
        a, b = (torch.randint(256, (rows, k // 2, 1), dtype=torch.uint8, generator=generator) for rows in (m, n))
        c = torch.full((m, n, 1), float("nan"), dtype=out_dtype)
        for rows, wide in ((m, g % 2 == 0), (n, g % 2 == 1)):
            memory = torch.randint(
                1, 0x7F if wide else 0x31, (1, -(-rows // 128), k // 64, 32, 4, 4), dtype=torch.uint8, generator=generator
            )
            scales.append(memory.view(torch.float8_e4m3fn).permute(3, 4, 1, 5, 2, 0).to(device))
        abc += [a.view(torch.float4_e2m1fn_x2).to(device), b.view(torch.float4_e2m1fn_x2).to(device), c.to(device)]
        sizes.append((m, n, k, 1))
    return abc + scales, sizes


def exact_products(tensors: list, sizes, alpha: torch.Tensor | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per group, the exact product times alpha[g] where given (float64: every value x scale and every
    partial sum here is exact in it) and how far from it a correct result in c's dtype may lie: the
    harness's tolerance, plus what fp32 accumulation may add where terms cancel (one rounding per
    16-element K block, of at most 2^-23 of the sum of |products|, doubled), plus bf16's coarser
    rounding where c is bf16."""
    exact = []
    for g, (m, n, k, _) in enumerate(sizes):
        a, b, c, sfa, sfb = group_tensors(tensors, g)
        lhs = dequantize(a, plain_scales(sfa, m, k)).double()
        rhs = dequantize(b, plain_scales(sfb, n, k)).double()
        factor = 1.0 if alpha is None else alpha[g].double()
        value = lhs @ rhs.T * factor
        rounding = 2.0**-8 if c is not None and c.dtype == torch.bfloat16 else 0.0
        allowance = TOLERANCE + (TOLERANCE + rounding) * value.abs() + 2 * (k / 16) * 2.0**-23 * (lhs.abs() @ rhs.abs().T) * factor
        exact.append((value.unsqueeze(-1), allowance.unsqueeze(-1)))
    return exact


def first_mismatch(out: list, exact: list) -> str | None:
    """Where the outputs `out` ([M, N, 1] each) lie farther from exact_products() than a correct result
    may (NaN or inf included), as one readable phrase; None when nowhere."""
    for g, (got, (value, allowance)) in enumerate(zip(out, exact)):
        bad = ~((got.double() - value).abs() <= allowance)
        if bad.any():
            row, col, _ = bad.nonzero()[0].tolist()
            return (
                f"group {g}: {int(bad.sum())} of {bad.numel()} elements off, the first at row {row}, column {col}: "
                f"{got[row, col, 0].item()} instead of {value[row, col, 0].item():.6g}"
            )
    return None


SELF_CHECK_ALPHA = (0.5, 3.0, 2.0**-10)  # per group of the check's second call: below, above and far below 1


def self_check_failure(path: KernelPath, device: torch.device) -> str | None:
    """What went wrong when `path` computed self_check_input() (outside exact_products()' bounds,
    or a launch or CUDA error) in any of its tile shapes, into fp16 and again into bf16 with alpha
    (the epilogue's other path), or None."""
    chosen = path.tiles
    try:
        for tiles in path.tile_shapes:
            path.tiles = tiles
            for out_dtype, alpha in ((torch.float16, None), (torch.bfloat16, torch.tensor(SELF_CHECK_ALPHA, device=device))):
                tensors, sizes = self_check_input(device, out_dtype)  # new tensors: a plan of their own, in this shape
                try:
                    path(tensors, sizes, 3, alpha)
                    failure = first_mismatch(tensors[2 : 3 * len(sizes) : 3], exact_products(tensors, sizes, alpha))  # waits for the kernel
                except (RuntimeError, ValueError) as e:
                    failure = f"{type(e).__name__}: {e}"
                if failure is not None:
                    failure = failure if alpha is None else f"bf16 output with alpha: {failure}"
                    return failure if len(path.tile_shapes) == 1 else f"{TILE_SHAPE_NAMES[path.arch][tiles]} tiles: {failure}"
        return None
    finally:
        path.tiles = chosen


class Fallback:
    """A correct path used in place of a kernel that failed its first-use self-check."""

    def __init__(self, path, kernel: str, failure: str):
        self.path, self.kernel, self.failure = path, kernel, failure

    def __call__(self, tensors: list, sizes, alpha=None) -> None:
        self.path(tensors, sizes, alpha)


def kernel_name(path: KernelPath) -> str:
    return f"sm_{path.arch}a kernel" + (" with tcgen05 emulated (on an sm_90 GPU)" if path.emulated else "")


def self_checked(path: KernelPath, device: torch.device, verdict: str | None = None):
    """`path` when it passes the self-check; otherwise, after one warning on stderr saying what
    failed, a Fallback: FP4 `torch._scaled_mm` where the GPU has it (not under tcgen05 emulation),
    else the portable path.

    verdict: a file through which the processes that use one build share what they found. A
    process about to run the kernel writes "running <pid>" there, then "pass" or "fail: <what>".
    A later process that finds a failure, or a "running" whose process is gone (the kernel killed
    its CUDA context or hung: the leaderboard's compile step runs first and takes that blow), uses
    the fallback without running the kernel; one that finds "pass" checks again all the same."""
    failure = _earlier_failure(verdict)
    if failure is None:
        _record(verdict, f"running {os.getpid()}")
        failure = self_check_failure(path, device)
        _record(verdict, "pass" if failure is None else f"fail: {failure}")
    if failure is None:
        return path
    has_fp4_scaled_mm = device.type == "cuda" and torch.cuda.get_device_capability(device)[0] >= 10
    fallback = Fallback(scaled_mm_kernel if has_fp4_scaled_mm and not path.emulated else portable_kernel, kernel_name(path), failure)
    print(
        f"nvfp4 grouped gemm: the {fallback.kernel} failed its first-use self-check on {device}: {failure}. Using "
        f"{fallback.path.__name__} for the rest of this process.",
        file=sys.stderr,
        flush=True,
    )
    return fallback


def _earlier_failure(verdict: str | None) -> str | None:
    try:
        with open(verdict) as f:
            found = f.read().strip()
    except (OSError, TypeError):  # none yet, or no verdict file in use
        return None
    if found.startswith("fail: "):
        return f"an earlier process found {found[6:]}"
    if found.startswith("running "):
        pid = int(found.split()[1])
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return f"an earlier check (process {pid}) never finished: the kernel crashed its process or hung"
        except PermissionError:
            pass
    return None


def _record(verdict: str | None, text: str) -> None:
    """Write the verdict file atomically; where it cannot be written, each process checks alone."""
    if verdict is None:
        return
    try:
        with open(f"{verdict}.{os.getpid()}", "w") as f:
            f.write(text + "\n")
        os.replace(f"{verdict}.{os.getpid()}", verdict)
    except OSError:
        pass


def needs_self_check(path: KernelPath) -> bool:
    return path.arch in UNVERIFIED_KERNEL_ARCHS and os.environ.get(SELF_CHECK_ENV) != "0"


def trusted(path: KernelPath, device: torch.device):
    """`path`, self-checked where it needs it (the verdict beside the library: one per build)."""
    return self_checked(path, device, verdict=f"{path.lib._name}.self_check") if needs_self_check(path) else path
