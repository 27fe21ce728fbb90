"""CUDA toolkits other than the machine's, from the package registry, for compile checks and reading SASS (no GPU).

- "12.8": the CUDA 12.8 runtime headers (wheel nvidia-cuda-runtime-cu12 12.8.90: cuda.h,
  cudaTypedefs.h, cuda_runtime.h). 12.8 is the first CUDA with sm_100a and the 4-bit tensor-map
  types; its nvcc wheel has no nvcc driver, so the machine's nvcc compiles against these headers
  (given first with -I, they are the ones found): the host code meets 12.8's API.
- "13.1": a whole CUDA 13.1 nvcc (the toolkit of the leaderboard's B200 runners), assembled from
  the nvcc, crt, runtime, cccl and nvvm wheels.
- "cuobjdump": the CUDA binary tools cuobjdump and nvdisasm (which cuobjdump runs for -sass), for
  reading the SASS of a build where the machine has none (tools/k_block_sass.py).
Each is downloaded once with `pip download` and unpacked into build/toolkits/ (nothing is
installed: the Python environment does not change).
"""

import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

BUILD = Path(__file__).resolve().parent.parent / "build" / "toolkits"

WHEELS = {
    "12.8": ["nvidia-cuda-runtime-cu12==12.8.90"],
    "13.1": [
        "nvidia-cuda-nvcc==13.1.115",
        "nvidia-cuda-crt==13.1.115",
        "nvidia-cuda-runtime==13.1.80",
        "nvidia-cuda-cccl==13.1.115",
        "nvidia-nvvm==13.1.115",
    ],
    "cuobjdump": ["nvidia-cuda-cuobjdump==13.5.37", "nvidia-cuda-nvdisasm==13.5.37"],
}


@dataclass(frozen=True)
class Toolkit:
    version: str
    nvcc: str  # the nvcc to run
    include: Path | None  # headers to put before nvcc's own (-I), or None: nvcc's own
    lib: Path | None = None  # its libraries (the wheels' layout is not the one nvcc.profile names)

    @property
    def flags(self) -> list[str]:
        return ([f"-I{self.include}"] if self.include else []) + ([f"-L{self.lib}"] if self.lib else [])


def unpacked(version: str) -> Path:
    """The directory holding the wheels of WHEELS[version], downloaded and unpacked on first use.
    RuntimeError if the registry cannot be reached."""
    root = BUILD / version
    if not (root / ".complete").exists():
        wheels = root / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(wheels), *WHEELS[version]],
            capture_output=True,
            text=True,
        )
        if proc.returncode:
            raise RuntimeError(f"could not download the CUDA {version} wheels ({', '.join(WHEELS[version])}): {proc.stderr.strip()[-600:]}")
        for wheel in wheels.glob("*.whl"):
            with zipfile.ZipFile(wheel) as z:
                for info in z.infolist():
                    z.extract(info, root)
                    mode = info.external_attr >> 16 & 0o777  # zipfile drops the permission bits (nvcc, cicc, ptxas...)
                    if mode and not info.is_dir():
                        (root / info.filename).chmod(mode)
            wheel.unlink()  # unpacked: the archive is no longer needed
        (root / ".complete").touch()
    return root


def fetch(version: str) -> Toolkit:
    """The toolkit, downloaded and unpacked on first use. RuntimeError if the registry cannot be reached."""
    root = unpacked(version)
    if version == "12.8":
        return Toolkit(version, "nvcc", root / "nvidia" / "cuda_runtime" / "include")
    return Toolkit(version, str(root / "nvidia" / "cu13" / "bin" / "nvcc"), None, root / "nvidia" / "cu13" / "lib")
