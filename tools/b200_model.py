"""A calibrated estimate of sm_100a kernel designs on a B200: a model, never a measurement.

    python3 -m tools.b200_model                      # the fit, its error per calibration point, the estimates
    python3 -m tools.b200_model --config ours v6b    # per-case tables of the named configurations

Nothing here runs on a B200 (none is available). The model takes a kernel configuration and a
tile schedule (for our kernel the plan's real one, from the sm_100a library's nvfp4_schedule) and
adds up, per CTA: the first pipeline fill, per tile the K loop (each K block limited by its loads or
its MMAs, whichever is slower) plus a fixed cost, and the epilogue's stores (hidden behind the next
tile's K loop where the accumulator is double-buffered); the kernel takes a launch cost plus the
slowest CTA or the DRAM time of its bytes, whichever is longer.

Fixed, from public figures: 148 SMs; DRAM 7.68 TB/s and dense FP4 at 32768 FLOP/clk/SM at 1.5 GHz
(the leaderboard's speed-of-light model, harness/floors.py, which reproduces docs/PROBLEM.md's SOL
column). Fitted: six parameters (Params), to the per-version times of the winning public submission's
worklog (gau-nernst/gpu-mode-kernels, nvidia/nvfp4_group_gemm/README.md; its configurations read
from its submission files, facts only, in WORKLOG below). Its error on each point is printed; use it
to rank configurations, not to predict a leaderboard time. Assumed, not fitted: a 4-byte store
moves a quarter of a 16-byte one's bytes per unit time; an unrolled first fill halves the fill's
latency (the fit leans on this for the worklog's v5 -> v5e step). Not modelled: L2 reuse beyond
reading each byte once from DRAM, multicast, cluster launch control, MMA issue details.
"""

import argparse
import heapq
import itertools
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from harness.floors import KNOWN_GPUS, floor_us, geomean

ROOT = Path(__file__).resolve().parent.parent

SMS = 148
B200 = KNOWN_GPUS["B200"]
MMA_FLOP_PER_US_PER_SM = B200.flop_per_s / SMS / 1e6
# The four benchmark cases (task.yml): (M per group, N, K).
BENCHMARKS = (
    ((80, 176, 128, 72, 64, 248, 96, 160), 4096, 7168),
    ((40, 76, 168, 72, 164, 148, 196, 160), 7168, 2048),
    ((192, 320), 3072, 4096),
    ((128, 384), 4096, 1536),
)


@dataclass(frozen=True)
class Shape:
    """How one case is tiled and scheduled."""

    tile_m: int = 128  # output rows (of A) per tile; with `pair`, per CTA pair
    tile_n: int = 128  # output columns (rows of B) per tile; with `pair`, per CTA pair
    tile_k: int = 256  # K per pipeline stage
    pair: bool = False  # cta_group::2: each CTA of a pair loads half of each operand tile and does half the MMA
    ctas: int = SMS  # CTAs at most (a pair counts as two)
    order: str = "n_fastest"  # tile order: n_fastest, m_fastest, n_column (each CTA keeps one N tile), ours (the plan's schedule)
    one_tile_per_cta: bool = False  # a CTA per tile, placed on SMs as they free up; else a static schedule over `ctas`
    sort_groups: bool = False  # groups by descending M first
    swapped: bool = False  # B's rows are the MMA's M side and a tile's A rows its N side, rounded up to 16 (not to tile_m)
    single_buffer: bool = False  # one TMEM accumulator: the epilogue never overlaps the next tile's K loop


@dataclass(frozen=True)
class Config:
    name: str
    shapes: tuple  # a Shape per benchmark case (the design's choice for that case)
    store_bytes: int = 4  # bytes per store instruction in the epilogue
    double_buffered: bool = False  # the epilogue of tile t overlaps the K loop of tile t + 1
    fill_unrolled: bool = False  # the first pipeline fill issued without waits
    tiles: int | None = None  # order "ours": the plan's choice of tile shape (None), or that shape (OUR_SHAPES)


