"""Building the CUDA translation unit for a GPU (JIT, cached in torch's extension cache); its C API
for ctypes comes from nvfp4/boundary.py."""

import ctypes
import hashlib
import os

from .boundary import bind
from .cuda_source import cuda_source

BUILD_TARGETS = {90: "90a", 100: "100a"}  # what `make check-cuda` compiles
EMULATION_ENV = "NVFP4_EMULATE_TCGEN05"  # =1: run the sm_100a kernel with tcgen05 emulated (an sm_90 GPU)
EMULATION_SEED_ENV = "NVFP4_EMULATION_SEED"  # the emulated tensor core's delays (even: lazy, odd: eager); unset: random


def kernel_target(capability: tuple[int, int]) -> tuple[int, str] | None:
    """(NVFP4_ARCH, nvcc target) of the CUDA kernel for a compute capability, or None: portable path.

    9.0 (H100, H200) runs the sm_90a kernel; 10.x (B200 class) the sm_100a design, built for
    that exact capability ("a" targets run on one capability only); anything else has none.
    """
    major, minor = capability
    if (major, minor) == (9, 0):
        return 90, "90a"
    if major == 10:
        return 100, f"10{minor}a"
    return None


def nvcc_flags(arch: int, target: str, emulate_tcgen05: bool = False) -> list[str]:
    """nvcc flags of one build; emulate_tcgen05: the sm_100a kernel with tcgen05 emulated, for sm_90a."""
    flags = ["-O3", "-std=c++17", f"-DNVFP4_ARCH={arch}", f"-gencode=arch=compute_{target},code=sm_{target}"]
    if arch == 90 and not emulate_tcgen05:
        flags.append("-split-compile=0")  # its kernels (one per fixed wgmma N) compiled in parallel, on every core
    return flags + ["-DNVFP4_TCGEN05_EMULATION=1"] if emulate_tcgen05 else flags


def build_library(arch: int, target: str, emulate_tcgen05: bool) -> ctypes.CDLL:
    """JIT-build the CUDA source for one architecture (cached by torch across processes)."""
    import inspect

    from torch.utils.cpp_extension import load_inline

    source = cuda_source()
    flavour = f"sm{target}" + ("_tcgen05_emulated" if emulate_tcgen05 else "")
    name = f"nvfp4_grouped_gemm_{flavour}_{hashlib.sha1(source.encode()).hexdigest()[:12]}"
    options = {}
    if "no_implicit_headers" in inspect.signature(load_inline).parameters:
        options["no_implicit_headers"] = True  # no torch header: the build takes seconds, not a minute
    path = load_inline(
        name,
        cpp_sources="",
        cuda_sources=source,
        extra_cuda_cflags=nvcc_flags(arch, target, emulate_tcgen05),
        is_python_module=False,
        **options,
    )
    if not isinstance(path, str):
        from torch.utils.cpp_extension import _get_build_directory

        path = os.path.join(_get_build_directory(name, False), f"{name}.so")
    return bind(ctypes.CDLL(path))  # the C API's signatures, once its descriptors' layout checks out
