"""The decode regime: few rows per expert, our masked and list forms against vLLM's Marlin NVFP4 MoE
GEMM and the DRAM floor (`make decode-bench`, an sm_90 GPU).

    python3 -m bench.decode [--marlin PATH/libmarlin_fp4_moe.so] [--repeats 30] [--shapes "E=8,"]

Each shape draws every expert's rows uniformly from its range (fixed seed). Each contender is timed
from CUDA graphs, behind a 512 MiB write that flushes the L2 cache: single-call (a graph of one call)
and in sequence (a graph of 8 calls on 8 different weight sets, as a model's layers run one after
another; the time per call). Medians of --repeats replays. The floor is DRAM's: every active
expert's B and scales, A with its scales and C moved once, at the device-to-device copy bandwidth
measured in the same run.

- ours, masked: nvfp4.grouped_gemm_masked (A [E, max_m, K/2], the counts on the GPU).
- ours, list: nvfp4.grouped_gemm on the experts that have rows (the host knows the counts).
- Marlin: vLLM's moe_wna16_marlin_gemm for NVFP4 (W4A16: our A decoded to fp16, the same FP4
  weights and E4M3 scales), built from ../shared/anchors/marlin (`BUILD_DIR=<scratch> ./build.sh`)
  and loaded from --marlin or MARLIN_FP4_LIB; its front end marlin_fp4.py from --marlin-front or
  MARLIN_FP4_FRONT (default: the folder of the library, then ../shared/anchors/marlin). At its best:
  every moe_block_size it has (8, 16, 32, 48, 64) is timed single-call and the fastest is used.
  Without it the table says how to build it and goes on without its column.

Every contender's output on the first weight set is checked against the list form's before it is
timed (masked: bit for bit; Marlin: within 1e-3 of the largest value, fp32 sums in another order).
A last table gives the host time of an eager (uncaptured) call with 64 experts for each of our forms.
"""

import argparse
import importlib.util
import os
import statistics
import sys
from pathlib import Path

import torch

import nvfp4
from bench.moe import host_us
from bench.peers import copy_bandwidth
from harness.floors import geomean
from nvfp4.portable import dequantize

ROOT = Path(__file__).resolve().parent.parent

DECODE = [  # experts, fewest and most rows of an expert, N, K
    (8, 0, 16, 4096, 7168),
    (8, 0, 32, 7168, 2048),
    (16, 0, 16, 2048, 7168),
    (32, 0, 8, 4096, 7168),
    (64, 0, 8, 2048, 7168),
    (64, 0, 16, 7168, 2048),
    (128, 0, 4, 2048, 4096),
    (128, 0, 8, 4096, 2048),
    (32, 0, 32, 2048, 4096),
    (16, 0, 64, 4096, 4096),
]
MANY = [  # from 64 rows an expert up
    (16, 64, 128, 4096, 4096),
    (8, 0, 256, 4096, 7168),
    (64, 0, 128, 2048, 7168),
]
SEQUENCE = 8  # weight sets, one call each, in the sequence's graph
MARLIN_BLOCKS = (8, 16, 32, 48, 64)
BUILD_HINT = (
    "Marlin: not found. Build vLLM's Marlin NVFP4 MoE GEMM outside the project, then point --marlin (or MARLIN_FP4_LIB) at it:\n"
    "  (cd ../shared/anchors/marlin && BUILD_DIR=$PWD/../../../main/.scratch/marlin ./build.sh)\n"
    "  python3 -m bench.decode --marlin .scratch/marlin/libmarlin_fp4_moe.so"
)


def label(experts: int, lo: int, hi: int, n: int, k: int) -> str:
    return f"E={experts}, {lo}-{hi} rows, N={n}, K={k}"