@dataclass(frozen=True)
class Params:
    """The fitted quantities: DRAM efficiency, per-SM load bandwidth (bytes/us), per-SM store
    bandwidth at 16 bytes a store and wider (bytes/us), launch cost, first-fill latency and per-tile
    fixed cost (us)."""

    dram_efficiency: float = 0.75
    load_bw: float = 120e3
    store_bw: float = 60e3
    launch_us: float = 2.0
    fill_us: float = 1.0
    tile_us: float = 0.2

    def vector(self) -> np.ndarray:
        return np.array([self.dram_efficiency, self.load_bw, self.store_bw, self.launch_us, self.fill_us, self.tile_us])


def store_efficiency(store_bytes: int) -> float:
    """Fraction of the store bandwidth a width reaches: a 4-byte store moves a quarter of what a
    16-byte one does per instruction (an assumption, not fitted)."""
    return min(1.0, store_bytes / 16)


# ----------------------------------------------------------------------------- tiles and schedules
@dataclass
class Work:
    """Per tile (numpy arrays): the CTA (or pair) it runs on, its position there, K blocks, and per
    CTA per K block the bytes loaded and FLOP; per CTA the bytes stored."""

    unit: np.ndarray
    position: np.ndarray
    k_blocks: np.ndarray
    load_bytes: np.ndarray
    flop: np.ndarray
    store_bytes: np.ndarray
    units: int
    slots: int  # units that fit on the GPU at once
    one_tile_per_cta: bool
    double_buffered: bool
    dram_bytes: float


