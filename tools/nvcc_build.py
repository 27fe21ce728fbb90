"""Build submission.py's CUDA source into a shared library with plain nvcc (no torch, no GPU needed).

The library's host functions (tile schedule, scale offsets, plan inspection) can be called
through ctypes on any machine; its kernels need their GPU. Builds are cached in build/ by a
hash of the source and flags.
"""
import ctypes
import hashlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
sys.path.insert(0, str(ROOT))

import submission  # noqa: E402


def build(arch: int, target: str | None = None) -> tuple[Path, str]:
    """(path of the shared library, ptxas report) for NVFP4_ARCH=arch on nvcc target `target`."""
    target = target or submission.BUILD_TARGETS[arch]
    source = submission.cuda_source()
    flags = submission.nvcc_flags(arch, target)
    digest = hashlib.sha1((source + " ".join(flags)).encode()).hexdigest()[:12]
    BUILD.mkdir(exist_ok=True)
    lib, log_path = BUILD / f"libnvfp4_sm{target}_{digest}.so", BUILD / f"ptxas_sm{target}_{digest}.log"
    if not lib.exists() or not log_path.exists():
        cu = BUILD / f"nvfp4_{digest}.cu"
        cu.write_text(source)
        cmd = ["nvcc", "-shared", "-Xcompiler", "-fPIC", "-Xptxas", "-v", *flags, str(cu), "-o", str(lib)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"nvcc failed for sm_{target}:\n{(proc.stdout + proc.stderr)[-4000:]}")
        log_path.write_text(proc.stdout + proc.stderr)
    return lib, log_path.read_text()


def load(arch: int, target: str | None = None) -> ctypes.CDLL:
    return submission.bind_library(ctypes.CDLL(str(build(arch, target)[0])))
