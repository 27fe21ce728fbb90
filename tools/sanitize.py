"""Call a submission's custom_kernel on varied inputs and check every output against the reference:
the workload that `make sanitize` runs under NVIDIA compute-sanitizer.

    python3 -m tools.sanitize [--submission PATH] [--limit N]
    make sanitize [SUBMISSION=PATH] [SANITIZE_ARGS="--limit N"]   # memcheck, synccheck, initcheck

Inputs: the official tests; full-range FP4 codes and E4M3 scales with M = 0, 1, 5, 17 and 129, and N
and K that are not multiples of 128; 64 groups. Each input is called three times on one copy (for a
submission that caches launch plans: a first sight, a second sight and a replay), every time into
outputs poisoned with NaN, so an element the kernel leaves unwritten fails the check. Exits 1 at the
first failing call; --limit N stops after the first N inputs (the emulated sm_100a kernel,
NVFP4_EMULATE_TCGEN05=1, takes minutes per input under the sanitizer). racecheck is not run: it
does not model mbarrier transaction counts and reports hazards on every bulk-copy pipeline,
race-free ones included (docs/DESIGN.md).
"""

import argparse
import sys
from itertools import islice
from pathlib import Path

from harness.runners import clone_data, device_name, load_kernel, synchronize
from harness.spec import read_cases
from reference import check_implementation, generate_full_range_input, generate_input

ROOT = Path(__file__).resolve().parent.parent

CALLS_PER_INPUT = 3


def inputs():
    """(description, data) of every input: the official tests, then the edge cases."""
    for case in read_cases(str(ROOT / "task.yml"), "tests", None):
        yield case.spec, generate_input(**case.args)
    for m, n, k, seed in (
        ((1, 200, 300), (128, 256, 384), (256, 512, 1024), 7),
        ((0, 17, 256), (640, 384, 128), (64, 192, 256), 8),
        ((129, 5), (640, 8), (512, 128), 9),
    ):
        yield f"full range, m: {list(m)}; n: {list(n)}; k: {list(k)}", generate_full_range_input(m, n, k, len(m), seed)
    m64 = tuple(8 * (i % 40) + 1 for i in range(64))
    yield "64 groups, m: 1 .. 313; n: 256; k: 256", generate_input(m=m64, n=(256,) * 64, k=(256,) * 64, g=64, seed=64)


def check_calls(kernel, data) -> str | None:
    """None when CALLS_PER_INPUT calls on one copy of `data` all match the reference, else why not."""
    copy = clone_data(data)
    for call in range(1, CALLS_PER_INPUT + 1):
        for _, _, c in copy[0]:
            c.fill_(float("nan"))
        output = kernel(copy)
        synchronize()
        ok, message = check_implementation(data, output)
        if not ok:
            return f"call {call}: {message}"
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submission", default=str(ROOT / "submission.py"))
    parser.add_argument("--limit", type=int, default=None, help="check only the first N inputs")
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be at least 1, got {args.limit}")
    if not Path(args.submission).is_file():
        parser.error(f"no submission file at {args.submission}")
    kernel = load_kernel(args.submission)
    print(f"{args.submission} on {device_name()}", flush=True)
    count = 0
    for description, data in islice(inputs(), args.limit):
        failure = check_calls(kernel, data)
        if failure:
            print(f"FAIL {description}: {failure}", flush=True)
            return 1
        count += 1
        print(f"ok   {description}", flush=True)
    print(f"{count} input{'' if count == 1 else 's'} checked: every call matched the reference ({CALLS_PER_INPUT} calls each)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
