"""Which path computes a call on a device (chosen once per device), and the one entry point that
both the library's ops and the leaderboard's custom_kernel call."""

import contextlib
import os

import torch

from .build import EMULATION_ENV, build_library, kernel_target
from .kernel_path import KernelPath
from .launch_queue import capturing
from .portable import portable_kernel, scaled_mm_kernel
from .self_check import UNVERIFIED_KERNEL_ARCHS, Fallback, kernel_name, trusted
from .validate import validate

PORTABLE_ENV = "NVFP4_PATH"  # =portable: the portable path on every device
_paths = {}


def select_path(device: torch.device):
    """The implementation for a device: its architecture's CUDA kernel where there is one, else portable.

    NVFP4_PATH=portable forces the portable path; NVFP4_EMULATE_TCGEN05=1 runs the sm_100a kernel
    with its tcgen05 instructions emulated (a test mode for sm_90 GPUs, slow). Both are read when a
    device's path is first chosen; a kernel is built and loaded then (and self-checked where it has
    never run on real hardware), which cannot happen inside a CUDA graph capture.
    """
    if device not in _paths:
        capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
        target = kernel_target(capability) if capability else None
        emulated = os.environ.get(EMULATION_ENV) == "1"
        if emulated and capability != (9, 0):
            raise RuntimeError(f"{EMULATION_ENV}=1 emulates tcgen05 on an sm_90 GPU; {device} is {capability or 'not a GPU'}")
        if not emulated and (target is None or os.environ.get(PORTABLE_ENV) == "portable"):
            _paths[device] = portable_kernel
            return portable_kernel
        arch, built_for = (100, "90a") if emulated else target
        if capturing():
            checked = (
                " and checked (it has never run on real hardware; the check waits for the GPU)" if arch in UNVERIFIED_KERNEL_ARCHS else ""
            )
            raise RuntimeError(
                f"nvfp4 grouped gemm: the sm_{arch}a kernel for {device} is built, loaded{checked} on its first use "
                f"in a process, which cannot happen inside a CUDA graph capture: call nvfp4.prepare() (or the op "
                f"once) before capturing"
            )
        _paths[device] = trusted(KernelPath(build_library(arch, built_for, emulated), device), device)
    return _paths[device]


def path_of(device: torch.device):
    """The path that computes calls on `device`: the one chosen for it, chosen now on its first use."""
    return _paths.get(device) or select_path(device)


@contextlib.contextmanager
def use_path(device, path):
    """Inside the block, calls on `device` (default: the current GPU, else the CPU) take `path`: a
    KernelPath of another build of the kernels, or one of this module's portable paths; after it,
    the path before (or none, to be chosen again). How the tests and bench scripts run a given build."""
    device = _device(device)
    before = _paths.get(device)
    _paths[device] = path
    try:
        yield path
    finally:
        if before is None:
            _paths.pop(device, None)
        else:
            _paths[device] = before


def run(tensors: list, sizes, operand_rank: int, alpha=None) -> None:
    """The grouped GEMM of a call (tensors, sizes and alpha as layout.py describes them) into its c
    tensors, on the path of the tensors' device, on the caller's current queue."""
    first = tensors[0] if tensors else None
    if not isinstance(first, torch.Tensor):
        validate(tensors, sizes, operand_rank, alpha)
    path = path_of(first.device)
    if isinstance(path, KernelPath):  # it validates on its own misses
        path(tensors, sizes, operand_rank, alpha)
    else:
        validate(tensors, sizes, operand_rank, alpha)
        path(tensors, sizes, alpha)


def describe_path(path) -> str:
    """A path of select_path() in words."""
    if isinstance(path, KernelPath):
        return kernel_name(path)
    if isinstance(path, Fallback):
        return f"{describe_path(path.path)}, the fallback after the {path.kernel} failed its first-use self-check"
    return {portable_kernel: "portable PyTorch path", scaled_mm_kernel: "FP4 torch._scaled_mm"}[path]


def _device(device) -> torch.device:
    if device is None:
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(device)
    return torch.device("cuda", torch.cuda.current_device()) if device.type == "cuda" and device.index is None else device


def path_in_use(device=None) -> str:
    """What runs on `device` (default: the current GPU, else the CPU), in words; the harness prints it
    after the tests."""
    path = _paths.get(_device(device))
    return "none yet (nothing has run on this device)" if path is None else describe_path(path)


def prepare(device=None) -> str:
    """Build (or load from torch's extension cache) and, where it has never run on real hardware,
    self-check the kernel of `device` (default: the current GPU, else the CPU) now, outside any graph
    capture; returns path_in_use(device)."""
    device = _device(device)
    select_path(device)
    return path_in_use(device)
