"""The sm_100a kernel on an sm_90 GPU with its tcgen05 instructions emulated (NVFP4_TCGEN05_EMULATION).

Two layers: each emulated instruction alone against a direct computation of its PTX ISA
definition (probe kernels in tests/cuda/tcgen05_probes.cu), then the whole B200 kernel, both of
its variants, against the reference, including builds with a deliberately broken descriptor or
scale column to show that the emulation catches that class of bug. Needs nvcc and an sm_90 GPU.
"""
import ctypes
import shutil
import sys

import numpy as np
import pytest
import torch

import submission
from conftest import ROOT
from numpy_reference import assert_matches_exact, e2m1_to_float, e4m3_to_float
from plan_launches import launches
from reference import generate_full_range_input, generate_input
from harness.runners import clone_data
from harness.spec import read_cases

sys.path.insert(0, str(ROOT / "tools"))
ON_SM90 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
pytestmark = pytest.mark.skipif(not (ON_SM90 and shutil.which("nvcc")), reason="needs nvcc and an sm_90 GPU")


@pytest.fixture(scope="module")
def probes():
    from nvcc_build import build_probes

    return build_probes(ROOT / "tests" / "cuda" / "tcgen05_probes.cu")


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
    expected = np.concatenate([rows] * 4)                   # lanes r, r + 32, r + 64, r + 96
    np.testing.assert_array_equal(words(out).reshape(128, 4), expected)


@pytest.mark.parametrize("column", [0, 200, 384])
def test_ld_16x256b_x16_fragment_layout(probes, column):
    out = torch.zeros(4 * 2 * 32 * 64, dtype=torch.int32, device="cuda")
    call(probes.probe_ld, column, out)
    got = words(out).reshape(4, 2, 32, 16, 4)
    w, h, lane, j, i = np.meshgrid(*(np.arange(n) for n in got.shape), indexing="ij")
    tmem_lane = 32 * w + 16 * h + lane // 4 + 8 * (i // 2)
    tmem_column = column + 8 * j + 2 * (lane % 4) + i % 2
    np.testing.assert_array_equal(got, (tmem_lane << 16) | tmem_column)


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


def finite_e4m3(shape, gen) -> np.ndarray:
    codes = gen.integers(0, 256, shape, dtype=np.uint8)
    return np.where((codes & 0x7F) == 0x7F, codes & 0xF8, codes).astype(np.uint8)


@pytest.mark.parametrize("k_slice,accumulate", [(0, 0), (1, 1), (3, 1)])
def test_mma_mxf4nvf4_block16_against_its_definition(probes, k_slice, accumulate):
    gen = np.random.default_rng(k_slice * 7 + accumulate)
    a, b = (gen.integers(0, 256, (128, 128), dtype=np.uint8) for _ in range(2))
    sfa, sfb = finite_e4m3(512, gen), finite_e4m3(512, gen)
    d_in = gen.standard_normal((128, 128)).astype(np.float32)
    out = torch.full((128, 128), float("nan"), device="cuda")
    dev = lambda x: torch.from_numpy(np.ascontiguousarray(x)).cuda()  # noqa: E731
    call(probes.probe_mma, dev(swizzle_128b(a)), dev(swizzle_128b(b)), dev(sfa), dev(sfb), k_slice, accumulate, dev(d_in), out)

    def operand(codes, atom):  # the 64 K elements of the slice (low nibble first), each times its block's scale
        packed = codes[:, 32 * k_slice: 32 * k_slice + 32]
        values = np.stack((e2m1_to_float(packed & 0xF), e2m1_to_float(packed >> 4)), axis=-1).reshape(128, 64)
        return values * np.repeat(atom_scales(atom), 16, axis=1)

    products = operand(a, sfa) @ operand(b, sfb).T
    expected = products + (d_in if accumulate else 0.0)
    bound = 1e-6 * (np.abs(operand(a, sfa)) @ np.abs(operand(b, sfb)).T + np.abs(d_in))
    np.testing.assert_array_less(np.abs(out.cpu().numpy() - expected), bound + 1e-30)


def test_commit_arrives_on_the_mbarrier(probes):
    out = torch.full((2,), -1, dtype=torch.int32, device="cuda")
    call(probes.probe_commit, out)
    assert out.tolist() == [0, 1]


