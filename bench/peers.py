"""Our submission against the usual ways to run this problem on the current GPU, timed like the harness.

    python3 -m bench.peers [--out docs]

Per official benchmark case: (a) dequantize with torch + per-group torch.matmul, (b) dequantize
with torch + torch._grouped_mm, (c) torch._grouped_mm on operands dequantized beforehand, with its
group offsets already on the GPU and its output left where it writes it (the cuBLAS 16-bit GEMM
alone, at its best), and submission.custom_kernel; plus two floors from ceilings measured
in the same run: bytes over device-to-device copy bandwidth, FLOP over an 8192^3 bf16 matmul.
Writes peers.md and peers.png to --out.
"""

import argparse
import sys
import time
from pathlib import Path

import torch

import submission
from harness.floors import case_bytes, case_flop, geomean
from harness.runners import NUM_ITERATIONS_PER_BENCHMARK, Stats, clone_data, leaderboard_flush, time_calls
from harness.spec import read_cases
from reference import dequantize, generate_input

ROOT = Path(__file__).resolve().parent.parent


def rate(fn, amount: float) -> float:
    """amount per second of fn on the GPU: 10 calls timed by events after 3 to warm up."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        fn()
    end.record()
    torch.cuda.synchronize()
    return amount * 10 / (start.elapsed_time(end) / 1e3)


def copy_bandwidth() -> float:
    """Bytes/s of a 2 GiB device-to-device copy, read + write."""
    src = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    bandwidth = rate(lambda: dst.copy_(src), 2 * src.numel())
    src = dst = None  # the buffers' memory back to the cache before it is emptied
    torch.cuda.empty_cache()
    return bandwidth


def measure_ceilings() -> tuple[float, float]:
    """(copy_bandwidth(); FLOP/s of an 8192^3 bf16 matmul)."""
    x = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    y = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    flops = rate(lambda: x @ y, 2 * 8192**3)
    x = y = None
    torch.cuda.empty_cache()
    return copy_bandwidth(), flops


def on_gpu_scales(data):
    """The plain scales moved to the GPU once, outside the timing (a courtesy to the peers)."""
    abc, sfs, sfr, sizes = data
    return abc, [(a.cuda(), b.cuda()) for a, b in sfs], sfr, sizes


def torch_matmul(data):
    abc, sfs, _, _ = data
    for (a, b, c), (sfa, sfb) in zip(abc, sfs):
        lhs = dequantize(a[:, :, 0], sfa[:, :, 0]).to(torch.bfloat16)
        rhs = dequantize(b[:, :, 0], sfb[:, :, 0]).to(torch.bfloat16)
        c[:, :, 0] = torch.matmul(lhs, rhs.T)
    return [c for _, _, c in abc]


def predequantized(data):
    """(group sizes, lhs, rhs, offsets) with both operands dequantized to bf16 and the group offsets
    on the GPU (made ahead of time for (c), per call for (b))."""
    abc, sfs, _, sizes = data
    lhs = torch.cat([dequantize(a[:, :, 0], sfa[:, :, 0]) for (a, _, _), (sfa, _) in zip(abc, sfs)]).to(torch.bfloat16)
    rhs = torch.stack([dequantize(b[:, :, 0], sfb[:, :, 0]) for (_, b, _), (_, sfb) in zip(abc, sfs)]).to(torch.bfloat16)
    ms = [m for m, _, _, _ in sizes]
    offs = torch.tensor(ms, dtype=torch.int32).cumsum(0, dtype=torch.int32).to("cuda")
    return ms, lhs, rhs, offs


def cublas_only(prepared):
    """cuBLAS's grouped GEMM at its best: its output, one [sum M, N] tensor, is where the caller
    reads each group's C (views, no copy)."""
    ms, lhs, rhs, offs = prepared
    return torch._grouped_mm(lhs, rhs.transpose(1, 2), offs=offs).split(ms)


def torch_grouped_mm(data):
    return cublas_only(predequantized(data))


CONTENDERS = [
    ("ours (submission.py)", submission.custom_kernel, lambda d: d),
    ("(a) torch dequant + matmul per group", torch_matmul, on_gpu_scales),
    ("(b) torch dequant + _grouped_mm", torch_grouped_mm, on_gpu_scales),
    ("(c) _grouped_mm, operands and offsets prepared beforehand", cublas_only, lambda d: predequantized(on_gpu_scales(d))),
]


