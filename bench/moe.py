"""GPU time of the MoE forms against the list form at the same actual sizes, what empty experts
cost, the host's time per call, and nvfp4.quantize's bandwidth (`make moe-bench`, a GPU with a CUDA
kernel path).

Each figure is the median of CUDA-event timings of single calls, each after the L2 cache is flushed
(a 512 MiB write) and the GPU is held busy for about a millisecond, during which the host issues the
call: the events time the GPU's work alone, as the leaderboard's flush does (the host's part is not
in these figures). The list form gets the same experts as groups (those with rows), replayed from
its plan's CUDA graph.

    python3 -m bench.moe
"""

import argparse
import statistics
import sys
import time

import torch

import nvfp4

BENCHMARK = {  # the leaderboard's four cases: M per group, N, K
    "case 0": ((80, 176, 128, 72, 64, 248, 96, 160), 4096, 7168),
    "case 1": ((40, 76, 168, 72, 164, 148, 196, 160), 7168, 2048),
    "case 2": ((192, 320), 3072, 4096),
    "case 3": ((128, 384), 4096, 1536),
}


def gpu_time_us(fn, repeats: int = 30) -> float:
    flush = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    times = []
    for _ in range(repeats + 3):
        flush.fill_(1)
        torch.cuda._sleep(2_000_000)  # the host issues the call meanwhile
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    return statistics.median(times[3:])


def host_us(fn, calls: int = 200) -> float:
    fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(200_000_000)  # the GPU stays busy: no call waits for it
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def masked_call(a, sfa, b, sfb, masked_m):
    out = torch.empty(a.shape[0], a.shape[1], b.shape[1], dtype=torch.float16, device="cuda")
    return lambda: nvfp4.grouped_gemm_masked(a, sfa, b, sfb, masked_m, out=out)


def list_call(a, sfa, b, sfb, counts):
    used = [e for e, m in enumerate(counts) if m]
    a_l = [a[e, : counts[e]] for e in used]
    sfa_l = [nvfp4.reordered_from_blocked(sfa[e], counts[e]) for e in used]
    b_l, sfb_l = [b[e] for e in used], [nvfp4.reordered_from_blocked(sfb[e], b.shape[1]) for e in used]
    out = [torch.empty(counts[e], b.shape[1], dtype=torch.float16, device="cuda") for e in used]
    return lambda: nvfp4.grouped_gemm(a_l, b_l, sfa_l, sfb_l, out=out)


def row(name: str, counts: list[int], n: int, k: int, max_m: int) -> tuple:
    a, sfa, b, sfb = device_operands(len(counts), max_m, n, k)
    masked = gpu_time_us(masked_call(a, sfa, b, sfb, torch.tensor(counts, dtype=torch.int32, device="cuda")))
    listed = gpu_time_us(list_call(a, sfa, b, sfb, counts))
    return name, len(counts), max_m, sum(counts), n, k, listed, masked


def device_operands(experts: int, max_m: int, n: int, k: int):
    """Random bytes made on the GPU (timing only: any FP4 codes, scales of 1 and 2)."""

    def fp4(*shape):
        return torch.randint(256, shape, dtype=torch.uint8, device="cuda").view(torch.float4_e2m1fn_x2)

    def scales(rows):
        return torch.randint(0x38, 0x40, (experts, -(-rows // 128), k // 64, 32, 4, 4), dtype=torch.uint8, device="cuda").view(
            torch.float8_e4m3fn
        )

    return fp4(experts, max_m, k // 2), scales(max_m), fp4(experts, n, k // 2), scales(n)


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/moe.py needs a CUDA GPU")
    nvfp4.prepare()
    g = torch.Generator().manual_seed(5)
    rows = []
    for n, k in ((7168, 2048), (4096, 7168), (2048, 7168)):
        counts = torch.randint(0, 17, (64,), generator=g).tolist()
        rows.append(row("decode, 0-16 rows each", counts, n, k, 64))
    for name, (m, n, k) in BENCHMARK.items():
        rows.append(row(name, list(m), n, k, max(m)))
    print(f"{'problem':24} {'E':>4} {'max_m':>6} {'rows':>6} {'N':>5} {'K':>5} {'list us':>8} {'masked us':>9} {'ratio':>6}")
    for name, e, max_m, total, n, k, listed, masked in rows:
        print(f"{name:24} {e:4d} {max_m:6d} {total:6d} {n:5d} {k:5d} {listed:8.2f} {masked:9.2f} {masked / listed:6.3f}")
    ratios = [r[7] / r[6] for r in rows]
    print(f"geomean masked / list: {statistics.geometric_mean(ratios):.3f}, worst {max(ratios):.3f}")

    print("\nwhat empty experts cost (masked form, N=7168, K=2048, max_m=64):")
    for label, counts in (
        ("64 experts, all empty", [0] * 64),
        ("32 experts of 8 rows", [8] * 32),
        ("the same 32 among 64 (32 empty)", [8, 0] * 32),
        ("the same 32 among 256 (224 empty)", ([8] + [0] * 7) * 32),
    ):
        masked_m = torch.tensor(counts, dtype=torch.int32, device="cuda")
        print(f"  {label:36} {gpu_time_us(masked_call(*device_operands(len(counts), 64, 7168, 2048), masked_m)):8.2f} us")

    print("\nhost time per call (median of 200 calls issued while the GPU is busy; the GPU's part is above):")
    counts = torch.randint(0, 17, (64,), generator=g).tolist()
    a, sfa, b, sfb = device_operands(64, 64, 7168, 2048)
    for label, fn in (
        ("masked, 64 experts", masked_call(a, sfa, b, sfb, torch.tensor(counts, dtype=torch.int32, device="cuda"))),
        ("list, the same experts", list_call(a, sfa, b, sfb, counts)),
        ("quantize [64, 64, 2048]", lambda x=torch.randn(64, 64, 2048, device="cuda").half(): nvfp4.quantize(x)),
    ):
        print(f"  {label:36} {host_us(fn):8.2f} us")

    print("\nnvfp4.quantize on [16384, 7168]:")
    big = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    copy_us = gpu_time_us(lambda: big[: 1 << 30].copy_(big[1 << 30 :]), 10)
    dram = 2 * (1 << 30) / copy_us / 1e6
    print(f"  DRAM, a 1 GiB device copy: {dram:.2f} TB/s")
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.randn(16384, 7168, device="cuda").to(dtype)
        us = gpu_time_us(lambda: nvfp4.quantize(x))
        moved = x.numel() * 2 + x.numel() // 2 + x.numel() // 16
        print(f"  {dtype!s:16} {us:8.2f} us, {moved / us / 1e6:.2f} TB/s = {moved / us / 1e6 / dram:.0%} of the copy's")


if __name__ == "__main__":
    main()
