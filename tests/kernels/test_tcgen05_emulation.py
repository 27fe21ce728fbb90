"""The sm_100a kernel on an sm_90 GPU with its tcgen05 instructions emulated (NVFP4_TCGEN05_EMULATION).

Three layers: each emulated instruction alone, in one CTA and in a CTA pair (a cluster of 2),
against a direct computation of its PTX ISA definition (probe kernels in
tests/cuda/tcgen05_probes.cu); each ordering rule broken once, which the emulation's detectors
must report; then the whole B200 kernel, both of its variants, against the reference under several
seeds of the asynchronous tensor core, including builds with a deliberately broken layout (a wrong
result) or synchronization (a detector's trap). A trap ends the CUDA context, so those run in a
fresh process. Needs nvcc and an sm_90 GPU.
"""

import ctypes
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from numpy_reference import assert_matches_exact, e2m1_to_float, e4m3_to_float
from plan_launches import launches
from planted_kernel_bugs import BROKEN, PLANTED

from conftest import ROOT, child_env, requires_cuda
from harness.runners import clone_data
from harness.spec import read_cases
from nvfp4.build import EMULATION_ENV
from nvfp4.kernel_path import TILES_CHOSEN, TILES_PAIR, TILES_SWAPPED, TILES_UNSWAPPED, KernelPath
from nvfp4.layout import from_leaderboard
from nvfp4.self_check import self_check_failure, self_checked
from reference import generate_full_range_input, generate_input

ON_SM90 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
pytestmark = [requires_cuda, pytest.mark.skipif(not (ON_SM90 and shutil.which("nvcc")), reason="needs nvcc and an sm_90 GPU")]


LAZY_SEED = 2  # the detectors' tests: every operation stays pending until a wait needs it
SEEDS = (2, 3, 8)  # lazy, eager, lazy with other delays


@pytest.fixture(scope="module")
def probes():
    from tools.nvcc_build import build_probes

    lib = build_probes(ROOT / "tests" / "cuda" / "tcgen05_probes.cu")
    lib.probe_configure.argtypes = [ctypes.c_uint64, ctypes.c_uint32]
    assert lib.probe_configure(LAZY_SEED, 20000) == 0
    return lib


