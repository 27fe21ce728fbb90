"""Compile the CUDA source for every target architecture and check ptxas' report.

    python3 -m tools.check_cuda [--arch 90 100] [--no-other-toolkits]

Fails on a compile error, a register spill or a stack frame in any kernel, or when ptxas reports
that it serialized the wgmma pipeline (its "Potential Performance Loss" notes C7510-C7520: the
kernel stays correct but each wgmma waits for the previous one). Both forms of the source compile:
the library's (launching on the queue it is given) in full, submission.py's (the default queue only;
the same kernels) as host code and PTX. Also compiles the test
build of the sm_100a kernel with tcgen05 emulated for sm_90a and the emulation's probe kernels
(they must compile; emulation code may use a stack). Then, with toolkits from the package registry (tools/cuda_toolkits.py): the
source against the CUDA 12.8 headers (host code and PTX; the 12.8 wheels have no nvcc driver,
so no machine code), and the same full checks with the CUDA 13.1 nvcc. Needs nvcc (13.0 or
newer), no GPU. The libraries and ptxas logs stay in build/ (the tests reuse them).
"""

import argparse
import re
import shutil
import sys

from nvfp4.build import BUILD_TARGETS
from tools.cuda_toolkits import Toolkit, fetch
from tools.nvcc_build import LEADERBOARD_OVERRIDES, MACHINE_TOOLKIT, ROOT, build, included_headers, probe_library

PROPERTIES = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
WGMMA_SERIALIZED = re.compile(r"\((C75\d\d)\) Potential Performance Loss: wgmma.mma_async instructions are serialized[^\n]*")


def ptxas_problems(log: str) -> list[str]:
    """What a ptxas report (-v) says costs its kernels: a stack frame or spills (named by kernel), and
    serialized wgmma."""
    problems, kernel = [], None
    for line in log.splitlines():
        if "Compiling entry function" in line:
            kernel = line.split("'")[1]
        elif (m := PROPERTIES.search(line)) and any(int(x) for x in m.groups()):
            problems.append(f"{kernel}: {m.group(0)}")
    return problems + [f"ptxas {m.group(0)}" for m in WGMMA_SERIALIZED.finditer(log)]


def building(name: str) -> None:
    """A line on stderr before each nvcc build, which may take a minute or more with no other output."""
    print(f"{name}: building ...", file=sys.stderr, flush=True)


def check(arch: int, toolkit: Toolkit = MACHINE_TOOLKIT) -> list[str]:
    target = BUILD_TARGETS[arch]
    name = f"sm_{target}" + (f" (CUDA {toolkit.version})" if toolkit.version else "")
    building(name)
    try:
        _, log = build(arch, toolkit=toolkit)
    except RuntimeError as e:
        return [f"{name}: {e}"]
    kernels = len(PROPERTIES.findall(log))
    found = ptxas_problems(log)
    spills = [p for p in found if not p.startswith("ptxas ")]
    registers = ", ".join(re.findall(r"Used (\d+) registers", log))
    print(
        f"{name}: {kernels} kernel(s), registers {registers}; stack frames and spills: "
        f"{'FOUND' if spills else 'none'}; serialized wgmma: {'FOUND' if len(found) > len(spills) else 'none'}",
        flush=True,
    )
    return ([] if kernels else [f"{name}: ptxas reported no kernel"]) + [f"{name}: {p}" for p in found]


def check_headers_only(arch: int, toolkit: Toolkit) -> list[str]:
    """The source compiled (host code and PTX) against the toolkit's headers, which must be the ones read."""
    name = f"sm_{BUILD_TARGETS[arch]} against the CUDA {toolkit.version} headers"
    building(name)
    try:
        foreign = [h for h in included_headers(arch, toolkit) if h.endswith("/cuda_runtime_api.h")]
        if foreign != [str(toolkit.include / "cuda_runtime_api.h")]:
            return [f"{name}: nvcc read {foreign or 'no cuda_runtime_api.h'}, not the CUDA {toolkit.version} one"]
        build(arch, toolkit=toolkit, device_code=False)
    except RuntimeError as e:
        return [f"{name}: {e}"]
    print(f"{name}: host code and PTX compile", flush=True)
    return []


def check_leaderboard_form(arch: int) -> list[str]:
    """submission.py's form of the source (host/queue_default.cuh in place of host/queue.cuh): host code and PTX."""
    name = f"sm_{BUILD_TARGETS[arch]}, submission.py's form (the default queue only)"
    building(name)
    try:
        build(arch, overrides=LEADERBOARD_OVERRIDES, device_code=False)
    except RuntimeError as e:
        return [f"{name}: {e}"]
    print(f"{name}: host code and PTX compile", flush=True)
    return []


def check_emulation_build() -> list[str]:
    building("sm_100a kernel with tcgen05 emulated (sm_90a test build)")
    try:
        _, log = build(100, emulate_tcgen05=True)
    except RuntimeError as e:
        return [str(e)]
    registers = ", ".join(re.findall(r"Used (\d+) registers", log))
    print(f"sm_100a kernel with tcgen05 emulated (sm_90a test build): compiles, registers {registers}", flush=True)
    try:
        probe_library(ROOT / "tests" / "cuda" / "tcgen05_probes.cu")
    except RuntimeError as e:
        return [str(e)]
    print("tcgen05 emulation probes (tests/cuda/tcgen05_probes.cu): compile", flush=True)
    return []


def check_other_toolkits(arches: list[int]) -> list[str]:
    problems = []
    for version, full in (("12.8", False), ("13.1", True)):
        try:
            toolkit = fetch(version)
        except RuntimeError as e:
            problems.append(str(e))
            continue
        problems += [p for arch in arches for p in (check(arch, toolkit) if full else check_headers_only(arch, toolkit))]
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", type=int, nargs="+", default=sorted(BUILD_TARGETS), choices=sorted(BUILD_TARGETS))
    parser.add_argument("--no-other-toolkits", action="store_true", help="only the machine's nvcc (no download)")
    args = parser.parse_args()
    if shutil.which("nvcc") is None:
        sys.exit("make check-cuda needs nvcc (CUDA 13.0 or newer, from the CUDA toolkit) on PATH, and there is none")
    problems = [p for arch in args.arch for p in check(arch) + check_leaderboard_form(arch)]
    if 100 in args.arch:
        problems += check_emulation_build()
    if not args.no_other_toolkits:
        problems += check_other_toolkits(args.arch)
    for p in problems:
        print(p, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