# ----------------------------------------------------------------------------- the whole sm_100a kernel
def emulated_path(num_sms: int, overrides: dict | None = None) -> submission.KernelPath:
    from nvcc_build import load

    path = submission.KernelPath(load(100, emulate_tcgen05=True, overrides=overrides), torch.device("cuda"))
    assert (path.arch, path.emulated) == (100, True)
    path.num_sms = num_sms
    return path


@pytest.fixture(scope="module", params=["single-tile", "persistent"])
def path(request):
    """As many CTAs as the GPU has SMs (these cases: one tile each), or 2 (each CTA walks several tiles)."""
    return emulated_path(torch.cuda.get_device_properties(0).multi_processor_count if request.param == "single-tile" else 2)


def run_poisoned(path, data):
    data = clone_data(data)
    for _, _, c in data[0]:
        c.fill_(float("nan"))
    out = path(data)
    torch.cuda.synchronize()
    return out, data


def check(path, data):
    """Poisoned outputs against the exact product; and the kernel variant is the one the fixture names."""
    for ctas, tiles, persistent, fixed_n8 in launches(path, data):
        assert persistent == (tiles > ctas) and (path.num_sms == 2 or not persistent) and fixed_n8 == 0
    out, data = run_poisoned(path, data)
    assert_matches_exact(out, data)


@pytest.mark.parametrize("case", read_cases(str(ROOT / "task.yml"), "tests", None), ids=lambda c: c.spec)
def test_official_tests(path, case):
    check(path, generate_input(**case.args))


@pytest.mark.parametrize("m,n,k", [
    ((96, 300), (128, 256), (256, 512)),       # full-range codes and scales
    ((1, 7, 13, 129), (128, 256, 136, 128), (256, 512, 256, 768)),   # M = 1, M and N not multiples of 8 / 128
    ((0, 64), (128, 256), (256, 256)),         # an empty group
])
def test_full_range_small_and_odd_shapes(path, m, n, k):
    check(path, generate_full_range_input(m, n, k, len(m), seed=sum(m) + 3))


def test_sixty_four_groups(path):
    g = 64
    m = tuple(8 * (i % 9) + 1 + i % 5 for i in range(g))
    check(path, generate_full_range_input(m, (128,) * g, (256,) * g, g, seed=64))


# ----------------------------------------------------------------------------- it catches layout bugs
BROKEN = {
    "A/B descriptors without the 128-byte swizzle": ("| 1ull << 46 | 2ull << 61;", "| 1ull << 46 | 0ull << 61;"),
    "scale columns of the next 32 rows": ("tmem + Tmem::kSfa + k_sf * 4 + scale_a_offset", "tmem + Tmem::kSfa + k_sf * 4 + scale_a_offset + 1"),
}


@pytest.mark.parametrize("bug", list(BROKEN))
def test_a_deliberately_broken_layout_fails(bug):
    from nvcc_build import replacing

    path = emulated_path(8, replacing(*BROKEN[bug]))
    data = generate_input((128, 64), (256, 128), (512, 256), 2, seed=3)
    out, data = run_poisoned(path, data)
    with pytest.raises(AssertionError, match="elements off"):
        assert_matches_exact(out, data)


# ----------------------------------------------------------------------------- the first-use self-check
def test_the_self_check_passes_the_emulated_kernel_silently(capfd):
    path = emulated_path(8)
    assert submission.self_checked(path, torch.device("cuda")) is path
    assert capfd.readouterr().err == ""


def test_a_planted_wrong_result_falls_back_with_one_warning_and_passes_the_harness(tmp_path):
    """eval.py test task.yml on a copy of submission.py whose sm_100a kernel reads the wrong scale columns."""
    import os
    import subprocess

    good, bad = BROKEN["scale columns of the next 32 rows"]
    text = (ROOT / "submission.py").read_text()
    assert text.count(good) == 1
    planted = tmp_path / "submission.py"
    planted.write_text(text.replace(good, bad))
    env = {**os.environ, submission.EMULATION_ENV: "1"}
    proc = subprocess.run([sys.executable, "eval.py", "test", "task.yml", "--submission", str(planted)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    warnings = [line for line in proc.stderr.splitlines() if "failed its first-use self-check" in line]
    assert len(warnings) == 1 and "elements off, the first at row" in warnings[0] and "Using portable_kernel" in warnings[0]
