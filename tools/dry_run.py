"""Dry run of a CUDA path's launch arguments on any CUDA GPU: build them, launch nothing, check them.

    python3 -m tools.dry_run [--arch 100]

For every official test and benchmark case and a 64-group case: inputs on the GPU, a plan made
with real cuTensorMapEncodeTiled tensor maps over the real buffers, then checks that every tile
of every group is scheduled exactly once, the kernel choice, the group arguments, the tensor
maps, every byte range the kernel will read or write, and (sm_100a) the TMEM column plan.
"""

import argparse
import ctypes
import shutil
import sys

import torch

from harness.spec import read_cases
from nvfp4.build import BUILD_TARGETS
from nvfp4.kernel_path import TILE_SHAPE_NAMES, TILES_CHOSEN, create_plan
from nvfp4.layout import from_leaderboard
from reference import generate_input
from tools.nvcc_build import ROOT, load


def cases() -> list[tuple[str, dict]]:
    found = [(c.spec, c.args) for section in ("tests", "benchmarks") for c in read_cases(str(ROOT / "task.yml"), section, None)]
    g = 64
    m = tuple(8 * (i % 40) + 8 for i in range(g))
    found.append(("G=64", {"m": m, "n": (512,) * g, "k": (512,) * g, "g": g, "seed": 64}))
    return found


def byte_element_maps(lib) -> bool:
    """Whether this GPU needs the byte-equivalent tensor maps: sm_100a's 4-bit element type
    (CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B) is refused by the drivers of pre-sm_100 GPUs."""
    return lib.nvfp4_arch() == 100 and torch.cuda.get_device_capability()[0] < 10


def plan_for(lib, data, num_sms, tiles):
    """(handle, workspace) of a plan that is only inspected, never launched."""
    mode = 2 if byte_element_maps(lib) else 1
    return create_plan(lib, *from_leaderboard(data), num_sms, mode, ctypes.create_string_buffer(512), tiles=tiles)


def tile_shape(lib, shape: int) -> tuple[int, int, int]:
    """A rows, B rows and CTAs of a tile of the shape."""
    values = [ctypes.c_int() for _ in range(3)]
    if lib.nvfp4_tile_shape(shape, *map(ctypes.byref, values)):
        raise ValueError(f"no tile shape {shape} in this build")
    return tuple(v.value for v in values)