def in_fresh_process(code: str) -> tuple[int, str]:
    """Runs `code` in a new Python process (tools/ and tests/ importable), which a trap may end; its
    exit status and its output (a device printf goes to stdout)."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=600
        )
    except subprocess.TimeoutExpired as e:  # a hang: no detector fired
        return -1, f"timed out after {e.timeout} s: " + (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(
            errors="replace"
        )
    return proc.returncode, proc.stdout + proc.stderr


def probe_in_fresh_process(call: str, **tensors: str) -> tuple[int, str]:
    """A probe call in a fresh process with the lazy seed, which prints its status: `call` names
    `probes` and, in braces, the tensors given as keyword arguments (each the expression that makes
    it, kept alive through the call)."""
    lines = [
        "import ctypes, torch",
        "from pathlib import Path",
        "from tools.nvcc_build import build_probes",
        'probes = build_probes(Path("tests/cuda/tcgen05_probes.cu"))',
        "probes.probe_configure.argtypes = [ctypes.c_uint64, ctypes.c_uint32]",
        f"assert probes.probe_configure({LAZY_SEED}, 20000) == 0",
    ]
    lines += [f"{name} = {expression}" for name, expression in tensors.items()]
    lines.append(f"print('probe status', {call.format(**{name: f'ctypes.c_void_p({name}.data_ptr())' for name in tensors})})")
    return in_fresh_process("\n".join(lines))


def call(fn, *args):
    pointers = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]
    rc = fn(*[ctypes.c_void_p(p) if isinstance(a, torch.Tensor) else ctypes.c_int(p) for a, p in zip(args, pointers)])
    assert rc == 0, f"probe failed with CUDA error {rc}"


def words(t: torch.Tensor) -> np.ndarray:
    return t.cpu().numpy().view(np.uint32)


# ----------------------------------------------------------------------------- one instruction at a time
@pytest.mark.parametrize("columns", [32, 256, 512])
def test_alloc_writes_an_address_inside_tmem_and_dealloc_frees_it(probes, columns):
    out = torch.zeros(3, dtype=torch.int32, device="cuda")
    call(probes.probe_alloc, columns, out)
    address, allocated, after = words(out)
    assert address >> 16 == 0 and (address & 0xFFFF) + columns <= 512 and (address & 0xFFFF) % columns == 0
    assert (allocated, after) == (columns, 0)


@pytest.mark.parametrize("column", [0, 4, 260])
def test_cp_32x128b_warpx4_puts_row_r_in_lane_r_of_every_quarter(probes, column):
    atom = torch.randint(0, 256, (512,), dtype=torch.uint8, device="cuda")
    out = torch.zeros(128 * 4, dtype=torch.int32, device="cuda")
    call(probes.probe_cp, atom, column, out)
    rows = atom.cpu().numpy().reshape(32, 16).view("<u4")  # row r: 4 little-endian 32-bit words
    expected = np.concatenate([rows] * 4)  # lanes r, r + 32, r + 64, r + 96
    np.testing.assert_array_equal(words(out).reshape(128, 4), expected)


@pytest.mark.parametrize("column", [0, 200, 480])
def test_ld_32x32b_x32_gives_each_thread_its_lane(probes, column):
    out = torch.zeros(4 * 32 * 32, dtype=torch.int32, device="cuda")
    call(probes.probe_ld, column, out)
    got = words(out).reshape(4, 32, 32)
    w, lane, j = np.meshgrid(*(np.arange(n) for n in got.shape), indexing="ij")
    np.testing.assert_array_equal(got, ((32 * w + lane) << 16) | (column + j))


def swizzle_128b(rows: np.ndarray) -> np.ndarray:
    """A [R][128] byte matrix as TMA writes it with 128-byte swizzle: 16-byte chunk c of row r at chunk c ^ (r % 8)."""
    r, c = np.meshgrid(np.arange(rows.shape[0]), np.arange(8), indexing="ij")
    image = np.zeros_like(rows).reshape(-1, 8, 16)
    image[r, c ^ (r % 8)] = rows.reshape(-1, 8, 16)[r, c]
    return image.reshape(rows.shape)


def atom_scales(atom: np.ndarray) -> np.ndarray:
    """[128 rows][4] scales of a 512-byte atom: row r, block j at byte (r % 32) * 16 + (r // 32) * 4 + j."""
    r, j = np.meshgrid(np.arange(128), np.arange(4), indexing="ij")
    return e4m3_to_float(atom[(r % 32) * 16 + (r // 32) * 4 + j])


def finite_ue4m3(shape, gen) -> np.ndarray:
    """Random scale bytes of kind::mxf4nvf4's ue4m3 type: any finite code without the sign bit."""
    codes = gen.integers(0, 128, shape, dtype=np.uint8)
    return np.where(codes == 0x7F, 0x78, codes).astype(np.uint8)


@pytest.mark.parametrize("k_slice,accumulate", [(0, 0), (1, 1), (3, 1)])
def test_mma_mxf4nvf4_block16_runs_after_issue_and_matches_its_definition(probes, k_slice, accumulate):
    gen = np.random.default_rng(k_slice * 7 + accumulate)
    a, b = (gen.integers(0, 256, (128, 128), dtype=np.uint8) for _ in range(2))
    sfa, sfb = finite_ue4m3(512, gen), finite_ue4m3(512, gen)
    d_in = gen.standard_normal((128, 128)).astype(np.float32)
    before, out = (torch.full((128, 128), float("nan"), device="cuda") for _ in range(2))
    dev = lambda x: torch.from_numpy(np.ascontiguousarray(x)).cuda()  # noqa: E731
    call(probes.probe_mma, dev(swizzle_128b(a)), dev(swizzle_128b(b)), dev(sfa), dev(sfb), k_slice, accumulate, dev(d_in), before, out)
    np.testing.assert_array_equal(before.cpu().numpy(), d_in)  # issued, not yet run: nothing waited for its commit

    assert_mma_result(out.cpu().numpy(), operand(a, sfa, k_slice), operand(b, sfb, k_slice), d_in, accumulate)


def operand(codes: np.ndarray, atom: np.ndarray, k_slice: int) -> np.ndarray:
    """The 64 K elements of the slice (low nibble first) of each row, each times its block's scale (rows < 128)."""
    packed = codes[:, 32 * k_slice : 32 * k_slice + 32]
    values = np.stack((e2m1_to_float(packed & 0xF), e2m1_to_float(packed >> 4)), axis=-1).reshape(len(codes), 64)
    return values * np.repeat(atom_scales(atom)[: len(codes)], 16, axis=1)


def assert_mma_result(got: np.ndarray, a: np.ndarray, b: np.ndarray, d_in: np.ndarray, accumulate: int) -> None:
    expected = a @ b.T + (d_in if accumulate else 0.0)
    bound = 1e-6 * (np.abs(a) @ np.abs(b).T + np.abs(d_in))
    np.testing.assert_array_less(np.abs(got - expected), bound + 1e-30)


def test_commit_arrives_only_once_a_wait_runs_the_queue(probes):
    out = torch.full((3,), -1, dtype=torch.int32, device="cuda")
    call(probes.probe_commit, out)
    assert out.tolist() == [0, 0, 1]


# ----------------------------------------------------------------------------- each ordering rule, broken
DETECTORS = {
    0: "tcgen05.ld of TMEM columns a queued operation has not yet written",
    1: "tcgen05.ld of TMEM columns nothing has written since tcgen05.alloc",
    2: "a shared-memory source of a queued operation changed between its issue and its execution",
    3: "bulk copy into shared memory a pending operation still reads",
    4: "tcgen05.dealloc with operations pending",
    5: "a tcgen05.mma accumulates into columns nothing has written",
}


@pytest.mark.parametrize("rule", list(DETECTORS), ids=list(DETECTORS.values()))
def test_a_broken_ordering_rule_traps_with_the_detectors_message(rule):
    status, output = probe_in_fresh_process(
        f"probes.probe_detector({rule}, {{source}})", source="torch.zeros(1024, dtype=torch.uint8, device='cuda')"
    )
    assert DETECTORS[rule] in output and f"seed {LAZY_SEED})" in output, output[-3000:]
    assert "probe status 0" not in output


# ----------------------------------------------------------------------------- CTA pairs (.cta_group::2)
def test_pair_alloc_gives_both_ctas_the_same_columns(probes):
    out = torch.zeros(2, dtype=torch.int32, device="cuda")
    call(probes.probe_pair_alloc, torch.tensor([256, 256], dtype=torch.int32, device="cuda"), out)
    first, second = words(out)
    assert first == second and first >> 16 == 0 and (first & 0xFFFF) + 256 <= 512


def test_pair_alloc_of_different_column_counts_traps():
    status, output = probe_in_fresh_process(
        "probes.probe_pair_alloc({columns}, {out})",
        columns="torch.tensor([256, 128], dtype=torch.int32, device='cuda')",
        out="torch.zeros(2, dtype=torch.int32, device='cuda')",
    )
    assert "tcgen05.alloc.cta_group::2 with different column counts in the pair" in output, output[-3000:]


@pytest.mark.parametrize("column", [0, 260])
def test_pair_cp_puts_each_ctas_own_rows_in_its_own_tmem(probes, column):
    atoms = torch.randint(0, 256, (2, 512), dtype=torch.uint8, device="cuda")
    out = torch.zeros(2, 128 * 4, dtype=torch.int32, device="cuda")
    call(probes.probe_pair_cp, atoms, column, out)
    for v in range(2):
        rows = atoms[v].cpu().numpy().reshape(32, 16).view("<u4")
        np.testing.assert_array_equal(words(out[v]).reshape(128, 4), np.concatenate([rows] * 4))


def run_pair_mma(probes, k_slice: int, accumulate: int, swap: bool):
    """The pair probe on random full-range operands; (D of each CTA, barrier phases, A halves, B, SFA atoms, SFB atom, d_in)."""
    gen = np.random.default_rng(100 + k_slice)
    a = gen.integers(0, 256, (2, 128, 128), dtype=np.uint8)  # A rows 128v.. in CTA v
    b = gen.integers(0, 256, (2, 64, 128), dtype=np.uint8)  # B rows 64v.. in CTA v
    sfa, sfb = finite_ue4m3((2, 512), gen), finite_ue4m3(512, gen)
    d_in = gen.standard_normal((2, 128, 128)).astype(np.float32)
    dev = lambda x: torch.from_numpy(np.ascontiguousarray(x)).cuda()  # noqa: E731
    out = torch.full((2, 128, 128), float("nan"), device="cuda")
    phases = torch.full((2, 2), -1, dtype=torch.int32, device="cuda")
    images_a, images_b = np.stack([swizzle_128b(x) for x in a]), np.stack([swizzle_128b(x) for x in b])
    call(probes.probe_pair_mma, dev(images_a), dev(images_b), dev(sfa), dev(sfb), k_slice, accumulate, dev(d_in), int(swap), out, phases)
    return out.cpu().numpy(), phases.cpu().numpy(), a, np.concatenate(b), sfa, sfb, d_in


@pytest.mark.parametrize("k_slice,accumulate", [(0, 0), (2, 1)])
def test_pair_mma_with_multicast_commit_against_its_definition(probes, k_slice, accumulate):
    out, phases, a, b, sfa, sfb, d_in = run_pair_mma(probes, k_slice, accumulate, swap=False)
    assert phases.tolist() == [[0, 1], [0, 1]]  # pending until a wait ran it; then arrived in both CTAs
    for v in range(2):  # CTA v: D rows 128v.. = its A rows with its SFA, times all of B with SFB
        assert_mma_result(out[v], operand(a[v], sfa[v], k_slice), operand(b, sfb, k_slice), d_in[v], accumulate)


def test_pair_mma_with_the_halves_swapped_fails_the_comparison(probes):
    out, _, a, b, sfa, sfb, d_in = run_pair_mma(probes, 0, 0, swap=True)
    with pytest.raises(AssertionError):
        for v in range(2):
            assert_mma_result(out[v], operand(a[v], sfa[v], 0), operand(b, sfb, 0), d_in[v], 0)


# ----------------------------------------------------------------------------- the whole sm_100a kernel
def emulated_path(num_sms: int, overrides: dict | None = None) -> KernelPath:
    from tools.nvcc_build import load

    path = KernelPath(load(100, emulate_tcgen05=True, overrides=overrides), torch.device("cuda"))
    assert (path.arch, path.emulated) == (100, True)
    path.num_sms = num_sms
    return path


TILE_SHAPES = {"unswapped": TILES_UNSWAPPED, "swapped": TILES_SWAPPED, "pair": TILES_PAIR}


@pytest.fixture(
    scope="module", params=[(ctas, shape) for shape in TILE_SHAPES for ctas in ("single-tile", "persistent")], ids=lambda p: "-".join(p)
)
def path(request):
    """Every kernel: each tile shape, on as many CTAs as the GPU has SMs (these cases: one tile each)
    or on 2 (each CTA, or the one pair, walks several tiles)."""
    ctas, shape = request.param
    path = emulated_path(torch.cuda.get_device_properties(0).multi_processor_count if ctas == "single-tile" else 2)
    path.tiles = TILE_SHAPES[shape]
    return path


def run_poisoned(path, data, seed: int = LAZY_SEED):
    path.configure_emulation(seed)
    data = clone_data(data)
    for _, _, c in data[0]:
        c.fill_(float("nan"))
    path(*from_leaderboard(data), 3)
    torch.cuda.synchronize()
    return [c for _, _, c in data[0]], data


def check(path, data, seed: int):
    """Poisoned outputs against the exact product under the seed; and the kernel variant is the one the fixture names."""
    for ctas, tiles, persistent, fixed_n8, shape in launches(path, data):
        units = ctas // (2 if shape == TILES_PAIR else 1)
        assert persistent == (tiles > units) and (path.num_sms == 2 or not persistent) and fixed_n8 == 0 and shape == path.tiles
    out, data = run_poisoned(path, data, seed)
    assert_matches_exact(out, data)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("case", read_cases(str(ROOT / "task.yml"), "tests", None), ids=lambda c: c.spec)
def test_official_tests(path, case, seed):
    check(path, generate_input(**case.args), seed)


@pytest.mark.parametrize(
    "m,n,k",
    [
        ((96, 300), (128, 256), (256, 512)),  # full-range codes and scales
        ((1, 7, 13, 129), (128, 256, 136, 128), (256, 512, 256, 768)),  # M = 1, M and N not multiples of 8 / 128
        ((0, 64), (128, 256), (256, 256)),  # an empty group
        ((128,), (128,), (2048,)),  # more K blocks than stages: the ring wraps within a tile
    ],
)
@pytest.mark.parametrize("seed", SEEDS)
def test_full_range_small_and_odd_shapes(path, m, n, k, seed):
    check(path, generate_full_range_input(m, n, k, len(m), seed=sum(m) + 3), seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_sixty_four_groups(path, seed):
    g = 64
    m = tuple(8 * (i % 9) + 1 + i % 5 for i in range(g))
    check(path, generate_full_range_input(m, (128,) * g, (256,) * g, g, seed=64), seed)


# ----------------------------------------------------------------------------- it catches layout bugs
BROKEN_SHAPE = {"swapped": TILES_SWAPPED, "pair": TILES_PAIR}


@pytest.mark.parametrize("bug", list(BROKEN))
def test_a_deliberately_broken_layout_fails(bug):
    from tools.nvcc_build import replacing

    path = emulated_path(8, replacing(BROKEN[bug]))
    path.tiles = BROKEN_SHAPE.get(bug.split(":")[0], TILES_UNSWAPPED)
    data = generate_input((256, 64), (256, 128), (512, 256), 2, seed=3)
    out, data = run_poisoned(path, data)
    with pytest.raises(AssertionError, match="elements off"):
        assert_matches_exact(out, data)


# ----------------------------------------------------------------------------- it catches synchronization bugs
@pytest.mark.parametrize("bug", list(PLANTED))
def test_a_planted_synchronization_bug_traps_with_the_detectors_message(bug):
    edits, ctas, (m, n, k), message = PLANTED[bug]
    status, output = in_fresh_process(f"""
        import torch
        from nvfp4.kernel_path import KernelPath
        from nvfp4.layout import from_leaderboard
        from tools.nvcc_build import load, replacing
        from reference import generate_input
        path = KernelPath(load(100, emulate_tcgen05=True, overrides=replacing(*{edits!r})), torch.device("cuda"))
        path.num_sms = {ctas}
        path.configure_emulation({LAZY_SEED})
        path(*from_leaderboard(generate_input({m}, {n}, {k}, {len(m)}, seed=5)), 3)
        torch.cuda.synchronize()
        print("no trap")
    """)
    assert message in output and f"seed {LAZY_SEED})" in output, output[-3000:]
    assert status != 0 and "no trap" not in output


# ----------------------------------------------------------------------------- the first-use self-check
def test_the_self_check_passes_the_emulated_kernel_silently(capfd):
    path = emulated_path(8)
    assert self_checked(path, torch.device("cuda")) is path
    assert capfd.readouterr().err == ""


def test_the_self_check_runs_each_tile_shape_and_names_the_one_that_fails():
    from tools.nvcc_build import replacing

    path = emulated_path(8, replacing(BROKEN["swapped: the staging written untransposed"]))
    failure = self_check_failure(path, torch.device("cuda"))
    assert failure is not None and failure.startswith("swapped tiles: ") and path.tiles == TILES_CHOSEN


def test_a_planted_wrong_result_falls_back_with_one_warning_and_passes_the_harness(tmp_path):
    """eval.py test task.yml on a copy of submission.py whose sm_100a kernel reads the wrong scale columns."""
    import os
    import subprocess

    good, bad = BROKEN["scale columns of the next 32 rows"]
    text = (ROOT / "submission.py").read_text()
    assert text.count(good) == 1
    planted = tmp_path / "submission.py"
    planted.write_text(text.replace(good, bad))
    env = {**os.environ, EMULATION_ENV: "1"}
    proc = subprocess.run(
        [sys.executable, "eval.py", "test", "task.yml", "--submission", str(planted)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    warnings = [line for line in proc.stderr.splitlines() if "failed its first-use self-check" in line]
    assert len(warnings) == 1 and "elements off, the first at row" in warnings[0] and "Using portable_kernel" in warnings[0]
