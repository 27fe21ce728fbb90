"""The CUDA source's host side, through plain-nvcc builds (no GPU needed; skipped without nvcc).

Index arithmetic of both kernels (scale-atom offsets, the tile schedule, kernel selection, the
sm_100a TMEM column plan) against the reference layouts; the sm_100a dry run needs a CUDA GPU.
"""

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import nvfp4
from conftest import ROOT, requires_cuda
from harness.spec import read_cases
from reference import generate_full_range_input

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")

ARCHS = [90, 100]


@pytest.fixture(scope="module", params=ARCHS, ids=lambda a: f"sm{a}")
def lib(request):
    from tools.nvcc_build import load

    return load(request.param)


def test_the_built_library_has_every_entry_point_and_the_tables_descriptors(lib):
    """Each build (loaded through nvfp4.boundary.bind, which already refuses a different layout) exports
    every entry point of nvfp4/boundary.py's table and reports its descriptors where the table has them."""
    from nvfp4 import boundary

    missing = [
        name for _, name, _ in map(boundary.parse, boundary.ENTRY_POINTS) if name not in boundary.OPTIONAL and not hasattr(lib, name)
    ]
    assert missing == [] and boundary.layout_differences(lib) == []


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.parametrize("arch", [90, 100])
def test_the_host_schedule_compiles_with_a_host_compiler_and_reads_no_kernel_code(arch, tmp_path):
    """csrc/host/schedule.cuh compiled by g++ alone (the CUDA headers for its types): it sees the
    tiles through ArchTiles (csrc/arch_tiles.cuh), and none of the kernels' headers is among its
    includes."""
    unit = tmp_path / "schedule.cpp"
    unit.write_text('#include "host/schedule.cuh"\n')
    from tools.nvcc_build import include_flags

    flags = ["g++", "-std=c++17", f"-DNVFP4_ARCH={arch}", f"-I{ROOT / 'csrc'}", *include_flags()]
    compiled = subprocess.run([*flags, "-c", str(unit), "-o", str(tmp_path / "schedule.o")], capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stderr[-2000:]
    listed = subprocess.run([*flags, "-M", str(unit)], capture_output=True, text=True, check=True).stdout
    headers = sorted({Path(h).resolve().relative_to(ROOT).as_posix() for h in listed.replace("\\\n", " ").split()[1:] if "/csrc/" in h})
    sm = f"sm{arch}"
    expected = [
        "arch_tiles.cuh",
        "host/schedule.cuh",
        "host/status.cuh",
        "launch_params.cuh",
        "prelude.cuh",
        f"{sm}/config.cuh",
        f"{sm}/tiles.cuh",
    ]
    assert headers == sorted(f"csrc/{h}" for h in expected)


def test_the_gemms_built_for_one_wgmma_n_are_those_of_the_config(lib):
    """nvfp4_fixed_n8_at_least (the dry run's check of a launch's fixed N) answers from
    csrc/sm90/config.cuh's FixedWgmmaN8, within each tile shape's rows; sm_100a builds none."""
    ask = lib.nvfp4_fixed_n8_at_least
    if lib.nvfp4_arch() == 90:
        assert [ask(n8, 0) for n8 in (1, 2, 3, 31, 32, 33)] == [2, 2, 4, 32, 32, 0]
        assert [ask(n8, 1) for n8 in (1, 7, 8, 9)] == [2, 8, 8, 0]  # shape 1: 64 A rows at most
    else:
        assert [ask(n8, shape) for n8 in (1, 2, 16) for shape in (0, 1, 2)] == [0] * 9
    assert ask(2, 7) == -1  # no such shape


def test_sm90_build_keeps_wgmma_pipelined():
    """ptxas serializes wgmma, silently apart from an info note, when it cannot prove the pipeline
    safe (a per-tile K loop for each wgmma N did that); the build must carry no such note."""
    from tools.check_cuda import WGMMA_SERIALIZED
    from tools.nvcc_build import build

    note = (
        "ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
        "insufficient register resources for the function '_ZN5nvfp44sm9012grouped_gemmENS_10LaunchArgsE'"
    )
    assert [m.group(1) for m in WGMMA_SERIALIZED.finditer(note)] == ["C7512"]
    _, log = build(90)
    serialized = WGMMA_SERIALIZED.search(log)
    assert serialized is None, serialized.group(0)


@pytest.mark.parametrize(
    "arch,file,old,new,named",
    [
        (90, "sm90/arch.cuh", "static int threads(int shape)", "static int threads(int shape, int = 0)", "threads(shape)"),
        (100, "sm100/tiles.cuh", "static constexpr bool kNarrowTiles = false;", "static constexpr int kNarrowTiles = 0;", "kNarrowTiles"),
    ],
)
def test_an_arch_that_breaks_the_contract_fails_naming_the_member(arch, file, old, new, named):
    """csrc/arch.cuh states what the host side uses of each Arch: a member given another signature
    fails the build there, with the member's name (the host code compiles without device code)."""
    from tools.nvcc_build import build, sources

    text = sources()[file]
    assert old in text
    with pytest.raises(RuntimeError, match=re.escape(named)):
        build(arch, device_code=False, overrides={file: text.replace(old, new)})


def test_the_cuda_12_8_check_catches_a_call_that_only_cuda_13_has():
    """The 12.8 headers come first (not nvcc's own), so a CUDA-13-only signature fails to compile."""
    from tools.cuda_toolkits import fetch
    from tools.nvcc_build import build

    try:
        toolkit = fetch("12.8")
    except RuntimeError as e:  # no route to the package registry (make check-cuda fails on it instead)
        pytest.skip(str(e)[:200])
    source = (ROOT / "csrc" / "host" / "plan.cuh").read_text()
    guarded = source[source.index("#if CUDART_VERSION >= 13000") : source.index("#endif", source.index("#if CUDART_VERSION >= 13000")) + 6]
    only_13 = guarded.splitlines()[1]
    assert "cudaGraphAddDependencies(graph, &prev, &node, &edge, 1)" in only_13
    build(100, toolkit=toolkit, device_code=False)
    with pytest.raises(RuntimeError, match="too many arguments in function call"):
        build(100, toolkit=toolkit, device_code=False, overrides={"host/plan.cuh": source.replace(guarded, only_13)})


def test_kernel_selection_by_compute_capability():
    from nvfp4.build import kernel_target

    assert kernel_target((9, 0)) == (90, "90a")
    assert kernel_target((10, 0)) == (100, "100a")
    assert kernel_target((10, 3)) == (100, "103a")
    for other in [(8, 0), (8, 9), (9, 1), (12, 0), (7, 5)]:
        assert kernel_target(other) is None  # the portable path


@pytest.mark.parametrize("mn,k", [(96, 256), (300, 768), (1, 1024), (129, 512)])
def test_scale_offsets_match_the_reordered_layout(lib, mn, k):
    data = generate_full_range_input((mn,), (128,), (k,), 1, seed=mn, device=torch.device("cpu"))
    plain = data[1][0][0][:, :, 0].view(torch.uint8).numpy()
    memory = data[2][0][0].permute(5, 2, 4, 0, 1, 3).contiguous().view(torch.uint8).flatten().numpy()
    offsets = np.array([[lib.nvfp4_scale_byte(r, j, k) for j in range(k // 16)] for r in range(mn)])
    np.testing.assert_array_equal(memory[offsets], plain)


def schedule(lib, m, n, k, num_sms, tiles=-1, max_pairs=None):
    """Per tile: group, m chunk, n block, launch, unit (a CTA, or a pair), A rows, the launch's fixed wgmma N / 8 and tile shape."""
    mnk = (ctypes.c_int * (3 * len(m)))(*[v for triple in zip(m, n, k) for v in triple])
    capacity = 1 << 16
    out = (ctypes.c_int * (8 * capacity))()
    count = lib.nvfp4_schedule(mnk, len(m), num_sms, num_sms // 2 if max_pairs is None else max_pairs, tiles, out, capacity)
    return np.array(out[: 8 * count]).reshape(count, 8)


def tile_rows(lib):
    """A rows, B rows per tile of shape 0, the K multiple, the number of tile shapes."""
    values = [ctypes.c_int() for _ in range(4)]
    lib.nvfp4_tile_rows(*map(ctypes.byref, values))
    return [v.value for v in values]


def schedule_cases():
    cases = [c.args for s in ("tests", "benchmarks") for c in read_cases(str(ROOT / "task.yml"), s, None)]
    cases.append({"m": (0, 1, 7, 300, 0), "n": (128, 256, 136, 4096, 512), "k": (256, 512, 1024, 768, 256), "g": 5})
    cases.append({"m": tuple(8 * (i % 9) + 1 for i in range(70)), "n": (256,) * 70, "k": (512,) * 70, "g": 70})
    cases.append({"m": (64,) * 3, "n": (128 * 1200,) * 3, "k": (256,) * 3, "g": 3})  # more tiles than one launch holds
    return cases


SHAPE_CHOICES = {90: (-1, 0, 1), 100: (-1, 0, 1, 2)}  # -1: the plan's choice; then each tile shape the build has
SHAPE_NAMES = {-1: "chosen", 0: "shape0", 1: "shape1", 2: "shape2"}


@pytest.mark.parametrize("case", schedule_cases(), ids=lambda c: f"G={c['g']}")
@pytest.mark.parametrize("num_sms", [132, 148])
@pytest.mark.parametrize(
    "arch,choice", [(a, c) for a in ARCHS for c in SHAPE_CHOICES[a]], ids=lambda v: f"sm{v}" if v in ARCHS else SHAPE_NAMES[v]
)
def test_schedule_covers_every_tile_once_and_balances(arch, choice, case, num_sms):
    from tools.nvcc_build import load

    lib = load(arch)
    _, _, k_mult, shapes = tile_rows(lib)
    assert shapes == len(SHAPE_CHOICES[arch]) - 1
    m, n, k = case["m"], case["n"], tuple(max(v, k_mult) // k_mult * k_mult for v in case["k"])
    tiles = schedule(lib, m, n, k, num_sms, choice)
    keys = [tuple(t[:3]) for t in tiles]
    assert len(keys) == len(set(keys)), "a tile is scheduled twice"
    used = set(tiles[:, 7])
    assert len(used) == 1 and (choice < 0 or used == {choice})
    from tools.dry_run import tile_shape

    a_rows, b_rows, ctas = tile_shape(lib, int(tiles[0, 7]))
    for g in range(len(m)):
        chunks = {mc: rows for (gg, mc, _, _, _, rows, _, _) in tiles if gg == g}
        if m[g] == 0:
            assert not chunks
            continue
        expected = {(g, mc, nb) for mc in range(len(chunks)) for nb in range(-(-n[g] // b_rows))}
        assert {key for key in keys if key[0] == g} == expected
        rows = [chunks[mc] for mc in range(len(chunks))]
        assert sum(rows) == m[g] and rows[0] <= a_rows and all(r == rows[0] for r in rows[:-1]) and 0 < rows[-1] <= rows[0]
    for launch in set(tiles[:, 3]):
        assert tiles[tiles[:, 3] == launch][:, 4].max() < num_sms // ctas  # a pair's two CTAs are one unit
    for _, _, _, _, _, rows, fixed_n8, _ in tiles:
        assert fixed_n8 == 0 or rows <= 8 * fixed_n8
    for launch in set(tiles[:, 3]):
        ctas = tiles[tiles[:, 3] == launch][:, 4]
        assert ctas.max() < num_sms and len(set(ctas)) == ctas.max() + 1  # every CTA of a launch has a tile


def launch_kernels(lib, m, n, k, num_sms=132) -> list[int]:
    """The fixed wgmma N / 8 of each launch's kernel (0: the kernel choosing each tile's N)."""
    tiles = schedule(lib, m, n, k, num_sms)
    return [int(tiles[tiles[:, 3] == launch][0, 6]) for launch in sorted(set(tiles[:, 3]))]


def test_one_wave_sm90_problems_run_a_kernel_built_for_their_widest_tile():
    from tools.nvcc_build import load

    lib90, benchmarks = load(90), [c.args for c in read_cases(str(ROOT / "task.yml"), "benchmarks", None)]
    case2, case3 = benchmarks[2], benchmarks[3]
    assert launch_kernels(lib90, case2["m"], case2["n"], case2["k"]) == [14]  # A chunks: 192 = 2 x 96, 320 = 3 x 112 rows
    assert launch_kernels(lib90, case3["m"], case3["n"], case3["k"]) == [16]
    assert launch_kernels(lib90, (1, 17, 0, 129), (1024, 512, 256, 768), (512,) * 4) == [2]  # chunks of at most 16 rows
    assert launch_kernels(lib90, (256,) * 8, (4096,) * 8, (1024,) * 8) == [32]  # many waves, every tile 256 rows


def test_sm90_tiles_of_mixed_widths_keep_the_kernel_choosing_each_n():
    from tools.nvcc_build import load

    lib90, benchmarks = load(90), [c.args for c in read_cases(str(ROOT / "task.yml"), "benchmarks", None)]
    for case in benchmarks[:2]:  # several waves of tiles of 40 to 248 rows
        assert launch_kernels(lib90, case["m"], case["n"], case["k"]) == [0]
    # One wave (66 tiles of 256 rows and one of 8), but issued with N = 256 the narrow tile's long K
    # would take longer than all of the wide tiles.
    assert launch_kernels(lib90, (256, 8), (128 * 66, 128), (256, 8192)) == [0]
    assert launch_kernels(load(100), (128, 384), (4096, 4096), (1536, 1536)) == [0]  # sm_100a: no kernels built for one N


def test_few_tiles_per_cta_are_rebalanced_after_lpt():
    """Case 1 (448 tiles of 8 sizes on 132 CTAs): LPT alone left the busiest CTA 13% above the
    average cost, the rebalanced schedule at most 6%."""
    from tools.nvcc_build import load

    case = read_cases(str(ROOT / "task.yml"), "benchmarks", None)[1].args
    tiles = schedule(load(90), case["m"], case["n"], case["k"], 132)
    costs = np.array([case["k"][g] * (-(-rows // 8) * 8 + 256) for g, rows in zip(tiles[:, 0], tiles[:, 5])])
    loads = np.bincount(tiles[:, 4], weights=costs)
    assert loads.max() <= 1.06 * loads.mean()


def test_a_problem_seen_before_gets_the_schedule_it_got_first(lib):
    """Plans reuse the schedules of recent problems (a cache of 16): a repeat, a repeat after other
    problems, and a recomputation after 20 others have pushed it out all give the first schedule."""
    first_problem = ((40, 176, 5, 0, 250), (7168, 7168, 136, 128, 4096), (2048, 2048, 1024, 256, 512))
    first = schedule(lib, *first_problem, 132)
    assert np.array_equal(schedule(lib, *first_problem, 132), first)
    others = [((8 * i + 1, 64), (256, 128 * (i + 1)), (512, 256)) for i in range(20)]
    fresh = [schedule(lib, *problem, 132) for problem in others]
    assert not np.array_equal(schedule(lib, *first_problem, 148), first)  # the SM count is part of the problem
    assert np.array_equal(schedule(lib, *first_problem, 132), first)
    for problem, expected in zip(others, fresh):
        assert np.array_equal(schedule(lib, *problem, 132), expected)


def test_tmem_plan_fits_its_allocation():
    from tools.dry_run import tmem_problems
    from tools.nvcc_build import load

    lib100 = load(100)
    assert tmem_problems(lib100) == []
    plan = (ctypes.c_int * 5)()
    assert lib100.nvfp4_tmem_plan(0, 1, plan) == 0 and list(plan) == [2, 256, 272, 288, 512]
    assert lib100.nvfp4_tmem_plan(0, 0, plan) == 0 and list(plan) == [1, 128, 144, 160, 256]
    # Swapped: a 256-column accumulator, whose second would leave no room for the scales.
    assert lib100.nvfp4_tmem_plan(1, 1, plan) == 0 and list(plan) == [1, 256, 272, 304, 512]
    assert lib100.nvfp4_tmem_plan(1, 0, plan) == 0 and list(plan) == [1, 256, 272, 304, 512]
    # The pair: 128 accumulator columns per CTA, two of them in the persistent kernel.
    assert lib100.nvfp4_tmem_plan(2, 1, plan) == 0 and list(plan) == [2, 256, 272, 288, 512]
    assert lib100.nvfp4_tmem_plan(2, 0, plan) == 0 and list(plan) == [1, 128, 144, 160, 256]
    assert lib100.nvfp4_tmem_plan(3, 0, plan) == 1 and lib100.nvfp4_tmem_plan(-1, 0, plan) == 1


def test_sm100_tile_shape_follows_the_cost_of_the_busiest_cta():
    """The benchmark cases on 148 SMs: case 1 (8 groups of 40 to 196 rows, K = 2048) reads each B tile
    once for all of a group's rows in swapped tiles; cases 0, 2 and 3 take the pair's tiles, whose
    CTAs load 192 rows per K block for 128 x 128 outputs (case 0: 176 pair tiles on 74 pairs; 2 and
    3: fewer tiles than pairs). A forced shape is taken as asked; sm_90a has one shape."""
    from tools.nvcc_build import load

    lib100, benchmarks = load(100), [c.args for c in read_cases(str(ROOT / "task.yml"), "benchmarks", None)]
    chosen = [set(schedule(lib100, c["m"], c["n"], c["k"], 148)[:, 7]) for c in benchmarks]
    assert chosen == [{2}, {1}, {2}, {2}]
    case = benchmarks[2]
    for forced in (0, 1, 2):
        assert set(schedule(lib100, case["m"], case["n"], case["k"], 148, forced)[:, 7]) == {forced}
    assert set(schedule(load(90), case["m"], case["n"], case["k"], 132, 1)[:, 7]) == {1}  # sm_90a: few rows, asked for


def test_sm90_problems_of_few_rows_take_the_wide_b_tiles_when_they_fill_the_sms():
    """sm_90a's tile shape 1 (256 B rows by at most 64 A rows) is weighed only when every group fits
    one of its tiles, and then, cheaper than two tiles of shape 0, chosen unless its tiles are too few
    for the SMs; a problem with a wider group keeps shape 0; a shape asked for whose chunks the tile
    cannot number gets no launches (and a plan, an error)."""
    from tools.nvcc_build import load

    lib90 = load(90)
    tiles = schedule(lib90, (1, 8, 3, 0, 5, 2, 7, 4), (4096,) * 8, (7168,) * 8, 132)
    assert set(tiles[:, 7]) == {1} and len(tiles) == 7 * 16  # a tile per group and 256 rows of B
    tiles = schedule(lib90, (16, 64, 0, 33), (4096,) * 4, (7168,) * 4, 132)
    assert set(tiles[:, 7]) == {0} and 96 < len(tiles) <= 132  # too few tiles of 256 B rows for the SMs: shape 0, in narrower chunks
    for case in read_cases(str(ROOT / "task.yml"), "benchmarks", None):
        assert set(schedule(lib90, case.args["m"], case.args["n"], case.args["k"], 132)[:, 7]) == {0}
    assert set(schedule(lib90, (65, 8), (4096, 4096), (7168, 7168), 132)[:, 7]) == {0}
    assert len(schedule(lib90, (40000,), (128,), (256,), 132, 1)) == 0


def test_sm90_moe_gemm_takes_the_shape_and_wgmma_n_of_the_lower_modelled_cost():
    """The MoE forms on 132 SMs, every expert modelled at the most rows it can have: E=8 and N=4096 of
    at most 16 rows take shape 1's 128 wide tiles (one a CTA) over shape 0's 256 narrow ones (two on
    most CTAs); with N=2048 shape 1's 64 tiles would leave half the SMs idle, so shape 0; more rows than
    shape 1's tiles hold, shape 0. Built for one wgmma N when few rows bound it (16 rows: N 16); for
    64 rows each tile's own N models cheaper (an average expert of 32 rows); sm_100a has no such kernels."""
    from tools.nvcc_build import load

    def choice(lib, most_rows, experts, n, k=7168, units=132):
        shape, n8 = ctypes.c_int(), ctypes.c_int()
        lib.nvfp4_expert_kernel_choice(most_rows, experts, n, k, units, ctypes.byref(shape), ctypes.byref(n8))
        return shape.value, n8.value

    lib90 = load(90)
    assert choice(lib90, 16, 8, 4096) == (1, 2)
    assert choice(lib90, 16, 8, 2048) == (0, 0)
    assert choice(lib90, 8, 64, 2048) == (1, 2)
    assert choice(lib90, 64, 16, 4096) == (1, 0)
    assert choice(lib90, 65, 64, 4096) == (0, 0)
    assert choice(load(100), 16, 8, 4096)[1] == 0


def test_pair_tiles_go_to_no_more_pairs_than_fit_on_the_gpu():
    """Case 0 in pair tiles: 74 pairs where every two of 148 SMs hold one, 70 where the GPU holds
    only 70 (a plan to launch asks the device, cudaOccupancyMaxActiveClusters); every tile still once."""
    from tools.nvcc_build import load

    lib100, case = load(100), read_cases(str(ROOT / "task.yml"), "benchmarks", None)[0].args
    for max_pairs, units in ((74, 74), (70, 70), (200, 74)):
        tiles = schedule(lib100, case["m"], case["n"], case["k"], 148, 2, max_pairs)
        assert tiles[:, 4].max() + 1 == units and len({tuple(t[:3]) for t in tiles}) == len(tiles) == 176


@pytest.mark.parametrize(
    "sizes,message",
    [
        ((4, 4 * 64, 64, 4 * 128, 256, 512), None),  # E, rows, rows per expert, scale rows, N, K: consistent
        ((4, 4 * 64 - 1, 64, 4 * 128, 256, 512), "need 256 rows"),  # one row short: expert 3 would run past A and C
        ((4, 4 * 64, 64, 3 * 128, 256, 512), "512 scale rows"),  # the last expert's scale rows past sfa
        ((4, 4 * 64, 64, 4 * 128, 256, 100), "unsupported MoE problem"),
        ((4, 4 * 64, 64, 4 * 128, 256, 512, (1 << 20) + 2, 0, 0), "unsupported MoE problem"),  # alpha not 4-byte aligned
        ((4, 4 * 64, 64, 4 * 128, 256, 512, 1 << 20, 2, 0), "unsupported MoE problem"),  # alpha's column stride neither 0 nor 1
    ],
)
def test_the_masked_launch_refuses_sizes_its_buffers_cannot_hold(lib, sizes, message):
    """The C API checks the masked form's sizes before anything reaches the GPU (nvfp4/moe.py passes
    consistent ones; another caller may not): a refusal names what does not fit."""
    from nvfp4.boundary import ExpertDesc

    experts, total_rows, rows_per_expert, sf_rows, n, k = sizes[:6]
    alpha, alpha_stride, out_bf16 = sizes[6:] or (0, 0, 0)
    desc = ExpertDesc(
        **dict.fromkeys(("a", "b", "c", "sfa", "sfb", "masked_m"), 1 << 20),  # no offsets: the masked form
        experts=experts,
        total_rows=total_rows,
        rows_per_expert=rows_per_expert,
        sf_rows=sf_rows,
        n=n,
        k=k,
        alpha=alpha,
        alpha_stride=alpha_stride,
        out_bf16=out_bf16,
    )
    err = ctypes.create_string_buffer(256)
    if message is None:
        assert lib.nvfp4_experts_workspace_bytes(desc) > 0  # well formed; launching it needs a GPU
        return
    assert lib.nvfp4_experts_launch(desc, 132, None, None, err, len(err)) == 1
    assert message in err.value.decode(), err.value.decode()


@pytest.mark.parametrize("total,units", [(0, 132), (1, 132), (131, 132), (132, 132), (448, 132), (256, 132), (1000, 74), (7, 3)])
def test_the_moe_walk_deals_every_tile_to_one_cta_and_balances_sorted_costs(lib, total, units):
    """The MoE forms' snake: every tile of the walk to exactly one CTA, each CTA's in walk order; on
    costs that fall along the walk (the schedule sorts the experts so) no CTA gets more than a
    quarter of the costs' spread above what greedy LPT gives its busiest CTA (dealing round-robin
    exceeds that on the larger walks)."""
    dealt = []
    for unit in range(units):
        tiles = (ctypes.c_int * (total // units + 1))()
        count = lib.nvfp4_expert_walk(total, unit, units, tiles, len(tiles))
        assert list(tiles[:count]) == sorted(tiles[:count])
        dealt.append(list(tiles[:count]))
    assert sorted(t for d in dealt for t in d) == list(range(total))
    costs = sorted(np.random.default_rng(total).integers(256, 512, total), reverse=True)
    load = [sum(costs[t] for t in d) for d in dealt]
    lpt = np.zeros(units, dtype=np.int64)
    for c in costs:
        lpt[lpt.argmin()] += c
    assert max(load, default=0) <= lpt.max() + (max(costs) - min(costs)) // 4 if costs else not any(load)


@pytest.mark.parametrize(
    "batch,rows,k,threads",
    [(1, 16384, 7168, 132 * 16 * 256), (3, 1, 64, 1000), (64, 64, 2048, 300), (2, 200, 128, 7), (5, 129, 64, 1), (1, 128, 7168, 448)],
)
def test_the_quantize_walk_visits_every_item_once_in_order(lib, batch, rows, k, threads):
    """quantize's grid-stride walk without divisions: each of `threads` threads (at most a few sampled
    on the large walks) visits items first, first + stride, ... as (batch entry, row, unit), the
    same as dividing each item index, up to the last item; a thread that starts past it visits none.
    A unit is the two blocks of 16 elements a thread quantizes at once."""
    padded, units = -(-rows // 128) * 128, k // 32
    items = batch * padded * units
    for first in sorted({0, 1, threads // 2, threads - 1} if items > 1 << 20 else range(threads)) + [items, items + threads - 1]:
        expected = [(i // units // padded, i // units % padded, i % units) for i in range(first, items, threads)]
        out = (ctypes.c_int * (3 * len(expected) + 3))()
        count = lib.nvfp4_quantize_walk(batch, padded, units, first, threads, out, len(expected) + 1)
        assert count == len(expected)  # -1: it went on past the last item
        assert [tuple(out[3 * i : 3 * i + 3]) for i in range(count)] == expected


def quantized_on_host(lib, blocks: torch.Tensor, dtype: torch.dtype, global_scales: np.ndarray | None = None):
    """(codes [blocks, 8], scale bytes [blocks]) of 16-element fp16/bf16 blocks by the CUDA kernel's
    per-block arithmetic run on the host (one float32 global scale a block, or none)."""
    codes, scales = np.zeros((len(blocks), 8), np.uint8), np.zeros(len(blocks), np.uint8)
    bits = blocks.view(torch.int16).numpy().astype(np.uint16)
    lib.nvfp4_quantize_blocks_on_host(
        bits.ctypes.data_as(ctypes.c_void_p),
        ctypes.c_int64(len(blocks)),
        int(dtype == torch.bfloat16),
        None if global_scales is None else global_scales.ctypes.data_as(ctypes.c_void_p),
        codes.ctypes.data_as(ctypes.c_void_p),
        scales.ctypes.data_as(ctypes.c_void_p),
    )
    return codes, scales


def e2m1_ties_blocks(dtype: torch.dtype) -> torch.Tensor:
    """Blocks of 16 whose first element (6 s) makes the scale s, for every positive E4M3 s, and whose
    others are each rounding threshold t * s, one step above and below it, either sign."""
    from nvfp4.quantize import E2M1_TIES

    scales = torch.arange(1, 0x7F, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    values = []
    for t, _ in E2M1_TIES:
        exact = (t * scales).to(dtype)
        up, down = torch.nextafter(exact, torch.full_like(exact, 1e4)), torch.nextafter(exact, torch.zeros_like(exact))
        values += [exact, up, down, -exact, -up, -down]
    tests = torch.stack(values, 1)  # [126 scales, 42]
    tests = torch.cat([tests, torch.zeros(len(scales), 3, dtype=dtype)], 1).reshape(len(scales), 3, 15)
    first = (6 * scales).to(dtype)[:, None, None].expand(-1, 3, 1)
    return torch.cat([first, tests], 2).reshape(-1, 16)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_the_quantize_arithmetic_matches_the_portable_recipe(lib, dtype):
    """quantize_block, the CUDA kernel's per-block arithmetic (pair compares against t * s in a binary
    search), on the host with its pair operations emulated: every code and scale byte equal to the
    recipe's on each rounding threshold of every scale and one step either side, and on blocks of
    random bits (NaN, inf, subnormals, -0 among them)."""
    from nvfp4.quantize import new_quantize_outputs, quantize_portable

    random_bits = torch.from_numpy(np.random.default_rng(7).integers(0, 1 << 16, (4096, 16), dtype=np.uint16).view(np.int16))
    blocks = torch.cat([e2m1_ties_blocks(dtype), random_bits.view(dtype)])
    blocks = torch.cat([blocks, blocks.new_zeros((-len(blocks)) % 4, 16)])
    x = blocks.reshape(-1, 64)
    q, sf = new_quantize_outputs(x)
    quantize_portable(x, None, q, sf)
    codes, scales = quantized_on_host(lib, blocks, dtype)
    np.testing.assert_array_equal(codes.reshape(x.shape[0], 32), q.view(torch.uint8).numpy())
    np.testing.assert_array_equal(scales.reshape(x.shape[0], 4), nvfp4.plain_from_blocked(sf.view(torch.uint8), x.shape[0]).numpy())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_the_two_level_quantize_arithmetic_matches_the_independent_recipe(lib, dtype):
    """quantize_block with a global scale, the CUDA kernel's per-block arithmetic, on the host: every
    code and scale byte equal to the independent NumPy recipe's (tests/two_level_reference.py) on
    rows with zeros, subnormals, inf, NaN and blocks past saturation, each with its own global scale."""
    from two_level_reference import awkward_activations, quantize_two_level

    x, scale = awkward_activations(400, 128, dtype, seed=21)
    blocks = x.reshape(-1, 16)
    per_block = np.repeat(scale, 128 // 16).astype(np.float32)
    codes, scales = quantized_on_host(lib, blocks, dtype, per_block)
    expected_codes, expected_scales = quantize_two_level(x, scale)
    np.testing.assert_array_equal(codes.reshape(400, 64), expected_codes)
    np.testing.assert_array_equal(scales.reshape(400, 8), expected_scales)


def test_sm90_k_block_stays_within_its_instruction_budget():
    """The consumer warp's K block of each sm_90a kernel built for one wgmma N, counted in the build's
    SASS (tools/k_block_sass.py). With few A rows its instructions set the kernel's time, so a change
    that adds some fails here before any GPU time is spent (B's fragments addressed through pointers
    added six to shape 0's and cost 3% on benchmark case 1: docs/perf-log/log.md section 23)."""
    from tools.k_block_sass import cuobjdump, k_blocks
    from tools.nvcc_build import build

    try:
        cuobjdump()
    except RuntimeError as e:  # none on this machine and the registry out of reach
        pytest.skip(str(e))
    counts = k_blocks(build(90)[0])
    budget = {0: 96, 1: 94}  # per tile shape, the most of any wgmma N (shape 1: a warp decodes one half's rows)
    assert sorted({shape for shape, _ in counts}) == [0, 1] and len(counts) == 20
    assert {key: n for key, n in counts.items() if n > budget[key[0]]} == {}


def test_timeline_marks_are_compiled_into_the_timeline_build_only():
    """bench/timeline.py's marks (csrc/timeline.cuh) read the globaltimer in every sm_90a GEMM kernel of
    the NVFP4_TIMELINE=1 build, which alone has their reader; the production build has neither."""
    from tools.k_block_sass import cuobjdump, functions
    from tools.nvcc_build import build

    try:
        cuobjdump()
    except RuntimeError as e:  # none on this machine and the registry out of reach
        pytest.skip(str(e))

    def timer_reads(library):
        return {name: sum("GLOBALTIMER" in i for i in body) for name, body in functions(library).items() if "grouped_gemm" in name}

    production, timeline = build(90)[0], build(90, defines=("NVFP4_TIMELINE=1",))[0]
    assert len(timer_reads(production)) == 28 and not any(timer_reads(production).values())
    assert len(timer_reads(timeline)) == 28 and all(timer_reads(timeline).values())
    assert not hasattr(ctypes.CDLL(str(production)), "nvfp4_read_timeline")
    assert hasattr(ctypes.CDLL(str(timeline)), "nvfp4_read_timeline")


def test_sm90_gemm_kernels_start_with_the_registers_their_setmaxnreg_counts_assume():
    """sm90::Pipeline's setmaxnreg counts move registers from the producer warpgroup to the consumers,
    assuming the CTA starts with 65536 / threads a thread rounded down to 8: 168 for shape 0 (384
    threads), 96 for shape 1 (640). ptxas's report of every GEMM kernel says what it starts with."""
    import re

    from tools.nvcc_build import build

    report = build(90)[1]
    used = dict(re.findall(r"Compiling entry function '(\S*grouped_gemm\S*)'.*?Used (\d+) registers", report, re.S))
    shapes = {name: int(re.search(r"grouped_gemmILi\d+ELi(\d)E", name).group(1)) for name in used}
    assert sorted(set(shapes.values())) == [0, 1] and len(used) == 28
    assert {name: int(n) for name, n in used.items() if int(n) != {0: 168, 1: 96}[shapes[name]]} == {}


def test_the_sm90_fp4_decode_gives_every_code_times_2_to_the_minus_14(lib):
    """fp4x8_to_half2x4 (the GEMM's B fragments, all eight codes of a word at once) and fp4x2_to_half2
    (the prepass, two codes) on the host: half2 q of a word holds codes q and q + 4, each its E2M1
    value times 2^-14 exactly (0.5 an fp16 subnormal), on words with every code at every position
    and on random words; the two decodes give the same bits."""
    from reference import FP4_VALUES

    every = np.arange(1 << 16, dtype=np.uint32)
    words = np.concatenate([every | every << 16, np.random.default_rng(11).integers(0, 1 << 32, 1 << 16, dtype=np.uint32)])
    all_codes, code_pairs = (np.zeros((len(words), 4), np.uint32) for _ in range(2))
    lib.nvfp4_decode_words_on_host(
        words.ctypes.data_as(ctypes.c_void_p),
        ctypes.c_int64(len(words)),
        all_codes.ctypes.data_as(ctypes.c_void_p),
        code_pairs.ctypes.data_as(ctypes.c_void_p),
    )
    np.testing.assert_array_equal(all_codes, code_pairs)
    halves = all_codes.view(np.uint16).reshape(len(words), 4, 2).view(np.float16).astype(np.float64) * 2.0**14
    values = np.array(FP4_VALUES)
    for q in range(4):
        for half, shift in ((0, 4 * q), (1, 4 * q + 16)):
            expected = values[(words >> shift) & 0xF]
            np.testing.assert_array_equal(halves[:, q, half], expected)
            np.testing.assert_array_equal(np.signbit(halves[:, q, half]), np.signbit(expected))


@requires_cuda
@pytest.mark.parametrize("arch", ARCHS)
def test_dry_run_of_every_official_case_and_64_groups(arch):
    from reference import generate_input
    from tools.dry_run import cases, check_case
    from tools.nvcc_build import load

    lib = load(arch)
    num_sms = 148 if arch == 100 else torch.cuda.get_device_properties(0).multi_processor_count  # B200: 148 SMs
    for spec, case in cases():
        assert check_case(lib, generate_input(**case), num_sms) == [], spec