# ------------------------------------------------------------------------------------- the peer
def load_marlin(lib: str | None, front: str | None):
    """The Marlin front end (marlin_fp4.py) bound to its library, or None when either is missing."""
    lib = lib or os.environ.get("MARLIN_FP4_LIB")
    if not lib or not Path(lib).is_file():
        return None
    folders = [front or os.environ.get("MARLIN_FP4_FRONT"), str(Path(lib).parent), str(ROOT.parent / "shared" / "anchors" / "marlin")]
    source = next((Path(f) / "marlin_fp4.py" for f in folders if f and (Path(f) / "marlin_fp4.py").is_file()), None)
    if source is None:
        return None
    os.environ["MARLIN_FP4_LIB"] = str(Path(lib).resolve())  # read by the front end when it loads the library
    spec = importlib.util.spec_from_file_location("marlin_fp4", source)
    module = importlib.util.module_from_spec(spec)
    sys.modules["marlin_fp4"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    module.load_library()
    return module


# ------------------------------------------------------------------------------------- inputs
def random_fp4(*shape) -> torch.Tensor:
    return torch.randint(256, shape, dtype=torch.uint8, device="cuda")


def random_scales(*shape) -> torch.Tensor:
    """E4M3 bytes of 0.5 to 3.75 (exact for Marlin's fp16 path, which flushes scales below 2^-6)."""
    return torch.randint(0x30, 0x48, shape, dtype=torch.uint8, device="cuda")


class Problem:
    """One shape: A and the counts once, SEQUENCE weight sets, and each form's view of them."""

    def __init__(self, experts, lo, hi, n, k, seed):
        g = torch.Generator().manual_seed(seed)
        self.counts = torch.randint(lo, hi + 1, (experts,), generator=g).tolist()
        self.experts, self.max_m, self.n, self.k = experts, max(hi, 1), n, k
        self.used = [e for e, m in enumerate(self.counts) if m]
        self.a = random_fp4(experts, self.max_m, k // 2)
        a_plain = random_scales(experts, self.max_m, k // 16)
        self.sfa = nvfp4.blocked_from_plain(a_plain).view(torch.float8_e4m3fn)
        self.masked_m = torch.tensor(self.counts, dtype=torch.int32, device="cuda")
        self.a_half = torch.cat(
            [dequantize(self.a[e, :m], a_plain[e, :m].view(torch.float8_e4m3fn).float()).half() for e, m in enumerate(self.counts)]
        )  # Marlin's A
        self.b = [random_fp4(experts, n, k // 2) for _ in range(SEQUENCE)]
        self.b_plain = [random_scales(experts, n, k // 16) for _ in range(SEQUENCE)]
        self.sfb = [nvfp4.blocked_from_plain(s).view(torch.float8_e4m3fn) for s in self.b_plain]
        self.marlin_weights = None  # Marlin's layout of the weight sets, made on first use for every block size

    def floor_us(self, bytes_per_s: float) -> float:
        rows = sum(self.counts)
        weights = len(self.used) * self.n * self.k * (1 / 2 + 1 / 16)
        return 1e6 * (weights + rows * self.k * (1 / 2 + 1 / 16) + 2 * rows * self.n) / bytes_per_s

    def masked_calls(self) -> tuple:
        outs = [torch.empty(self.experts, self.max_m, self.n, dtype=torch.float16, device="cuda") for _ in range(SEQUENCE)]
        fp4 = lambda t: t.view(torch.float4_e2m1fn_x2)  # noqa: E731
        calls = [
            lambda i=i: nvfp4.grouped_gemm_masked(fp4(self.a), self.sfa, fp4(self.b[i]), self.sfb[i], self.masked_m, out=outs[i])
            for i in range(SEQUENCE)
        ]
        return calls, lambda: torch.cat([outs[0][e, : self.counts[e]] for e in self.used])

    def list_calls(self) -> tuple:
        fp4 = lambda t: t.view(torch.float4_e2m1fn_x2)  # noqa: E731
        a = [fp4(self.a[e, : self.counts[e]]) for e in self.used]
        sfa = [nvfp4.reordered_from_blocked(self.sfa[e], self.counts[e]) for e in self.used]
        outs = [[torch.empty(self.counts[e], self.n, dtype=torch.float16, device="cuda") for e in self.used] for _ in range(SEQUENCE)]
        operands = [
            ([fp4(self.b[i][e]) for e in self.used], [nvfp4.reordered_from_blocked(self.sfb[i][e], self.n) for e in self.used])
            for i in range(SEQUENCE)
        ]
        calls = [lambda i=i: nvfp4.grouped_gemm(a, operands[i][0], sfa, operands[i][1], out=outs[i]) for i in range(SEQUENCE)]
        return calls, lambda: torch.cat(outs[0])

    def marlin_calls(self, marlin, block_size: int) -> tuple:
        if self.marlin_weights is None:
            self.marlin_weights = [marlin.prepare_weights(self.b[i], self.b_plain[i], None, torch.float16) for i in range(SEQUENCE)]
        weights = self.marlin_weights
        routing = marlin.moe_align_block_size_grouped(self.counts, block_size, "cuda")
        c_tmp = torch.empty(marlin.c_tmp_numel(self.n, routing, "cuda"), dtype=torch.float32, device="cuda")
        outs = [torch.empty(sum(self.counts), self.n, dtype=torch.float16, device="cuda") for _ in range(SEQUENCE)]
        calls = [lambda i=i: marlin.moe_gemm(self.a_half, weights[i], routing, out=outs[i], c_tmp=c_tmp) for i in range(SEQUENCE)]
        return calls, lambda: outs[0]


# ------------------------------------------------------------------------------------- timing
def graph_of(calls: list) -> torch.cuda.CUDAGraph:
    for call in calls:  # first sight (plans, kernels) outside the capture
        call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for call in calls:
            call()
    return graph


def replay_us(graph: torch.cuda.CUDAGraph, calls: int, flush: torch.Tensor, repeats: int) -> float:
    """Median GPU time per call of a graph's replay, each after the flush."""
    times = []
    for i in range(repeats + 2):
        flush.fill_(i)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / calls)
    return statistics.median(times[2:])


def timed(calls: list, flush, repeats) -> tuple[float, float]:
    """(single call, per call in sequence) us."""
    return replay_us(graph_of(calls[:1]), 1, flush, repeats), replay_us(graph_of(calls), len(calls), flush, repeats)


def check(name: str, got: torch.Tensor, want: torch.Tensor, exact: bool) -> None:
    if exact:
        if not torch.equal(got, want):
            raise SystemExit(f"{name}: differs from the list form ({(got != want).sum().item()} elements)")
        return
    err = (got.float() - want.float()).abs().max().item() / max(want.float().abs().max().item(), 1e-30)
    if err > 1e-3:
        raise SystemExit(f"{name}: relative error {err:.2e} against the list form")


def measure(problem: Problem, marlin, flush, repeats) -> dict:
    listed, list_out = problem.list_calls()
    masked, masked_out = problem.masked_calls()
    result = {"list": timed(listed, flush, repeats), "masked": timed(masked, flush, repeats)}
    check("masked form", masked_out(), list_out(), exact=True)
    if marlin is not None:
        best = None
        for block in MARLIN_BLOCKS:
            calls, out = problem.marlin_calls(marlin, block)
            single = replay_us(graph_of(calls[:1]), 1, flush, repeats)
            if best is None or single < best[1]:
                best = (block, single, calls, out)
            del calls
        block, _, calls, out = best
        check("Marlin", out(), list_out(), exact=False)
        result["Marlin"] = timed(calls, flush, repeats)
        result["block"] = block
    return result


# ------------------------------------------------------------------------------------- host time
def host_table() -> list[tuple[str, float]]:
    problem = Problem(64, 0, 16, 2048, 7168, seed=7)
    listed, _ = problem.list_calls()
    a_masked, b = problem.a.view(torch.float4_e2m1fn_x2), problem.b[0].view(torch.float4_e2m1fn_x2)  # views made once: not the call's cost
    out_masked = torch.empty(problem.experts, problem.max_m, problem.n, dtype=torch.float16, device="cuda")
    masked_call = lambda: nvfp4.grouped_gemm_masked(a_masked, problem.sfa, b, problem.sfb[0], problem.masked_m, out=out_masked)  # noqa: E731
    counts = problem.masked_m
    offsets, sf_offsets = nvfp4.offset_layout(counts)
    total = sum(problem.counts)
    a = torch.cat([problem.a[e, :m] for e, m in enumerate(problem.counts)]).view(torch.float4_e2m1fn_x2)
    plain = torch.cat([nvfp4.plain_from_blocked(problem.sfa[e].view(torch.uint8), m) for e, m in enumerate(problem.counts)])
    sfa = nvfp4.offset_scales(plain, offsets, sf_offsets, nvfp4.sf_rows_capacity(total, problem.experts)).view(torch.float8_e4m3fn)
    out = torch.empty(total, problem.n, dtype=torch.float16, device="cuda")
    sfb = problem.sfb[0]
    offset_call = lambda: nvfp4.grouped_gemm_offsets(a, sfa, b, sfb, offsets, sf_offsets, out=out)  # noqa: E731
    return [("masked", host_us(masked_call)), ("offsets", host_us(offset_call)), (f"list ({len(problem.used)} groups)", host_us(listed[0]))]


# ------------------------------------------------------------------------------------- report
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--marlin", help="vLLM's Marlin NVFP4 MoE library (libmarlin_fp4_moe.so); default $MARLIN_FP4_LIB")
    parser.add_argument(
        "--marlin-front",
        help="the folder of its front end marlin_fp4.py; default $MARLIN_FP4_FRONT, the library's folder, ../shared/anchors/marlin",
    )
    parser.add_argument("--repeats", type=int, default=30, help="graph replays per figure (their median)")
    parser.add_argument("--shapes", default="", help="only the shapes whose label contains this text")
    parser.add_argument("--no-host", action="store_true", help="skip the host-time table")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/decode.py needs a CUDA GPU")
    marlin = load_marlin(args.marlin, args.marlin_front)
    if marlin is None:
        print(BUILD_HINT, file=sys.stderr)
    nvfp4.prepare()
    bandwidth = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}: copy {bandwidth / 1e9:.0f} GB/s; ours on {nvfp4.path_in_use()}", flush=True)
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    shapes = [("decode", s) for s in DECODE] + [("64+ rows", s) for s in MANY]
    rows = []
    for i, (regime, shape) in enumerate(shapes):
        if args.shapes not in label(*shape):
            continue
        problem = Problem(*shape, seed=100 + i)  # a shape's counts do not depend on which shapes run
        r = measure(problem, marlin, flush, args.repeats)
        rows.append((regime, label(*shape), problem.floor_us(bandwidth), r))
        del problem
        torch.cuda.empty_cache()
        m, li = r["masked"], r["list"]
        mar = r.get("Marlin")
        print(
            f"  {label(*shape):34} floor {rows[-1][2]:7.1f}  masked {m[0]:7.1f} / {m[1]:7.1f}  list {li[0]:7.1f} / {li[1]:7.1f}"
            + (f"  Marlin {mar[0]:7.1f} / {mar[1]:7.1f} (block {r['block']})" if mar else ""),
            flush=True,
        )
    report(rows, marlin is not None)
    if not args.no_host:
        print("\nhost time of an eager call, 64 experts of 0-16 rows, N=2048, K=7168 (median of 200, the GPU busy meanwhile):")
        for name, us in host_table():
            print(f"  {name:22} {us:7.1f} us")


def report(rows: list, with_marlin: bool) -> None:
    print("\nus per call, single / in sequence (8 weight sets in one graph); x floor and Marlin / ours in sequence, masked form")
    head = (
        f"| shape | floor | masked | list | {'Marlin (block) | Marlin / masked | ' if with_marlin else ''}masked x floor | masked / list |"
    )
    print(head)
    print("|" + "---|" * head.count(" | ") + "---|")
    for regime, name, floor, r in rows:
        m, li = r["masked"], r["list"]
        marlin = f"{r['Marlin'][0]:.1f} / {r['Marlin'][1]:.1f} ({r['block']}) | {r['Marlin'][1] / m[1]:.2f} | " if with_marlin else ""
        print(
            f"| {name} | {floor:.1f} | {m[0]:.1f} / {m[1]:.1f} | {li[0]:.1f} / {li[1]:.1f} | {marlin}{m[1] / floor:.2f} | {m[1] / li[1]:.2f} |"
        )
    for regime in ("decode", "64+ rows"):
        part = [(floor, r) for reg, _, floor, r in rows if reg == regime]
        if not part:
            continue
        line = (
            f"{regime}: masked in sequence {geomean(r['masked'][1] / f for f, r in part):.2f}x the floor (geomean), "
            f"list {geomean(r['list'][1] / f for f, r in part):.2f}x; masked / list {geomean(r['masked'][1] / r['list'][1] for _, r in part):.3f}"
        )
        if with_marlin:
            ratios = [r["Marlin"][1] / r["masked"][1] for _, r in part]
            line += f"; Marlin / masked {min(ratios):.2f}-{max(ratios):.2f}, faster than Marlin on {sum(x > 1 for x in ratios)} of {len(ratios)}"
        print(line)


if __name__ == "__main__":
    main()
