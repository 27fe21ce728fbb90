"""The leaderboard's interface over the package's entry point: custom_kernel(data), and the
compile step that `python3 submission.py` runs."""

import time

import torch

from .dispatch import describe_path, run, select_path
from .kernel_path import KernelPath
from .layout import from_leaderboard
from .self_check import Fallback, needs_self_check


def custom_kernel(data):
    """The leaderboard's call. data = (abc, sfasfb, sfasfb_reordered, problem_sizes): per group g,
    abc[g] = (a [M, K/2, 1] FP4, b [N, K/2, 1] FP4, c [M, N, 1] fp16), the plain scales (unused),
    the reordered scales (sfa, sfb) and (M, N, K, 1). Writes every c and returns them."""
    try:
        tensors, sizes = from_leaderboard(data)
    except (TypeError, ValueError):
        raise ValueError("input must be (abc_tensors, sfasfb_tensors, sfasfb_reordered_tensors, problem_sizes)") from None
    abc, scales = data[0], data[2]
    if not (len(abc) == len(scales) == len(sizes)) or not sizes:
        raise ValueError(f"need one entry per group: {len(abc)} abc, {len(scales)} scale pairs, {len(sizes)} sizes")
    run(tensors, sizes, 3)
    return [group[2] for group in abc]


def build_for_this_machine() -> None:
    """`python3 submission.py`, the leaderboard's compile step: build the kernel for this GPU (and
    self-check it where it has never run on real hardware), so that the test, benchmark and
    leaderboard processes find it in torch's extension cache."""
    if not torch.cuda.is_available():
        print("nvfp4 grouped gemm: no CUDA GPU here, nothing to build (the portable PyTorch path needs none)")
        return
    device = torch.device("cuda", torch.cuda.current_device())
    capability = torch.cuda.get_device_capability(device)
    gpu = f"{torch.cuda.get_device_name(device)} (compute capability {capability[0]}.{capability[1]})"
    start = time.perf_counter()
    path = select_path(device)
    seconds = time.perf_counter() - start
    if isinstance(path, KernelPath):
        checked = ", self-checked" if needs_self_check(path) else ""
        print(
            f"nvfp4 grouped gemm: the {describe_path(path)} for {gpu} is ready in {seconds:.1f} s (built, or loaded from torch's "
            f"extension cache{checked})"
        )
    elif isinstance(path, Fallback):
        print(f"nvfp4 grouped gemm: the CUDA kernel for {gpu} failed its self-check (above); this machine runs the {describe_path(path)}")
    else:
        print(f"nvfp4 grouped gemm: {gpu} runs the {describe_path(path)}, which needs no build")
