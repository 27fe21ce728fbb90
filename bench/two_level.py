"""What two-level scaling costs, and the fused MoE layer end to end (`make two-level-bench`, a GPU with
a CUDA kernel path).

1. alpha and bf16 output against the plain fp16 call: the leaderboard's four cases in the list form
   and the MoE table's rows (bench/moe.py) in the masked form, each variant timed in turn on the
   same operands, so that drifts of the GPU's clock fall on all of them alike.
2. nvfp4.fused_moe for decode steps (T 1-64 tokens, top-8 of 64 or 256 experts) and a prefill step
   (T 4096) at H 7168, F 2048, captured in a CUDA graph, against the sum of its parts, each part
   captured and timed alone on the inputs the layer gives it.

Every figure is the median of CUDA-event timings of single calls (or graph replays), each after the
L2 cache is flushed and the GPU is held busy while the host issues the call (bench/moe.py's
gpu_time_us): GPU time, as the leaderboard counts it.

    python3 -m bench.two_level [--repeats 30] [--part cost|layer]
"""

import argparse
import statistics
import sys

import torch

import nvfp4
from bench.moe import BENCHMARK, device_operands, list_call
from nvfp4.fused_moe import Routing, activate, quantize_routed

VARIANTS = ("fp16", "fp16 + alpha", "bf16 + alpha")


def timed_in_turn(calls: dict, repeats: int) -> dict:
    """Median GPU us of each call, the calls timed one after another in each round."""
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    times = {name: [] for name in calls}
    for round_ in range(repeats + 2):
        for name, fn in calls.items():
            flush.fill_(1)
            torch.cuda._sleep(2_000_000)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            if round_ >= 2:
                times[name].append(start.elapsed_time(end) * 1000)
    return {name: statistics.median(t) for name, t in times.items()}


def list_variants(m: tuple, n: int, k: int) -> dict:
    counts = list(m)
    a, sfa, b, sfb = device_operands(len(counts), max(counts), n, k)
    used = range(len(counts))
    lists = (
        [a[e, : counts[e]] for e in used],
        [b[e] for e in used],
        [nvfp4.reordered_from_blocked(sfa[e], counts[e]) for e in used],
        [nvfp4.reordered_from_blocked(sfb[e], n) for e in used],
    )
    alpha = torch.rand(len(counts), device="cuda") + 0.5
    outs = {dtype: [torch.empty(c, n, dtype=dtype, device="cuda") for c in counts] for dtype in (torch.float16, torch.bfloat16)}
    return {
        "fp16": list_call(a, sfa, b, sfb, counts),
        "fp16 + alpha": lambda: nvfp4.grouped_gemm(*lists, out=outs[torch.float16], alpha=alpha),
        "bf16 + alpha": lambda: nvfp4.grouped_gemm(*lists, out=outs[torch.bfloat16], alpha=alpha),
    }


def masked_variants(counts: list, n: int, k: int, max_m: int) -> dict:
    a, sfa, b, sfb = device_operands(len(counts), max_m, n, k)
    masked_m = torch.tensor(counts, dtype=torch.int32, device="cuda")
    alpha = torch.rand(len(counts), device="cuda") + 0.5
    outs = {dtype: torch.empty(len(counts), max_m, n, dtype=dtype, device="cuda") for dtype in (torch.float16, torch.bfloat16)}
    return {
        "fp16": lambda: nvfp4.grouped_gemm_masked(a, sfa, b, sfb, masked_m, out=outs[torch.float16]),
        "fp16 + alpha": lambda: nvfp4.grouped_gemm_masked(a, sfa, b, sfb, masked_m, out=outs[torch.float16], alpha=alpha),
        "bf16 + alpha": lambda: nvfp4.grouped_gemm_masked(a, sfa, b, sfb, masked_m, out=outs[torch.bfloat16], alpha=alpha),
    }


def cost_table(repeats: int) -> None:
    g = torch.Generator().manual_seed(5)
    rows = [(f"list, {name}", list_variants(m, n, k)) for name, (m, n, k) in BENCHMARK.items()]
    for n, k in ((7168, 2048), (4096, 7168), (2048, 7168)):
        counts = torch.randint(0, 17, (64,), generator=g).tolist()
        rows.append((f"masked, E64 0-16 rows, N{n} K{k}", masked_variants(counts, n, k, 64)))
    for name, (m, n, k) in BENCHMARK.items():
        rows.append((f"masked, {name}", masked_variants(list(m), n, k, max(m))))
    print(f"{'problem':38} " + " ".join(f"{v + ' us':>14}" for v in VARIANTS) + f" {'alpha':>7} {'bf16+a':>7}")
    ratios = {v: [] for v in VARIANTS[1:]}
    for name, calls in rows:
        for fn in calls.values():
            fn()  # plans and graphs made outside the timing
        t = timed_in_turn(calls, repeats)
        for v in VARIANTS[1:]:
            ratios[v].append(t[v] / t["fp16"])
        print(
            f"{name:38} "
            + " ".join(f"{t[v]:14.2f}" for v in VARIANTS)
            + f" {t[VARIANTS[1]] / t['fp16']:7.3f} {t[VARIANTS[2]] / t['fp16']:7.3f}"
        )
    print(
        "geomean against fp16 without alpha: "
        + ", ".join(f"{v} {statistics.geometric_mean(r):.3f} (worst {max(r):.3f})" for v, r in ratios.items())
    )