def contender_stats(fn, prepare, args, sets: int = NUM_ITERATIONS_PER_BENCHMARK, max_time_ns: float = 10e9) -> Stats | str:
    """The repeats' statistics of fn over `sets` input sets (ns per call), timed as the leaderboard
    times; or why there are none."""
    args = dict(args)
    data = []
    for _ in range(sets):
        args["seed"] += 42
        data.append(prepare(generate_input(**args)))
    try:
        fn(clone_data(data[0]))  # warm-up (JIT build, cuBLAS handles)
        return time_calls(fn, data, 100, max_time_ns, flush=leaderboard_flush())  # GPU time, as the leaderboard times
    except (RuntimeError, TypeError, ValueError) as e:
        return f"n/a ({type(e).__name__}: {str(e).splitlines()[0][:80]})"


# A repeat over this many times the best one: the GPU stalled inside it, once in a few runs, for
# milliseconds (docs/perf-log/log.md section 30); the mean it is in reads high.
STALLED_REPEAT = 3.0
STALL_NOTE = (
    "!: a repeat behind this mean ran over 3x the best one (a GPU stall in the run, docs/perf-log/log.md section 30): the mean reads high"
)


def stalled(stats: Stats | str) -> bool:
    """Whether a repeat behind these statistics stalled (STALLED_REPEAT)."""
    return isinstance(stats, Stats) and stats.worst > STALLED_REPEAT * stats.best


def mean_us(stats: Stats | str) -> float | str:
    """The mean behind contender_stats' statistics in us per call, or why there is none."""
    return stats.mean / 1e3 if isinstance(stats, Stats) else stats


def time_contender(fn, prepare, args, sets: int = NUM_ITERATIONS_PER_BENCHMARK, max_time_ns: float = 10e9) -> float | str:
    """Mean us per call of fn over `sets` input sets, timed as the leaderboard times; or why not."""
    return mean_us(contender_stats(fn, prepare, args, sets, max_time_ns))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "docs"))
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/peers.py needs a CUDA GPU")
    device = torch.cuda.get_device_name()
    bandwidth, flops = measure_ceilings()
    print(f"{device}: copy {bandwidth / 1e9:.0f} GB/s, bf16 matmul {flops / 1e12:.0f} TFLOP/s", flush=True)
    cases = read_cases(str(ROOT / "task.yml"), "benchmarks", None)
    rows = []
    for i, case in enumerate(cases):
        m, n, k = case.args["m"], case.args["n"], case.args["k"]
        row = {"case": i, "bytes floor": 1e6 * case_bytes(m, n, k) / bandwidth, "FLOP floor": 1e6 * case_flop(m, n, k) / flops}
        for name, fn, prepare in CONTENDERS:
            row[name] = time_contender(fn, prepare, case.args)
            print(f"case {i}: {name}: {row[name]}", flush=True)
        rows.append(row)
    columns = ["bytes floor", "FLOP floor"] + [name for name, _, _ in CONTENDERS]
    geo = {c: geomean(r[c] for r in rows) if all(isinstance(r[c], float) for r in rows) else "n/a" for c in columns}
    fmt = lambda v: f"{v:.1f}" if isinstance(v, float) else v  # noqa: E731
    lines = [
        f"Device: {device}; measured ceilings: copy {bandwidth / 1e9:.0f} GB/s, bf16 matmul {flops / 1e12:.0f} TFLOP/s; "
        f"{time.strftime('%Y-%m-%d')}; command: `python3 -m bench.peers`. Times in microseconds (mean per call, "
        "15 input sets, timed as `eval.py benchmark` and the leaderboard time them: GPU time behind the leaderboard's flush).",
        "",
        "| case | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    lines += [f"| {r['case']} | " + " | ".join(fmt(r[c]) for c in columns) + " |" for r in rows]
    lines.append("| geomean | " + " | ".join(fmt(geo[c]) for c in columns) + " |")
    table = "\n".join(lines)
    print("\n" + table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "peers.md").write_text(table + "\n")
    plot(rows, columns, device, out / "peers.png")


def plot(rows, columns, device, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5))
    width = 0.8 / len(columns)
    for j, col in enumerate(columns):
        values = [r[col] if isinstance(r[col], float) else 0.0 for r in rows]
        ax.bar([i + j * width for i in range(len(rows))], values, width, label=col)
    ax.set_yscale("log")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(rows))], [f"case {r['case']}" for r in rows])
    ax.set_ylabel("microseconds per call (log)")
    ax.set_title(f"NVFP4 grouped GEMM on {device}: official benchmark cases")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
