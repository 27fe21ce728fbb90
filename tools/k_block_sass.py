"""Instructions per K block of the sm_90a GEMM kernels built for one wgmma N, read from their SASS.

    python3 -m tools.k_block_sass        (make k-block)

A consumer warp's K block (wait for the stage, load and decode B's fragments, issue the wgmma,
wait for the previous K block's) is the kernel's inner loop. When A has few rows its instruction
count, not the tensor cores or DRAM, sets the time: the consumer warps (eight in tile shape 0,
sixteen with one half's rows each in shape 1) share four schedulers (docs/perf-log/log.md sections 23, 28). The count is read from the
library's build with cuobjdump (the machine's, or the registry's wheel: tools/cuda_toolkits.py),
so it needs nvcc and no GPU; the tests hold it to a budget.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tools.cuda_toolkits import unpacked
from tools.nvcc_build import build

# grouped_gemm<kFixedN8, kShape, LaunchArgs>: the list form's kernels.
LIST_KERNEL = re.compile(r"_ZN5nvfp44sm9012grouped_gemmILi(\d+)ELi(\d+)ENS_10LaunchArgsEEEvT1_")
INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/\s+([^;]+);")
# wgmma_wait<kHalves> in the K block, one a K block ("gsb0, 0x0" is the wait after the tile's last).
K_BLOCK_WAIT = re.compile(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x[1-9]")


def cuobjdump() -> tuple[str, dict[str, str]]:
    """The machine's cuobjdump, or the registry's with its nvdisasm (RuntimeError if they cannot be
    downloaded), and the environment to run it in."""
    if shutil.which("cuobjdump") and shutil.which("nvdisasm"):
        return "cuobjdump", dict(os.environ)
    tools = unpacked("cuobjdump") / "nvidia" / "cu13" / "bin"
    return str(tools / "cuobjdump"), {**os.environ, "NVDISASM_PATH": str(tools)}


def functions(library: Path) -> dict[str, list[str]]:
    """Each kernel's SASS instructions, by mangled name."""
    tool, env = cuobjdump()
    proc = subprocess.run([tool, "-sass", str(library)], capture_output=True, text=True, env=env)
    if proc.returncode:
        raise RuntimeError(f"cuobjdump -sass {library} failed: {proc.stderr.strip()[-600:]}")
    found: dict[str, list[str]] = {}
    current = None
    for line in proc.stdout.splitlines():
        if "Function : " in line:
            current = found.setdefault(line.split("Function : ")[1].strip(), [])
        elif current is not None and (m := INSTRUCTION.search(line)):
            current.append(m.group(1).strip())
    return found


def k_block_instructions(body: list[str]) -> int:
    """Instructions of one K block: the shortest distance between the K loop's consecutive waits
    (the loop is unrolled twice, for the two fragment buffers, so consecutive waits are a K block apart)."""
    waits = [i for i, instruction in enumerate(body) if K_BLOCK_WAIT.search(instruction)]
    if len(waits) < 2:
        raise ValueError("no two K-block waits (WARPGROUP.DEPBAR.LE with a nonzero count) in this kernel")
    return min(b - a for a, b in zip(waits, waits[1:]))


def k_blocks(library: Path) -> dict[tuple[int, int], int]:
    """{(tile shape, wgmma N): instructions per K block} of the list form's kernels built for one N."""
    counts = {}
    for name, body in functions(library).items():
        m = LIST_KERNEL.fullmatch(name)
        if m and int(m.group(1)) > 0:
            counts[(int(m.group(2)), 8 * int(m.group(1)))] = k_block_instructions(body)
    return dict(sorted(counts.items()))


def main() -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print("building the sm_90a library with nvcc (a minute or so unless cached) ...", file=sys.stderr, flush=True)
    library, _ = build(90)
    counts = k_blocks(library)
    print(f"sm_90a, {library.name}: instructions per K block of a consumer warp (the list form's kernels built for one wgmma N)")
    print(f"{'tile shape':>10} {'wgmma N':>8} {'instructions':>13}")
    for (shape, n), count in counts.items():
        print(f"{shape:>10} {n:>8} {count:>13}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
