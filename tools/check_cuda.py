"""Compile submission.py's CUDA source for every target architecture and check ptxas' report.

    python tools/check_cuda.py [--arch 90 100]

Fails on a compile error, a register spill or a stack frame in any kernel, or when ptxas reports
that it serialized the wgmma pipeline (its "Potential Performance Loss" notes C7510-C7520: the
kernel stays correct but each wgmma waits for the previous one). Also compiles the test
build of the sm_100a kernel with tcgen05 emulated for sm_90a (it must compile; its emulation code
may use a stack). Needs nvcc (13.0 or newer), no GPU. The libraries and ptxas logs stay in build/
(the tests reuse them).
"""
import argparse
import re
import sys

from nvcc_build import build, submission

PROPERTIES = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
WGMMA_SERIALIZED = re.compile(r"\((C75\d\d)\) Potential Performance Loss: wgmma.mma_async instructions are serialized[^\n]*")


def check(arch: int) -> list[str]:
    target = submission.BUILD_TARGETS[arch]
    try:
        _, log = build(arch)
    except RuntimeError as e:
        return [str(e)]
    reports = PROPERTIES.findall(log)
    problems = [] if reports else [f"sm_{target}: ptxas reported no kernel"]
    for stack, spill_st, spill_ld in reports:
        if int(stack) or int(spill_st) or int(spill_ld):
            problems.append(f"sm_{target}: {stack} bytes stack frame, {spill_st} bytes spill stores, {spill_ld} bytes spill loads")
    serialized = [f"sm_{target}: ptxas {m.group(0)}" for m in WGMMA_SERIALIZED.finditer(log)]
    registers = ", ".join(re.findall(r"Used (\d+) registers", log))
    print(f"sm_{target}: {len(reports)} kernel(s), registers {registers}; stack frames and spills: "
          f"{'FOUND' if problems else 'none'}; serialized wgmma: {'FOUND' if serialized else 'none'}", flush=True)
    return problems + serialized


def check_emulation_build() -> list[str]:
    try:
        _, log = build(100, emulate_tcgen05=True)
    except RuntimeError as e:
        return [str(e)]
    registers = ", ".join(re.findall(r"Used (\d+) registers", log))
    print(f"sm_100a kernel with tcgen05 emulated (sm_90a test build): compiles, registers {registers}", flush=True)
    return []


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", type=int, nargs="+", default=sorted(submission.BUILD_TARGETS))
    problems = [p for arch in parser.parse_args().arch for p in check(arch)]
    if 100 in parser.parse_args().arch:
        problems += check_emulation_build()
    for p in problems:
        print(p, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
