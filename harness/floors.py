"""Speed-of-light floors: how fast a case could possibly run on a known GPU.

A floor is max(bytes moved / memory bandwidth, FLOP / matrix rate), with each input
read once and the output written once. Ceilings per GPU:
- H200: measured on one of this project's H200s (bench/peers.py measures them again): 4262 GB/s device-to-device copy,
  794 TFLOP/s for an 8192^3 bf16 matmul (the sm_90 path computes in fp16/bf16).
- B200: the leaderboard's model at 1.5 GHz: 5120 B/clk of DRAM (7.68 TB/s) and dense FP4
  tensor cores at 32768 FLOP/clk/SM on 148 SMs; it reproduces docs/PROBLEM.md's SOL column.
"""

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Ceilings:
    name: str
    bytes_per_s: float
    flop_per_s: float
    basis: str


KNOWN_GPUS = {
    "H200": Ceilings("H200", 4262e9, 794e12, "measured copy + bf16 matmul"),
    "B200": Ceilings("B200", 5120 * 1.5e9, 32768 * 148 * 1.5e9, "leaderboard SOL model, 1.5 GHz"),
}


def ceilings_for(device_name: str) -> Ceilings | None:
    """The ceilings of a GPU whose name contains a known model, else None."""
    for model, ceilings in KNOWN_GPUS.items():
        if model in device_name.upper():
            return ceilings
    return None


def case_flop(m, n, k) -> float:
    return sum(2.0 * mi * ni * ki for mi, ni, ki in zip(m, n, k))


def case_bytes(m, n, k) -> float:
    """FP4 A and B, one E4M3 scale per 16 elements of each, fp16 C."""
    return sum(mi * ki / 2 + ni * ki / 2 + (mi + ni) * ki / 16 + 2 * mi * ni for mi, ni, ki in zip(m, n, k))


def floor_us(ceilings: Ceilings, m, n, k) -> float:
    return 1e6 * max(case_bytes(m, n, k) / ceilings.bytes_per_s, case_flop(m, n, k) / ceilings.flop_per_s)


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")