def check_case(lib, data, num_sms, tiles=TILES_CHOSEN) -> list[str]:
    """Problems found in the launch arguments for `data` (empty when all checks pass)."""
    abc, _, sfr, sizes = data
    tile_m, tile_n, k_multiple, tile_shapes = (ctypes.c_int() for _ in range(4))
    lib.nvfp4_tile_rows(*map(ctypes.byref, (tile_m, tile_n, k_multiple, tile_shapes)))
    try:
        handle, _workspace = plan_for(lib, data, num_sms, tiles)
    except ValueError as e:
        return [str(e)]
    problems, seen, chunk_rows, shapes = [], {}, {}, set()
    try:
        for launch in range(lib.nvfp4_plan_launch_count(handle)):
            grid, persistent, fixed_n8, shape, count = (ctypes.c_int() for _ in range(5))
            packed, firsts = (ctypes.c_uint32 * 4096)(), (ctypes.c_uint16 * 512)()
            lib.nvfp4_plan_launch_info(handle, launch, *map(ctypes.byref, (grid, persistent, fixed_n8, shape, count)), packed, firsts)
            shapes.add(shape.value)
            a_rows, b_rows, tile_ctas = tile_shape(lib, shape.value)
            units = grid.value // tile_ctas  # a pair's CTAs run one tile list
            if tiles != TILES_CHOSEN and tile_shapes.value > 1 and shape.value != tiles:
                problems.append(f"launch {launch}: tile shape {shape.value}, asked for {tiles}")
            if grid.value % tile_ctas or not 0 < grid.value <= num_sms or bool(persistent.value) != (count.value > units):
                problems.append(f"launch {launch}: grid {grid.value}, {count.value} tiles, persistent={persistent.value}")
            if fixed_n8.value and lib.nvfp4_fixed_n8_at_least(fixed_n8.value, shape.value) != fixed_n8.value:
                problems.append(f"launch {launch}: no kernel is built for wgmma N = {8 * fixed_n8.value}")
            if firsts[units] != count.value or any(firsts[c] >= firsts[c + 1] for c in range(units)):
                problems.append(f"launch {launch}: CTA tile ranges are not a partition with one tile at least each")
            groups = {}
            for i in range(count.value):
                local, m_chunk, n_block = packed[i] & 127, (packed[i] >> 7) & 511, packed[i] >> 16
                if local not in groups:
                    out, ta, tb = (ctypes.c_int64 * 8)(), (ctypes.c_uint8 * 128)(), (ctypes.c_uint8 * 128)()
                    lib.nvfp4_plan_group(handle, launch, local, out, ta, tb)
                    groups[local] = (list(out), bytes(ta), bytes(tb))
                (sfa, sfb, c, m, n, k, chunk, box), ta, tb = groups[local]
                g = next((g for g, (_, _, cc) in enumerate(abc) if cc.data_ptr() == c), None)
                if g is None or (m, n, k) != tuple(sizes[g][:3]) or sfa != sfr[g][0].data_ptr() or sfb != sfr[g][1].data_ptr():
                    problems.append(f"launch {launch} group {local}: arguments match no input group")
                    continue
                if not any(ta) or not any(tb):
                    problems.append(f"group {g}: a tensor map was not encoded")
                key = (g, m_chunk, n_block)
                seen[key] = seen.get(key, 0) + 1
                off_m, off_n = m_chunk * chunk, n_block * b_rows
                rest_k = k // 64
                for name, t, off in (("sfa", sfr[g][0], off_m), ("sfb", sfr[g][1], off_n)):
                    end = lib.nvfp4_scale_byte(off // 128 * 128 + 127, k // 16 - 1, k) + 1
                    if end > t.numel() or ((off // 128) + 1) * rest_k * 512 > t.numel():
                        problems.append(f"group {g} tile {key}: {name} reads past its {t.numel()} bytes")
                if off_m >= m or off_n >= n or k % k_multiple.value:
                    problems.append(f"group {g} tile {key}: outside the problem")
                rows = min(chunk, m - off_m)
                wgmma_rows = 8 * fixed_n8.value if fixed_n8.value else -(-rows // 8) * 8
                chunk_rows.setdefault(g, set()).add(chunk)
                if lib.nvfp4_arch() == 100:
                    bad = chunk != a_rows or box != chunk // tile_ctas
                else:
                    bad = chunk not in range(8, a_rows + 1, 8) or not rows <= wgmma_rows <= box <= max(chunk, wgmma_rows)
                if bad:
                    problems.append(f"group {g} tile {key}: {rows} rows of an A chunk of {chunk}, a box of {box}, wgmma N {wgmma_rows}")
    finally:
        lib.nvfp4_plan_destroy(handle)
    for g, (m, n, _, _) in enumerate(sizes):
        if m and n:
            chunks = {mc for (gg, mc, _) in seen if gg == g}
            n_blocks = -(-n // tile_shape(lib, max(shapes))[1]) if len(shapes) == 1 else -1
            expected = {(g, mc, nb) for mc in range(len(chunks)) for nb in range(n_blocks)}
            one_chunk_size = len(chunk_rows.get(g, ())) == 1
            if {key for key in seen if key[0] == g} != expected or not one_chunk_size or len(chunks) != -(-m // min(chunk_rows[g])):
                problems.append(f"group {g}: scheduled tiles are not every (m chunk, n block) once")
        elif any(key[0] == g for key in seen):
            problems.append(f"group {g}: empty but scheduled")
    problems += [f"tile {key} scheduled {times} times" for key, times in seen.items() if times != 1]
    return problems


def tmem_problems(lib) -> list[str]:
    """Each sm_100a kernel's TMEM columns: accumulators (a column per row of the MMA's N side: 128,
    swapped 256), then 16 scale columns for the M side and 16 per 128 rows of the N side, inside a
    power-of-two allocation."""
    problems = []
    for shape, n_rows in enumerate((128, 256, 128)):
        for persistent in (0, 1):
            plan = (ctypes.c_int * 5)()
            if lib.nvfp4_tmem_plan(shape, persistent, plan):
                return []
            buffers, sf_m, sf_n, used, allocated = plan
            if not (
                sf_m >= buffers * n_rows
                and sf_n >= sf_m + 16
                and used >= sf_n + 16 * (n_rows // 128)
                and used <= allocated <= 512
                and allocated & (allocated - 1) == 0
                and allocated >= 32
                and buffers in (1, 2)
            ):
                problems.append(f"TMEM plan (shape {shape}, persistent={persistent}) {list(plan)} does not fit its allocation")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", type=int, default=100)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("the dry run (make dry-run) needs a CUDA GPU (any: the sm_100a kernel is never launched), and there is none here")
    if shutil.which("nvcc") is None:
        sys.exit("the dry run (make dry-run) needs nvcc (CUDA 12.8 or newer) on PATH to build the host side, and there is none")
    lib = load(args.arch)
    num_sms = 148 if args.arch == 100 else torch.cuda.get_device_properties(0).multi_processor_count
    failures = tmem_problems(lib)
    if byte_element_maps(lib):
        print("note: this GPU's driver refuses 4-bit tensor-map elements; the maps use the byte-equivalent UINT8 type")
    choices = {name: tiles for tiles, name in TILE_SHAPE_NAMES[args.arch].items()}
    for spec, case in cases():
        data = generate_input(**case)
        for label, tiles in choices.items():
            problems = check_case(lib, data, num_sms, tiles)
            print(f"{'ok  ' if not problems else 'FAIL'} {spec} {label}", flush=True)
            failures += problems
    for p in failures:
        print("  " + p)
    print(f"dry run sm_{BUILD_TARGETS[args.arch]} on {torch.cuda.get_device_name()}: {'pass' if not failures else 'fail'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
