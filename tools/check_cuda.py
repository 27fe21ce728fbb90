"""Compile submission.py's CUDA source for every target architecture and check ptxas' report.

    python tools/check_cuda.py [--arch 90 100]

Fails on a compile error, a register spill or a stack frame in any kernel. Needs nvcc (13.0 or
newer), no GPU. Objects and logs go to build/.
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROPERTIES = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def check(arch: int, source: Path, build: Path) -> list[str]:
    import submission

    obj = build / f"nvfp4_sm{arch}.o"
    cmd = ["nvcc", "-c", str(source), "-o", str(obj), "-Xptxas", "-v", *submission.nvcc_flags(arch)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    (build / f"ptxas_sm{arch}.log").write_text(log)
    if proc.returncode:
        return [f"sm_{arch}a: nvcc failed:\n{log[-3000:]}"]
    problems = []
    reports = PROPERTIES.findall(log)
    if not reports:
        problems.append(f"sm_{arch}a: ptxas reported no kernel")
    for stack, spill_st, spill_ld in reports:
        if int(stack) or int(spill_st) or int(spill_ld):
            problems.append(f"sm_{arch}a: {stack} bytes stack frame, {spill_st} bytes spill stores, {spill_ld} bytes spill loads")
    registers = re.findall(r"Used (\d+) registers", log)
    print(f"sm_{arch}a: compiled; registers {', '.join(registers)}; stack and spills "
          f"{'none' if not problems else 'FOUND'}", flush=True)
    return problems


def main():
    import submission

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", type=int, nargs="+", default=sorted(submission.BUILD_ARCHS))
    args = parser.parse_args()
    build = ROOT / "build"
    build.mkdir(exist_ok=True)
    source = build / "nvfp4.cu"
    source.write_text(submission.cuda_source())
    problems = [p for arch in args.arch for p in check(arch, source, build)]
    for p in problems:
        print(p, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