def timing_experts(experts: int, hidden: int, inter: int) -> nvfp4.Experts:
    """Experts of random codes and scales (timing only), built on the GPU."""

    def fp4(*shape):
        return torch.randint(256, shape, dtype=torch.uint8, device="cuda")

    def scales(*shape):
        return torch.randint(0x30, 0x38, shape, dtype=torch.uint8, device="cuda").view(torch.float8_e4m3fn)

    ones = torch.full((experts,), 1e-3, device="cuda")
    return nvfp4.Experts(
        fp4(experts, 2 * inter, hidden // 2),
        scales(experts, 2 * inter, hidden // 16),
        ones,
        ones,
        fp4(experts, hidden, inter // 2),
        scales(experts, hidden, inter // 16),
        ones,
        ones,
    )


def captured(fn):
    """fn captured in a CUDA graph (run once before), its replay as the call to time."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def layer_parts(x, weights, ids, ex: nvfp4.Experts) -> dict:
    """The layer's steps as separate calls on the inputs each gets inside the layer."""
    routing = Routing(ids, ex.num_experts)
    q1, sf1 = quantize_routed(x, routing.token, routing.offsets, routing.sf_offsets, ex.w13_input_scale, routing.sf_rows)
    gate_up = x.new_empty((routing.rows, 2 * ex.intermediate))
    nvfp4.grouped_gemm_offsets(q1, sf1, ex.w13, ex.w13_scale, routing.offsets, routing.sf_offsets, out=gate_up, alpha=ex.w13_alpha)
    act = activate(gate_up, "silu")
    q2, sf2 = quantize_routed(act, routing.in_order, routing.offsets, routing.sf_offsets, ex.w2_input_scale, routing.sf_rows)
    down = x.new_zeros((routing.rows, ex.hidden))
    return {
        "routing": lambda: Routing(ids, ex.num_experts),
        "quantize 1 (gathers x)": lambda: quantize_routed(
            x, routing.token, routing.offsets, routing.sf_offsets, ex.w13_input_scale, routing.sf_rows
        ),
        "GEMM 1 (w13)": lambda: nvfp4.grouped_gemm_offsets(
            q1, sf1, ex.w13, ex.w13_scale, routing.offsets, routing.sf_offsets, out=gate_up, alpha=ex.w13_alpha
        ),
        "activation": lambda: activate(gate_up, "silu"),
        "quantize 2": lambda: quantize_routed(
            act, routing.in_order, routing.offsets, routing.sf_offsets, ex.w2_input_scale, routing.sf_rows
        ),
        "GEMM 2 (w2)": lambda: nvfp4.grouped_gemm_offsets(
            q2, sf2, ex.w2, ex.w2_scale, routing.offsets, routing.sf_offsets, out=down, alpha=ex.w2_alpha
        ),
        "combine": lambda: routing.combine(down, weights),
    }


def layer_table(repeats: int) -> None:
    hidden, inter, top_k = 7168, 2048, 8
    steps = [("decode", e, t) for e in (64, 256) for t in (1, 4, 16, 64)] + [("prefill", 64, 4096), ("prefill", 256, 4096)]
    print(f"fused_moe, H {hidden}, F {inter}, top-{top_k}, bf16 (GPU us; parts each captured alone on the layer's own inputs)")
    for experts in (64, 256):
        ex = timing_experts(experts, hidden, inter)
        for kind, e, tokens in steps:
            if e != experts:
                continue
            g = torch.Generator(device="cuda").manual_seed(tokens)
            x = torch.randn(tokens, hidden, device="cuda", generator=g).to(torch.bfloat16)
            weights, ids = torch.topk(torch.softmax(torch.randn(tokens, experts, device="cuda", generator=g), -1), top_k, -1)
            calls = {"layer": captured(lambda: nvfp4.fused_moe(x, weights, ids, ex))}
            calls.update({name: captured(fn) for name, fn in layer_parts(x, weights, ids, ex).items()})
            t = timed_in_turn(calls, repeats)
            parts = sum(v for name, v in t.items() if name != "layer")
            detail = ", ".join(f"{name} {v:.1f}" for name, v in t.items() if name != "layer")
            print(
                f"  {kind:8} E{experts:<4} T{tokens:<5} layer {t['layer']:9.1f} us, parts {parts:9.1f} us ({t['layer'] / parts:.2f}x): {detail}"
            )
        ex = None  # this expert set's weights back to the cache before it is emptied
        torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=30, help="timed rounds per figure (median)")
    parser.add_argument("--part", choices=("cost", "layer", "both"), default="both")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/two_level.py needs a CUDA GPU with a CUDA kernel path (an H100/H200, or a B200)")
    print(f"{torch.cuda.get_device_name()}: nvfp4 path {nvfp4.prepare()}")
    if args.part in ("cost", "both"):
        cost_table(args.repeats)
    if args.part in ("layer", "both"):
        layer_table(max(5, args.repeats // 3))


if __name__ == "__main__":
    main()
