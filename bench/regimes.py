"""The kernel in three regimes against its floors and cuBLAS (`make regimes`, a CUDA GPU).

    python3 -m bench.regimes [--sets 15] [--seconds 4] [--regimes "many rows"]

- Few rows per expert (8 to 64 experts of 0 to 32 rows, N and K from 2048 to 7168: the decode steps
  of a served MoE layer). Each shape's floor is DRAM's: every active expert's B and scales, plus A
  and its scales and C, moved once at the copy bandwidth measured in the same run.
- The official benchmark cases, and many rows (8 groups of 2048 rows, N 4096, K 7168): the floor is
  the larger of that and the FLOP count at the bf16 matmul rate measured in the same run.

Each contender is timed as the leaderboard times (GPU time behind its flush, batches of input
sets): submission.custom_kernel, and cuBLAS's grouped bf16 GEMM on operands dequantized beforehand
(bench/peers.py's contender (c)). Prints one table, with the geometric mean of each regime.
"""

import argparse
import math
import sys
from pathlib import Path

import torch

import submission
from bench.peers import STALL_NOTE, contender_stats, cublas_only, mean_us, measure_ceilings, on_gpu_scales, predequantized, stalled
from harness import floors
from harness.floors import Ceilings, case_flop, geomean
from harness.runners import Stats
from harness.spec import read_cases

ROOT = Path(__file__).resolve().parent.parent

FEW_ROWS = [  # experts, fewest and most rows an expert gets, N, K
    (8, 1, 8, 4096, 7168),
    (8, 0, 32, 7168, 2048),
    (16, 0, 16, 2048, 7168),
    (16, 8, 32, 4096, 4096),
    (32, 0, 8, 7168, 2048),
    (32, 0, 32, 2048, 4096),
    (64, 0, 16, 4096, 2048),
    (64, 0, 4, 2048, 7168),
    (64, 16, 32, 2048, 7168),
]
MANY_ROWS = (8, 2048, 4096, 7168)  # groups, rows each, N, K
REGIMES = ("few rows", "benchmark", "many rows")


def add_regimes_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--regimes", default=",".join(REGIMES), help=f"a comma-separated choice of {', '.join(REGIMES)}")


def chosen_regimes(parser: argparse.ArgumentParser, text: str) -> list[str]:
    """The regimes --regimes names, in its order; a usage error for any other name."""
    regimes = text.split(",")
    if set(regimes) - set(REGIMES):
        parser.error(f"--regimes: not one of {REGIMES}: {sorted(set(regimes) - set(REGIMES))}")
    return regimes


def regime_cases() -> list[tuple[str, str, dict]]:
    """(regime, label, generate_input arguments) of every row of the table; the rows per expert of
    the few-rows shapes drawn from a fixed seed."""
    g = torch.Generator().manual_seed(29)
    cases = []
    for experts, fewest, most, n, k in FEW_ROWS:
        m = torch.randint(fewest, most + 1, (experts,), generator=g).tolist()
        cases.append(
            (
                "few rows",
                f"E={experts}, {fewest}-{most} rows, N={n}, K={k}",
                dict(m=m, n=[n] * experts, k=[k] * experts, g=experts, seed=1000 + len(cases)),
            )
        )
    for i, case in enumerate(read_cases(str(ROOT / "task.yml"), "benchmarks", None)):
        cases.append(("benchmark", f"case {i}", dict(case.args)))
    groups, rows, n, k = MANY_ROWS
    cases.append(
        (
            "many rows",
            f"G={groups}, {rows} rows each, N={n}, K={k}",
            dict(m=[rows] * groups, n=[n] * groups, k=[k] * groups, g=groups, seed=2000),
        )
    )
    return cases


def floor_us(regime: str, args: dict, bytes_per_s: float, flop_per_s: float) -> float:
    """The case's floor (harness.floors) over its active groups, with the rates measured in this run;
    in the few-rows regime DRAM's alone (an unbounded matmul rate)."""
    active = [(m, n, k) for m, n, k in zip(args["m"], args["n"], args["k"]) if m]
    measured = Ceilings("this GPU", bytes_per_s, flop_per_s if regime != "few rows" else math.inf, "measured in this run")
    return floors.floor_us(measured, *zip(*active))


def spread(stats: Stats | str) -> str:
    """The repeats behind a mean: how many, the best and the worst, and ! when one stalled (peers.stalled)."""
    if not isinstance(stats, Stats):
        return ""
    return f" ({stats.runs} repeats, {stats.best / 1e3:.2f}-{stats.worst / 1e3:.2f}){' !' if stalled(stats) else ''}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", type=int, default=15, help="input sets per batch (the leaderboard's 15)")
    parser.add_argument("--seconds", type=float, default=4.0, help="time limit per contender and case")
    add_regimes_option(parser)
    args = parser.parse_args()
    regimes = chosen_regimes(parser, args.regimes)
    if not torch.cuda.is_available():
        sys.exit("bench/regimes.py needs a CUDA GPU")
    bandwidth, flops = measure_ceilings()
    print(f"{torch.cuda.get_device_name()}: copy {bandwidth / 1e9:.0f} GB/s, bf16 matmul {flops / 1e12:.0f} TFLOP/s", flush=True)
    contenders = [("ours", submission.custom_kernel, lambda d: d), ("cuBLAS", cublas_only, lambda d: predequantized(on_gpu_scales(d)))]
    fmt = lambda v: f"{v:.2f}" if isinstance(v, float) else v  # noqa: E731 (a time, or why there is none)
    rows, stalls = [], False
    for regime, label, case in [c for c in regime_cases() if c[0] in regimes]:
        floor = floor_us(regime, case, bandwidth, flops)
        stats = {name: contender_stats(fn, prepare, case, args.sets, args.seconds * 1e9) for name, fn, prepare in contenders}
        stalls |= stalled(stats["ours"])
        times = {name: mean_us(s) for name, s in stats.items()}
        rows.append((regime, label, floor, times["ours"], times["cuBLAS"], case_flop(case["m"], case["n"], case["k"])))
        print(
            f"{regime:9} {label:36} floor {floor:8.2f} us  ours {fmt(times['ours'])}{spread(stats['ours'])}  cuBLAS {fmt(times['cuBLAS'])}",
            flush=True,
        )
    ratio = lambda a, b: f"{a / b:.2f}" if isinstance(a, float) and isinstance(b, float) else "n/a"  # noqa: E731
    print("\n| regime | case | floor us | ours us | x floor | cuBLAS us | cuBLAS / ours | ours TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|")
    for regime, label, floor, ours, cublas, flop in rows:
        tflops = f"{flop / ours / 1e6:.0f}" if isinstance(ours, float) else "n/a"
        print(
            f"| {regime} | {label} | {floor:.2f} | {fmt(ours)} | {ratio(ours, floor)} | {fmt(cublas)} | {ratio(cublas, ours)} | {tflops} |"
        )
    for regime in regimes:
        ours = [r[3] for r in rows if r[0] == regime]
        if all(isinstance(t, float) for t in ours):
            floors = [r[2] for r in rows if r[0] == regime]
            print(f"{regime}: geomean {geomean(ours):.2f} us, {geomean(o / f for o, f in zip(ours, floors)):.2f}x the floor")
    if stalls:
        print(STALL_NOTE)


if __name__ == "__main__":
    main()
