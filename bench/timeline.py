"""Per-CTA timeline of the sm_90a GEMM (`make timeline`, an sm_90 GPU with nvcc): when each CTA
starts, when its first stage lands, when its K loops and its stores end.

    python3 -m bench.timeline [--revision .] [--cases "E=8, 1-8;case 0"] [--repeats 5]

The library is csrc/ of the working tree (or of a git revision) built with
NVFP4_TIMELINE=1 (csrc/timeline.cuh): each CTA writes the GPU's globaltimer at those four points.
Each case (bench/regimes.py's, chosen by a piece of their label) runs `repeats` calls, each alone
right after the leaderboard's flush; per case it prints the CTAs and, for each mark, the median
over the calls of the marks' median and latest over the CTAs, in us from the first CTA's entry.
Between the median and the latest is what the slowest CTAs cost; the first stage's time is the fill
the consumers wait for (docs/perf-log/log.md section 29). A call of several launches keeps, per CTA index,
its last launch's marks.
"""

import argparse
import ctypes
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

from bench.regimes import regime_cases

ROOT = Path(__file__).resolve().parent.parent

MARKS = ("entry", "first stage full", "K loops end", "stores end")  # csrc/timeline.cuh's TimelineMark
TIMELINE_CTAS = 1024  # its kTimelineCtas


def chosen_cases(parser: argparse.ArgumentParser, text: str | None) -> list[tuple[str, dict]]:
    """(label, generate_input arguments) of the cases whose label holds a piece of `text` (';'-separated;
    None: every case); a usage error for a piece that matches none."""
    cases = [(label, case) for _, label, case in regime_cases()]
    if text is None:
        return cases
    pieces = [p.strip() for p in text.split(";") if p.strip()]
    unmatched = [p for p in pieces if not any(p in label for label, _ in cases)]
    if unmatched or not pieces:
        parser.error(f"--cases: {unmatched or text!r} match no case of bench/regimes.py: {[label for label, _ in cases]}")
    return [(label, case) for label, case in cases if any(p in label for p in pieces)]


def call_marks(marks: np.ndarray, after: int) -> np.ndarray:
    """The marks of the CTAs that entered after `after` (ns), in us from the first of them."""
    fresh = marks[marks[:, 0] > after].astype(np.int64)
    if not len(fresh):
        raise SystemExit("no CTA left marks: the call ran no sm_90a GEMM kernel (a portable path?)")
    return (fresh - fresh[:, 0].min()) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--revision", default=".", help="a git revision whose csrc/ to build (. for the working tree)")
    parser.add_argument("--cases", help="';'-separated pieces of bench/regimes.py's case labels (default: every case)")
    parser.add_argument("--repeats", type=int, default=5, help="calls per case, each after the flush")
    args = parser.parse_args()
    cases = chosen_cases(parser, args.cases)
    if args.repeats < 1:
        parser.error("--repeats: at least 1")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        sys.exit("bench/timeline.py builds and runs the sm_90a kernels: it needs an sm_90 GPU")

    import nvfp4
    from harness.runners import leaderboard_flush
    from nvfp4 import dispatch
    from nvfp4.boundary import bind
    from nvfp4.kernel_path import KernelPath
    from reference import generate_input
    from tools.check_cuda import ptxas_problems
    from tools.nvcc_build import build, revision_sources

    library, ptxas = build(90, tree=revision_sources(args.revision), defines=("NVFP4_TIMELINE=1",))
    for note in ptxas_problems(ptxas):  # none in the production build (make check-cuda)
        print(f"note: {note}: its times may differ a little from the production build's", flush=True)
    raw = ctypes.CDLL(str(library))
    if not hasattr(raw, "nvfp4_read_timeline"):
        sys.exit(f"{args.revision}'s csrc/ has no timeline marks (csrc/timeline.cuh)")
    device = torch.device("cuda", torch.cuda.current_device())
    flush = leaderboard_flush()
    marks = np.zeros((TIMELINE_CTAS, len(MARKS)), dtype=np.uint64)
    print(f"{library.name}: us from the first CTA's entry, median / latest over the CTAs (median of {args.repeats} calls)")
    print(f"{'case':40} {'CTAs':>4}" + "".join(f" | {m:>17}" for m in MARKS), flush=True)
    last_entry = 0
    with dispatch.use_path(device, KernelPath(bind(raw), device)):
        for label, case in cases:
            data = generate_input(**case)
            for _ in range(2):  # the plan and its CUDA graph made before the calls read, which replay it
                nvfp4.custom_kernel(data)
            calls = []
            for _ in range(args.repeats):
                flush()
                nvfp4.custom_kernel(data)
                torch.cuda.synchronize()
                if code := raw.nvfp4_read_timeline(marks.ctypes.data_as(ctypes.c_void_p)):
                    sys.exit(f"reading the marks failed: CUDA error {code}")
                calls.append(call_marks(marks, last_entry))
                last_entry = int(marks[:, 0].max())
            p50 = [statistics.median(float(np.median(c[:, j])) for c in calls) for j in range(len(MARKS))]
            latest = [statistics.median(float(c[:, j].max()) for c in calls) for j in range(len(MARKS))]
            print(f"{label:40} {len(calls[0]):>4}" + "".join(f" | {a:8.2f} {b:8.2f}" for a, b in zip(p50, latest)), flush=True)


if __name__ == "__main__":
    main()