def tiles(shape: Shape, m: tuple, n: int, k: int) -> list[tuple[int, int, int]]:
    """(group, m tile, n tile) of every tile, in the shape's order (ours: group, m, n)."""
    groups = sorted(range(len(m)), key=lambda g: -m[g]) if shape.sort_groups else range(len(m))
    found = [(g, mt, nt) for g in groups for mt in range(-(-m[g] // shape.tile_m)) for nt in range(-(-n // shape.tile_n))]
    if shape.order == "m_fastest":
        rank = {g: i for i, g in enumerate(groups)}
        found.sort(key=lambda t: (rank[t[0]], t[2], t[1]))
    return found


def static_schedule(shape: Shape, m: tuple, n: int, k: int) -> list[list[tuple[int, int, int]]]:
    """The tiles of each CTA (each pair, with `pair`)."""
    units = shape.ctas // (2 if shape.pair else 1)
    ordered = tiles(shape, m, n, k)
    if shape.one_tile_per_cta:
        return [[t] for t in ordered]
    if shape.order == "n_column":  # a CTA per (N tile, j): M tiles j, j + rows, ... of the concatenated groups
        columns = -(-n // shape.tile_n)
        m_tiles = [(g, mt) for g, mt, nt in ordered if nt == 0]
        rows = max(1, min(units // columns, len(m_tiles)))
        return [[(g, mt, nt) for g, mt in m_tiles[j::rows]] for nt in range(columns) for j in range(rows)]
    used = min(units, len(ordered))
    return [ordered[u::used] for u in range(used)]


def our_schedule(m: tuple, n: int, k: int, tiles: int = -1) -> tuple[list[list[tuple[int, int, int]]], int]:
    """The tiles of each CTA (each pair) in the sm_100a plan's real schedule (built by the sm_100a
    library; needs nvcc), tiles as nvfp4_plan_create takes it (-1: the shape the plan chooses); and
    their shape (0 unswapped, 1 swapped, 2 pair)."""
    import ctypes

    from tools.nvcc_build import load

    lib = load(100)
    mnk = (ctypes.c_int * (3 * len(m)))(*[v for g in range(len(m)) for v in (m[g], n, k)])
    capacity = 1 << 16
    out = (ctypes.c_int * (8 * capacity))()
    count = lib.nvfp4_schedule(mnk, len(m), SMS, SMS // 2, tiles, out, capacity)  # every two SMs taken to hold a pair
    rows = np.array(out[: 8 * count]).reshape(count, 8)
    if len(set(rows[:, 3])) != 1:
        raise ValueError("the model handles one launch per case")
    ctas = int(rows[:, 4].max()) + 1
    schedule = [[(int(g), int(mt), int(nt)) for g, mt, nt, _, c, *_ in rows if c == cta] for cta in range(ctas)]
    return schedule, int(rows[0, 7])


# Our tile shapes (csrc/sm100 TileShape) as the model's fields: unswapped 128 x 128; swapped, 128
# rows of B by up to 256 of A with one accumulator; the swapped tile over a pair, 256 rows of B by 128 of A.
OUR_SHAPES = (dict(), dict(swapped=True, tile_m=256, single_buffer=True), dict(swapped=True, pair=True, tile_m=128, tile_n=256))


def work(config: Config, case: int) -> Work:
    shape = config.shapes[case]
    m, n, k = BENCHMARKS[case]
    if shape.order == "ours":  # the plan's schedule, of the tile shape it chooses (or is asked for)
        schedule, chosen = our_schedule(m, n, k, -1 if config.tiles is None else config.tiles)
        shape = replace(shape, **OUR_SHAPES[chosen])
    else:
        schedule = static_schedule(shape, m, n, k)
    split = 2 if shape.pair else 1
    columns = dict(unit=[], position=[], k_blocks=[], load_bytes=[], flop=[], store_bytes=[])
    for u, unit_tiles in enumerate(schedule):
        for i, (g, mt, nt) in enumerate(unit_tiles):
            rows, cols = min(shape.tile_m, m[g] - mt * shape.tile_m), min(shape.tile_n, n - nt * shape.tile_n)
            a_rows, b_rows = rows / split, cols / split  # a TMA box brings no bytes for rows past the matrix
            columns["unit"].append(u)
            columns["position"].append(i)
            columns["k_blocks"].append(k // shape.tile_k)
            columns["load_bytes"].append((a_rows + b_rows) * (shape.tile_k / 2 + shape.tile_k / 16))  # FP4 and its scales
            mma_rows = -(-rows // 16) * 16 if shape.swapped else shape.tile_m
            columns["flop"].append(2.0 * mma_rows * shape.tile_n * shape.tile_k / split)
            columns["store_bytes"].append(2.0 * rows * cols / split)
    arrays = {key: np.array(v, dtype=float) for key, v in columns.items()}
    return Work(
        arrays["unit"].astype(int),
        arrays["position"].astype(int),
        arrays["k_blocks"],
        arrays["load_bytes"],
        arrays["flop"],
        arrays["store_bytes"],
        len(schedule),
        SMS // split,
        shape.one_tile_per_cta,
        config.double_buffered and not shape.single_buffer,
        sum(mi * k / 2 + n * k / 2 + (mi + n) * k / 16 + 2 * mi * n for mi in m),
    )


# ----------------------------------------------------------------------------- the time
@dataclass
class Estimate:
    us: float
    dram_us: float
    slowest_unit_us: float


def estimate(config: Config, w: Work, p: Params) -> Estimate:
    main = w.k_blocks * np.maximum(w.load_bytes / p.load_bw, w.flop / MMA_FLOP_PER_US_PER_SM) + p.tile_us
    epilogue = w.store_bytes / (p.store_bw * store_efficiency(config.store_bytes))
    fill = p.fill_us * (0.5 if config.fill_unrolled else 1.0)
    if w.one_tile_per_cta:  # CTAs placed on SMs as they free up, in order
        free = [0.0] * w.slots
        for d in (fill + main + epilogue).tolist():
            heapq.heappush(free, heapq.heappop(free) + d)
        slowest = max(free)
    else:
        if w.double_buffered:  # tile i's K loop waits for tile i - 1's epilogue only where that is longer
            previous_epilogue = np.where(w.position > 0, np.roll(epilogue, 1), 0.0)
            per_unit = np.bincount(w.unit, np.maximum(main, previous_epilogue), w.units)
            last = np.zeros(w.units)
            last[w.unit] = epilogue  # the last tile's epilogue of each unit (tiles are in order)
            per_unit += last
        else:
            per_unit = np.bincount(w.unit, main + epilogue, w.units)
        slowest = fill + float(per_unit.max())
    dram = w.dram_bytes / (B200.bytes_per_s * 1e-6 * p.dram_efficiency)
    return Estimate(p.launch_us + max(dram, slowest), dram, slowest)


# ----------------------------------------------------------------------------- configurations
def every_case(**fields) -> tuple:
    return (Shape(**fields),) * len(BENCHMARKS)


# The winning public submission's versions, as its files configure them per case (facts read from
# gau-nernst/gpu-mode-kernels nvidia/nvfp4_group_gemm/submission_v*.py), and the time its worklog
# gives each case (us). Left out: v2d (a pair for one case only, mixed schedules), v5c (cluster
# launch control), v5f (a register-only change), v6c (its file is not public).
_V2 = dict(ctas=128)
_V5_PAIR = dict(tile_n=256, pair=True, sort_groups=True)
_V5E = dict(_V5_PAIR, order="n_column")
_V2C = (Shape(**_V2), Shape(tile_n=256, order="m_fastest", **_V2), Shape(**_V2), Shape(**_V2))
_V6 = (Shape(**_V5E), Shape(tile_m=256, **_V5E), Shape(**_V5E), Shape(**_V5E))
WORKLOG = {
    "v1": (Config("v1", every_case(one_tile_per_cta=True)), (37.8, 33.0, 10.8, 8.44)),
    "v1b": (Config("v1b", every_case(one_tile_per_cta=True), store_bytes=32), (37.30, 31.10, 10.60, 8.41)),
    "v1c": (Config("v1c", every_case(one_tile_per_cta=True), store_bytes=32), (37.70, 31.10, 10.50, 8.41)),
    "v2": (Config("v2", every_case(**_V2), store_bytes=32, double_buffered=True), (32.5, 22.9, 10.4, 8.4)),
    "v2b": (
        Config("v2b", (Shape(**_V2), Shape(tile_n=256, **_V2), Shape(**_V2), Shape(**_V2)), store_bytes=32, double_buffered=True),
        (32.9, 21.4, 10.5, 8.4),
    ),
    "v2c": (Config("v2c", _V2C, store_bytes=32, double_buffered=True), (32.1, 20.8, 10.4, 8.4)),
    "v2e": (
        Config("v2e", tuple(replace(s, sort_groups=True) for s in _V2C), store_bytes=32, double_buffered=True),
        (31.4, 20.8, 10.4, 8.39),
    ),
    "v4": (
        Config(
            "v4",
            (
                Shape(tile_m=64, tile_n=256, ctas=133, order="m_fastest", sort_groups=True),
                Shape(tile_m=64, tile_n=256, ctas=148, order="m_fastest", sort_groups=True),
                Shape(tile_m=64, tile_n=256, ctas=128, sort_groups=True),
                Shape(tile_m=64, tile_n=256, ctas=128, sort_groups=True),
            ),
            store_bytes=32,
            double_buffered=True,
        ),
        (39.5, 21.2, 12.1, 8.41),
    ),
    "v5": (
        Config(
            "v5",
            (Shape(ctas=128, **_V5_PAIR), Shape(ctas=112, **_V5_PAIR), Shape(ctas=120, **_V5_PAIR), Shape(ctas=128, sort_groups=True)),
            store_bytes=32,
            double_buffered=True,
        ),
        (29.0, 20.8, 10.3, 8.4),
    ),
    "v5e": (Config("v5e", every_case(**_V5E), store_bytes=32, double_buffered=True, fill_unrolled=True), (28.4, 20.6, 8.71, 6.54)),
    "v5g": (Config("v5g", every_case(**_V5E), store_bytes=32, double_buffered=True, fill_unrolled=True), (28.5, 20.3, 8.51, 6.49)),
    "v6": (Config("v6", _V6, store_bytes=32, double_buffered=True, fill_unrolled=True), (27.9, 19.7, 8.5, 6.43)),
    "v6b": (Config("v6b", _V6, store_bytes=32, double_buffered=True, fill_unrolled=True), (27.9, 19.4, 8.48, 6.43)),
}
# Today's sm_100a kernel (csrc/sm100): one CTA per tile, the plan's LPT schedule over at most 148
# CTAs, each thread storing 16 bytes at a time, the first pipeline fill issued without waits; 128 x
# 128 x 128 tiles, TMEM double-buffered when a CTA has several, swapped tiles, or swapped tiles over
# CTA pairs, whichever the plan finds its busiest CTAs' cost lowest with.
OURS = Config("ours", every_case(order="ours"), store_bytes=16, double_buffered=True, fill_unrolled=True)
# Earlier and other forms of it, which the model ranks against it.
CANDIDATES = {
    "ours-half2": replace(
        OURS, name="ours-half2", store_bytes=4, fill_unrolled=False, tiles=0
    ),  # 4-byte half2 stores, waits in the first fill
    "ours-waited-fill": replace(OURS, name="ours-waited-fill", fill_unrolled=False, tiles=0),
    "ours-unswapped": replace(OURS, name="ours-unswapped", tiles=0),  # the 128 x 128 tiles only
    "ours-swapped": replace(OURS, name="ours-swapped", tiles=1),  # the swapped tiles only
    "ours-pair": replace(OURS, name="ours-pair", tiles=2),  # the pair's tiles only
}


# ----------------------------------------------------------------------------- the fit
def fit(points=None, iterations: int = 1500) -> tuple[Params, dict]:
    """Params minimizing the squared log error over the worklog's points (Nelder-Mead in log space);
    and the error of each point, (config, case) -> estimate / logged - 1."""
    points = points or WORKLOG
    works = {(name, c): work(config, c) for name, (config, _) in points.items() for c in range(len(BENCHMARKS))}

    def loss(x: np.ndarray) -> float:
        p = Params(*np.exp(x))
        if p.dram_efficiency > 1:
            return 1e9
        return sum(math.log(estimate(points[name][0], w, p).us / points[name][1][c]) ** 2 for (name, c), w in works.items())

    best = nelder_mead(loss, np.log(Params().vector()), iterations)
    params = Params(*np.exp(best))
    errors = {(name, c): estimate(points[name][0], w, params).us / points[name][1][c] - 1 for (name, c), w in works.items()}
    return params, errors


def nelder_mead(f, x0: np.ndarray, iterations: int, scale: float = 0.3) -> np.ndarray:
    simplex = [x0] + [x0 + scale * np.eye(len(x0))[i] for i in range(len(x0))]
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centroid = np.mean(simplex[:-1], axis=0)
        reflected = centroid + (centroid - simplex[-1])
        fr = f(reflected)
        if fr < values[0]:
            expanded = centroid + 2 * (centroid - simplex[-1])
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (simplex[-1] - centroid)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex = [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex]
                values = [f(x) for x in simplex]
    return simplex[int(np.argmin(values))]


# ----------------------------------------------------------------------------- the design space
def design_space() -> list[Shape]:
    """Every tiling the model can describe: one CTA or a pair, swapped or not, A rows per tile, the
    tile orders, groups sorted or not, one accumulator or two (where two fit in TMEM's 512 columns
    beside 48 scale columns)."""
    shapes = []
    for swapped, pair, tile_m, order, sort, single in itertools.product(
        (False, True), (False, True), (64, 96, 128, 160, 192, 256), ("n_fastest", "m_fastest", "n_column"), (False, True), (False, True)
    ):
        if not swapped and (tile_m not in (128, 256) or (tile_m == 256 and not pair)):
            continue
        for tile_n in ((256,) if pair else (128,)) if swapped else ((128, 256) if pair else (128,)):
            columns = tile_m if swapped else tile_n // (2 if pair else 1)  # accumulator columns per CTA
            if single or 2 * columns + 48 <= 512:
                shapes.append(
                    Shape(tile_m=tile_m, tile_n=tile_n, pair=pair, order=order, sort_groups=sort, swapped=swapped, single_buffer=single)
                )
    return shapes


def best_designs(params: Params) -> list[tuple[float, Shape]]:
    """Per case, the design space's lowest estimate (16-byte stores, double-buffered where it fits,
    the first fill unrolled) and its shape."""
    best = []
    for case in range(len(BENCHMARKS)):
        found = []
        for shape in design_space():
            config = Config("search", (shape,) * len(BENCHMARKS), store_bytes=16, double_buffered=True, fill_unrolled=True)
            found.append((estimate(config, work(config, case), params).us, shape))
        best.append(min(found, key=lambda f: f[0]))
    return best


# ----------------------------------------------------------------------------- the command line
def case_table(config: Config, params: Params) -> str:
    lines = [
        f"{config.name}: per case",
        "| case | tiles | units | DRAM MB | DRAM us | slowest unit us | estimate us | SOL us |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c, (m, n, k) in enumerate(BENCHMARKS):
        w = work(config, c)
        e = estimate(config, w, params)
        sol = floor_us(B200, m, (n,) * len(m), (k,) * len(m))
        lines.append(
            f"| {c} | {len(w.k_blocks)} | {w.units} | {w.dram_bytes / 1e6:.1f} | {e.dram_us:.2f} | {e.slowest_unit_us:.2f} | {e.us:.2f} | {sol:.2f} |"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--config", nargs="*", default=[], choices=["ours", *CANDIDATES, *WORKLOG], help="per-case tables of these configurations"
    )
    parser.add_argument("--search", action="store_true", help="the lowest estimate per case over the model's whole design space")
    args = parser.parse_args()
    params, errors = fit()
    print("fitted: " + ", ".join(f"{k} {v:.4g}" for k, v in vars(params).items()))
    print("\n| version | " + " | ".join(f"case {c}: logged, model" for c in range(len(BENCHMARKS))) + " | geomean: logged, model |")
    print("|---|" + "---|" * (len(BENCHMARKS) + 1))
    for name, (config, logged) in WORKLOG.items():
        model = [logged[c] * (1 + errors[(name, c)]) for c in range(len(BENCHMARKS))]
        cells = [f"{logged[c]:.2f}, {model[c]:.2f} ({100 * errors[(name, c)]:+.0f}%)" for c in range(len(BENCHMARKS))]
        print(f"| {name} | " + " | ".join(cells) + f" | {geomean(logged):.2f}, {geomean(model):.2f} |")
    rms = math.sqrt(sum(math.log(1 + e) ** 2 for e in errors.values()) / len(errors))
    print(f"\nrms log error {rms:.3f}, largest {max(abs(e) for e in errors.values()) * 100:.0f}% over {len(errors)} points")
    for name in args.config or ["ours"]:
        config = OURS if name == "ours" else CANDIDATES[name] if name in CANDIDATES else WORKLOG[name][0]
        estimates = [estimate(config, work(config, c), params).us for c in range(len(BENCHMARKS))]
        print("\n" + case_table(config, params) + f"\ngeomean estimate {geomean(estimates):.2f} us")
    if args.search:
        best = best_designs(params)
        print(f"\nthe design space's best per case ({len(design_space())} shapes):")
        for case, (us, shape) in enumerate(best):
            print(f"  case {case}: {us:.2f} us, {shape}")
        print(f"geomean of the per-case bests {geomean([us for us, _ in best]):.2f} us")


if __name__ == "__main__":
    main()
