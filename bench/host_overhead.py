"""Host and GPU time of one custom_kernel call on the GPU at hand, per official benchmark case.

    python3 -m bench.host_overhead [--submission PATH]

- first sight: a signature never seen (fresh buffers): validation, plan, plain launches;
- second sight: the same signature again: the CUDA graph is built, then launched;
- hit: a signature whose graph exists: the graph is replayed.
Host time: the call's wall time with the GPU idle (median of 20 first and second sights, 300 hits
synchronized every 10). GPU time: CUDA events around the call, queued behind GPU work that
evicts L2 and outlasts the host's part, as the leaderboard's flush does (median of 20).
"""

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import torch

from harness.runners import clone_data
from harness.spec import read_cases
from reference import generate_input

ROOT = Path(__file__).resolve().parent.parent

SETS = 20


def load(path: str):
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.custom_kernel


def host_us(fn, arg) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter_ns()
    fn(arg)
    return (time.perf_counter_ns() - t0) / 1e3


class GpuTimer:
    """GPU time of one call, its host part hidden behind earlier GPU work."""

    def __init__(self):
        self.flush = torch.empty(256 * 1024**2, dtype=torch.uint8, device="cuda")  # several times the L2
        self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def __call__(self, fn, arg) -> float:
        torch.cuda.synchronize()
        self.flush.zero_()
        torch.cuda._sleep(20_000_000)  # about 10 ms of GPU time: longer than any call's host part
        self.start.record()
        fn(arg)
        self.end.record()
        self.end.synchronize()
        return self.start.elapsed_time(self.end) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--submission", default=str(ROOT / "submission.py"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/host_overhead.py needs a CUDA GPU")
    kernel = load(args.submission)
    gpu_us = GpuTimer()
    print(f"{'':<5} {'host time (us)':^35}  {'GPU time (us)':^35}", flush=True)
    print(f"{'case':<5} {'first':>11} {'second':>11} {'hit':>11}  {'first':>11} {'second':>11} {'hit':>11}  shape", flush=True)
    for i, case in enumerate(read_cases(str(ROOT / "task.yml"), "benchmarks", None)):
        data = generate_input(**case.args)
        kernel(data)  # JIT build and warm-up outside the timing
        row = []
        for timer in (host_us, gpu_us):
            clones = [clone_data(data) for _ in range(SETS)]  # all alive: every one has new addresses
            first = statistics.median(timer(kernel, d) for d in clones)
            second = statistics.median(timer(kernel, d) for d in clones)
            hits = [timer(kernel, d) for d in clones]
            row += [first, second, statistics.median(hits)]
            del clones
        torch.cuda.synchronize()
        hits = []
        for j in range(300):
            t0 = time.perf_counter_ns()
            kernel(data)
            hits.append((time.perf_counter_ns() - t0) / 1e3)
            if j % 10 == 9:
                torch.cuda.synchronize()
        row[2] = statistics.median(hits)
        print(
            f"{i:<5} "
            + " ".join(f"{v:>11.2f}" for v in row[:3])
            + "  "
            + " ".join(f"{v:>11.2f}" for v in row[3:])
            + f"  G={case.args['g']}",
            flush=True,
        )


if __name__ == "__main__":
    main()
