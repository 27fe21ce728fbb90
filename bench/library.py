"""The library's op against submission.py on the official benchmark cases, in one run, timed as the
leaderboard times (its 64 GiB flush, then the 15 input sets back to back, CUDA events).

    python3 -m bench.library            (make library-bench)

Per case: submission.py's custom_kernel (its private CUDA graphs replayed through ctypes, on the
default queue); nvfp4.grouped_gemm captured once per input set in a torch.cuda.graph and replayed
(the way a serving engine runs it); the op called plainly on the current queue (each call replays
the op's own cached graph). Every path is first checked against the reference on every input set.
Then the host's part: the same plain op calls timed after a synchronize (what a caller outside a
CUDA graph waits for), against submission.py's.
"""

import argparse
import sys
from pathlib import Path

import torch

import nvfp4
from harness.floors import geomean
from harness.report import format_time, table
from harness.runners import NUM_ITERATIONS_PER_BENCHMARK, checked_input_sets, leaderboard_flush, time_calls
from harness.spec import read_cases

ROOT = Path(__file__).resolve().parent.parent

REPEATS, MAX_NS = 100, 10e9


def op_operands(data):
    """The leaderboard's data as the op's lists: a, b, sfa, sfb, and c's [M, N] views as out."""
    abc, _, scales, _ = data
    return (
        [a[..., 0] for a, _, _ in abc],
        [b[..., 0] for _, b, _ in abc],
        [s for s, _ in scales],
        [s for _, s in scales],
        [c[..., 0] for _, _, c in abc],
    )


def plain_op(operands):
    a, b, sfa, sfb, out = operands
    nvfp4.grouped_gemm(a, b, sfa, sfb, out=out)


def captured(operands) -> torch.cuda.CUDAGraph:
    plain_op(operands)  # first use and the op's own graph outside the capture, as a serving engine warms up
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plain_op(operands)
    return graph


def check(data_list, first_mismatch, run) -> None:
    """Every input set through `run` into NaN-poisoned outputs, checked as the benchmark checks them."""
    for data in data_list:
        for _, _, c in data[0]:
            c.fill_(float("nan"))
    for j in range(len(data_list)):
        run(j)
    torch.cuda.synchronize()
    if message := first_mismatch([[c for _, _, c in data[0]] for data in data_list]):
        raise SystemExit(message)


def main() -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    if not torch.cuda.is_available():
        print("bench.library needs a CUDA GPU", file=sys.stderr)
        return 1  # as every benchmark without its GPU
    submission = str(ROOT / "submission.py")
    flush = leaderboard_flush()
    print(f"device: {torch.cuda.get_device_name()}; nvfp4 path: {nvfp4.prepare()}\nflush: {flush.describe()}", flush=True)
    rows, columns = [], {name: [] for name in ("sub", "graph", "op", "sub_host", "op_host")}
    for i, case in enumerate(read_cases(str(ROOT / "task.yml"), "benchmarks", None)):
        checked = checked_input_sets(submission, case.args, NUM_ITERATIONS_PER_BENCHMARK)
        if isinstance(checked, str):
            raise SystemExit(f"case {i}: submission.py: {checked}")
        kernel, data_list, first_mismatch = checked[:3]
        operands = [op_operands(d) for d in data_list]
        graphs = [captured(ops) for ops in operands]
        check(data_list, first_mismatch, lambda j: graphs[j].replay())
        check(data_list, first_mismatch, lambda j: plain_op(operands[j]))
        stats = {
            "sub": time_calls(kernel, data_list, REPEATS, MAX_NS, flush=flush),
            "graph": time_calls(torch.cuda.CUDAGraph.replay, graphs, REPEATS, MAX_NS, flush=flush),
            "op": time_calls(plain_op, operands, REPEATS, MAX_NS, flush=flush),
            "sub_host": time_calls(kernel, data_list, REPEATS, MAX_NS),
            "op_host": time_calls(plain_op, operands, REPEATS, MAX_NS),
        }
        for name, s in stats.items():
            columns[name].append(s.mean)
        rows.append(
            [
                str(i),
                format_time(stats["sub"].mean),
                format_time(stats["graph"].mean),
                f"{stats['graph'].mean / stats['sub'].mean:.3f}",
                format_time(stats["op"].mean),
                format_time(stats["sub_host"].mean),
                format_time(stats["op_host"].mean),
                case.spec,
            ]
        )
        print(f"case {i} done", file=sys.stderr, flush=True)
    rows.append(
        [
            "geo",
            *(format_time(geomean(columns[n])) for n in ("sub", "graph")),
            f"{geomean(columns['graph']) / geomean(columns['sub']):.3f}",
            *(format_time(geomean(columns[n])) for n in ("op", "sub_host", "op_host")),
            "(geometric mean)",
        ]
    )
    print(table(["case", "submission.py", "op, captured", "captured / sub", "op, plain", "sub, with host", "op, with host", "spec"], rows))
    print(
        "submission.py, op captured, op plain: GPU time per call, after the leaderboard's flush (host hidden); "
        "with host: the same calls timed after a synchronize"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
