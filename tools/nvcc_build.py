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
from cuda_toolkits import Toolkit  # noqa: E402

MACHINE_TOOLKIT = Toolkit("", "nvcc", None)  # the nvcc on PATH, with its own headers


def build(arch: int, target: str | None = None, emulate_tcgen05: bool = False, source: str | None = None,
          toolkit: Toolkit | None = None, device_code: bool = True) -> tuple[Path, str]:
    """(path of the shared library, or of the object file without device_code; ptxas report) for
    NVFP4_ARCH=arch on nvcc target `target`.

    emulate_tcgen05: the sm_100a kernel with tcgen05 emulated, built for sm_90a. source: another
    CUDA source than submission.py's (the tests build deliberately broken variants). toolkit: a
    CUDA toolkit other than the machine's (tools/cuda_toolkits.py). device_code=False: an object
    file with PTX only (no ptxas), enough to check the host code against the toolkit's API.
    """
    toolkit = toolkit or MACHINE_TOOLKIT
    target = target or ("90a" if emulate_tcgen05 else submission.BUILD_TARGETS[arch])
    source = source or submission.cuda_source()
    flags = [*toolkit.flags, *submission.nvcc_flags(arch, target, emulate_tcgen05)]
    if not device_code:
        flags = [f.replace(f"code=sm_{target}", f"code=compute_{target}") for f in flags]
    digest = hashlib.sha1((source + " ".join(flags) + toolkit.nvcc).encode()).hexdigest()[:12]
    BUILD.mkdir(exist_ok=True)
    flavour = f"sm{target}" + ("_tcgen05_emulated" if emulate_tcgen05 else "") + (f"_cuda{toolkit.version}" if toolkit.version else "")
    out = BUILD / (f"libnvfp4_{flavour}_{digest}.so" if device_code else f"nvfp4_{flavour}_{digest}.o")
    log_path = BUILD / f"ptxas_{flavour}_{digest}.log"
    if not out.exists() or not log_path.exists():
        cu = BUILD / f"nvfp4_{digest}.cu"
        cu.write_text(source)
        link = ["-shared", "-Xcompiler", "-fPIC"] if device_code else ["-c"]
        log_path.write_text(_nvcc(toolkit.nvcc, [*link, "-Xptxas", "-v", *flags, str(cu)], out, f"sm_{target}"))
    return out, log_path.read_text()


def included_headers(arch: int, toolkit: Toolkit) -> list[str]:
    """The headers nvcc reads for submission.py's source with this toolkit (its -M list)."""
    BUILD.mkdir(exist_ok=True)
    cu = BUILD / "nvfp4_headers.cu"
    cu.write_text(submission.cuda_source())
    flags = [*toolkit.flags, *submission.nvcc_flags(arch, submission.BUILD_TARGETS[arch])]
    proc = subprocess.run([toolkit.nvcc, "-M", *flags, str(cu)], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"nvcc -M failed:\n{(proc.stdout + proc.stderr)[-4000:]}")
    return proc.stdout.replace("\\\n", " ").split()


def _nvcc(nvcc: str, args: list[str], out: Path, what: str) -> str:
    """Run nvcc with `-o out`; its output (the ptxas report with -Xptxas -v)."""
    proc = subprocess.run([nvcc, *args, "-o", str(out)], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"nvcc failed for {what}:\n{(proc.stdout + proc.stderr)[-4000:]}")
    return proc.stdout + proc.stderr


def load(arch: int, target: str | None = None, emulate_tcgen05: bool = False, source: str | None = None) -> ctypes.CDLL:
    return submission.bind_library(ctypes.CDLL(str(build(arch, target, emulate_tcgen05, source)[0])))


def build_probes(probe_source: Path) -> ctypes.CDLL:
    """A library of test kernels (`probe_source`) that #include submission.py's source, built as
    the tcgen05 emulation build (NVFP4_ARCH=100 for sm_90a)."""
    source = submission.cuda_source()
    flags = submission.nvcc_flags(100, "90a", emulate_tcgen05=True)
    digest = hashlib.sha1((source + probe_source.read_text() + " ".join(flags)).encode()).hexdigest()[:12]
    BUILD.mkdir(exist_ok=True)
    lib = BUILD / f"lib{probe_source.stem}_{digest}.so"
    if not lib.exists():
        header = BUILD / f"nvfp4_{digest}.cuh"
        header.write_text(source)
        _nvcc("nvcc", ["-shared", "-Xcompiler", "-fPIC", *flags, f'-DNVFP4_SOURCE="{header.name}"', f"-I{BUILD}", str(probe_source)], lib,
              probe_source.name)
    return ctypes.CDLL(str(lib))
