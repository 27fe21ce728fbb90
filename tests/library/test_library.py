"""nvfp4 as a library: the op (torch.ops.nvfp4.grouped_gemm), its fake implementation,
torch.compile, and on a GPU the caller's queue, CUDA graph capture and threads, each with data that
changes behind the call so that a stale pointer, a wrong queue or a missed capture shows."""

import threading
from itertools import chain

import pytest
import torch

import nvfp4
from conftest import requires_cuda
from nvfp4 import launch_queue, launch_queue_default
from nvfp4.build import kernel_target
from nvfp4.layout import plain_scales
from nvfp4.self_check import exact_products, first_mismatch
from reference import generate_full_range_input

HAS_KERNEL = torch.cuda.is_available() and kernel_target(torch.cuda.get_device_capability()) is not None
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def operands(m, n, k, seed: int, device=DEVICE):
    """Per-group lists a [M, K/2], b [N, K/2], sfa, sfb (reordered) of full-range data."""
    data = generate_full_range_input(m, n, k, len(m), seed=seed, device=device)
    a = [x[..., 0] for x, _, _ in data[0]]
    b = [y[..., 0] for _, y, _ in data[0]]
    return a, b, [s for s, _ in data[2]], [s for _, s in data[2]]


def assert_exact(out, a, b, sfa, sfb):
    """Each [M, N] output against the float64 product, within the harness's tolerance plus what a
    correct fp32 accumulation may add where full-range terms cancel (nvfp4.self_check's bounds)."""
    assert [tuple(o.shape) for o in out] == [(x.shape[0], y.shape[0]) for x, y in zip(a, b)]
    assert all(o.dtype == torch.float16 for o in out)
    tensors = [*chain.from_iterable(zip(a, b, out)), *chain.from_iterable(zip(sfa, sfb))]
    sizes = [(x.shape[0], y.shape[0], 2 * x.shape[1], 1) for x, y in zip(a, b)]
    failure = first_mismatch([o.unsqueeze(-1) for o in out], exact_products(tensors, sizes))
    assert failure is None, failure


def rewrite(dst: list, src: list) -> None:
    for t, u in zip(dst, src):
        t.copy_(u)


CASE = ((64, 0, 130), (256, 128, 136), (512, 256, 256))


# ----------------------------------------------------------------------------- on any device
def test_the_op_is_exact_and_writes_into_a_given_out():
    a, b, sfa, sfb = operands(*CASE, seed=1)
    out = nvfp4.grouped_gemm(a, b, sfa, sfb)
    assert_exact(out, a, b, sfa, sfb)
    given = [torch.full_like(o, float("nan")) for o in out]
    assert nvfp4.grouped_gemm(a, b, sfa, sfb, out=given) is given
    assert_exact(given, a, b, sfa, sfb)


def test_the_op_is_registered_with_torch_library():
    a, b, sfa, sfb = operands(*CASE, seed=2)
    assert_exact(torch.ops.nvfp4.grouped_gemm(a, b, sfa, sfb), a, b, sfa, sfb)
    out = [torch.empty(x.shape[0], y.shape[0], dtype=torch.float16, device=x.device) for x, y in zip(a, b)]
    torch.ops.nvfp4.grouped_gemm_out(a, b, sfa, sfb, out)
    assert_exact(out, a, b, sfa, sfb)


def test_the_fake_implementation_gives_shapes_and_dtypes():
    """Under FakeTensorMode, through torch.ops and through nvfp4.grouped_gemm alike."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        a = [torch.empty(m, 128, dtype=torch.uint8) for m in (5, 0, 300)]
        b = [torch.empty(n, 128, dtype=torch.uint8) for n in (64, 128, 8)]
        sfa = [torch.empty(32, 4, -(-m // 128), 4, 4, 1, dtype=torch.float8_e4m3fn) for m in (5, 0, 300)]
        sfb = [torch.empty(32, 4, -(-n // 128), 4, 4, 1, dtype=torch.float8_e4m3fn) for n in (64, 128, 8)]
        for out in (torch.ops.nvfp4.grouped_gemm(a, b, sfa, sfb), nvfp4.grouped_gemm(a, b, sfa, sfb)):
            assert [tuple(o.shape) for o in out] == [(5, 64), (0, 128), (300, 8)]
            assert all(o.dtype == torch.float16 and mode.is_our_fake(o) for o in out)
        torch.ops.nvfp4.grouped_gemm_out(a, b, sfa, sfb, out)  # the fake mutates nothing and returns nothing
        assert nvfp4.grouped_gemm(a, b, sfa, sfb, out=out) is out


def test_the_fake_implementation_agrees_with_the_real_one():
    """torch.library.opcheck's fake-tensor test: the fake's outputs match the real op's in shape,
    dtype, strides and device (its schema test needs operations FP8 lacks on the CPU)."""
    a, b, sfa, sfb = operands(*CASE, seed=3)
    a, b = [x.view(torch.uint8) for x in a], [y.view(torch.uint8) for y in b]  # opcheck copies its inputs: no copy_ for FP4
    torch.library.opcheck(torch.ops.nvfp4.grouped_gemm.default, (a, b, sfa, sfb), test_utils=("test_faketensor",))


def compiled_twice(device):
    def layer(a, b, sfa, sfb, b2, sfb2):
        hidden = nvfp4.grouped_gemm(a, b, sfa, sfb)
        return [h * 2 for h in hidden], nvfp4.grouped_gemm(a, b2, sfa, sfb2)

    a, b, sfa, sfb = operands((32, 96), (128, 256), (256, 512), seed=4, device=device)
    _, b2, _, sfb2 = operands((32, 96), (64, 128), (256, 512), seed=5, device=device)
    explained = torch._dynamo.explain(layer)(a, b, sfa, sfb, b2, sfb2)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    compiled = torch.compile(layer, fullgraph=True)
    for seed in (6, 7):  # new values in the same tensors: the compiled function reads them
        rewrite(a + b + sfa + sfb, sum(operands((32, 96), (128, 256), (256, 512), seed=seed, device=device), []))
        doubled, second = compiled(a, b, sfa, sfb, b2, sfb2)
        assert_exact([d / 2 for d in doubled], a, b, sfa, sfb)
        assert_exact(second, a, b2, sfa, sfb2)


def test_torch_compile_traces_the_op_with_no_graph_break():
    compiled_twice(DEVICE)


@pytest.mark.parametrize(
    "what,message",
    [
        (lambda a, b, sfa, sfb: (a, b[:1], sfa, sfb), "need one tensor per group"),
        (lambda a, b, sfa, sfb: ([a[0].unsqueeze(-1)] + a[1:], b, sfa, sfb), "a and b must be 2-D tensors"),
        (lambda a, b, sfa, sfb: (a, [b[0][:, :64]] + b[1:], sfa, sfb), "group 0: b has shape"),
        (lambda a, b, sfa, sfb: (a, b, [sfa[0].view(torch.uint8)] + sfa[1:], sfb), "group 0: sfa has dtype torch.uint8"),
        (lambda a, b, sfa, sfb: (a[0], b, sfa, sfb), "a must be a list with one tensor per group, got Tensor"),
        (lambda a, b, sfa, sfb: (a, None, sfa, sfb), "b must be a list with one tensor per group, got NoneType"),
        (lambda a, b, sfa, sfb: (a, b, None, sfb), "sfa must be a list with one tensor per group, got NoneType"),
        (lambda a, b, sfa, sfb: ([None] + a[1:], b, sfa, sfb), "group 0: a and b must be 2-D tensors"),
        (lambda a, b, sfa, sfb: ([x.cpu().view(torch.uint8).numpy() for x in a], b, sfa, sfb), "group 0: a and b must be 2-D tensors"),
    ],
)
def test_bad_input_raises_a_clear_error(what, message):
    with pytest.raises(ValueError, match=message):
        nvfp4.grouped_gemm(*what(*operands(*CASE, seed=8)))


def test_out_that_is_one_tensor_is_refused_as_not_a_list():
    a, b, sfa, sfb = operands(*CASE, seed=8)
    with pytest.raises(ValueError, match="out must be a list with one tensor per group, got Tensor"):
        nvfp4.grouped_gemm(a, b, sfa, sfb, out=torch.empty(4, 4))
    with pytest.raises(ValueError, match="out must be a list with one tensor per group, got Tensor"):  # also beside a flawed group
        nvfp4.grouped_gemm([None, *a[1:]], b, sfa, sfb, out=torch.empty(4, 4))


def test_reorder_scales_refuses_k_that_is_not_a_multiple_of_64():
    with pytest.raises(ValueError, match=r"K/16 a multiple of 4\), got torch.float8_e4m3fn \(5, 6\)"):
        nvfp4.reorder_scales(torch.zeros(5, 6).to(torch.float8_e4m3fn))


def test_reorder_scales_refuses_scales_that_are_not_one_byte_each():
    with pytest.raises(ValueError, match=r"must be E4M3 .* got torch.float32 \(5, 8\)"):
        nvfp4.reorder_scales(torch.ones(5, 8))


def test_reorder_scales_makes_the_leaderboards_layout():
    plain = torch.rand(200, 32).mul(8).to(torch.float8_e4m3fn)
    reordered = nvfp4.reorder_scales(plain)
    assert reordered.shape == (32, 4, 2, 4, 8, 1) and reordered.stride()[:5] == (16, 4, 4096, 1, 512)
    assert torch.equal(plain_scales(reordered, 200, 512), plain.float())


def test_the_default_queue_module_stands_in_for_the_library_one():
    """tools/bundle.py writes launch_queue_default where launch_queue stands: the same functions."""
    public = {name for name in vars(launch_queue) if not name.startswith("_") and callable(getattr(launch_queue, name))} - {"torch"}
    assert public == {"current_queue", "capturing"}
    assert all(callable(getattr(launch_queue_default, name)) for name in public)
    assert launch_queue_default.current_queue(0) == 0 and launch_queue_default.capturing() is False


# ----------------------------------------------------------------------------- on a GPU with a kernel
needs_kernel = pytest.mark.skipif(not HAS_KERNEL, reason="needs a GPU with a CUDA kernel path (sm_90)")
BENCH = ((40, 76, 168, 0), (7168, 7168, 7168, 7168), (2048, 2048, 2048, 2048))  # case 1's N and K, an empty expert


@pytest.fixture(params=["native", "emulated sm_100a"])
def kernel(request):
    """(m, n, k, calls a thread makes): the device's own kernel; and the sm_100a kernel under the
    tcgen05 emulation, put in its place (on an sm_90 GPU with nvcc), at sizes it runs in seconds."""
    device = torch.device("cuda", torch.cuda.current_device())
    if request.param == "native":
        nvfp4.prepare(device)
        yield (*BENCH, 50)
        return
    import shutil

    from nvfp4 import dispatch
    from nvfp4.kernel_path import KernelPath

    if shutil.which("nvcc") is None or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("needs nvcc and an sm_90 GPU")

    from tools.nvcc_build import load

    with dispatch.use_path(device, KernelPath(load(100, emulate_tcgen05=True), device)):
        yield (40, 0, 130), (256, 128, 128), (256, 256, 512), 0  # no threads: the emulation models one kernel at a time


def poisoned_out(a, b):
    return [torch.full((x.shape[0], y.shape[0]), float("nan"), dtype=torch.float16, device=x.device) for x, y in zip(a, b)]


@requires_cuda
@needs_kernel
@pytest.mark.parametrize("calls", [1, 3], ids=["first sight", "graph replay"])
def test_the_op_runs_on_the_callers_queue_behind_its_work(kernel, calls):
    """Inputs rewritten on a side queue behind ~50 ms of GPU work, the op called under that queue,
    only that queue synchronized: exact (a launch on any other queue would read the old values or
    leave NaN)."""
    m, n, k, _ = kernel
    a, b, sfa, sfb = operands(m, n, k, seed=11)
    out = poisoned_out(a, b)
    fresh = operands(m, n, k, seed=12)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for _ in range(calls - 1):  # first sight on this queue, then the plan's graph
            nvfp4.grouped_gemm(a, b, sfa, sfb, out=out)
        side.synchronize()
        torch.cuda._sleep(1 << 26)  # 30 ms or more of GPU work before the rewrite
        rewrite(a + b + sfa + sfb, sum(fresh, []))
        for o in out:
            o.fill_(float("nan"))
        nvfp4.grouped_gemm(a, b, sfa, sfb, out=out)
    side.synchronize()
    assert_exact(out, *fresh)


@requires_cuda
@needs_kernel
def test_a_captured_graph_computes_from_the_values_at_each_replay(kernel):
    m, n, k, _ = kernel
    a, b, sfa, sfb = operands(m, n, k, seed=13)
    out = poisoned_out(a, b)
    nvfp4.grouped_gemm(a, b, sfa, sfb, out=out)  # warm, as torch.cuda.graph's users do
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        made = nvfp4.grouped_gemm(a, b, sfa, sfb)
        nvfp4.grouped_gemm(a, b, sfa, sfb, out=out)
    for seed in (14, 15, 16):
        fresh = operands(m, n, k, seed=seed)
        rewrite(a + b + sfa + sfb, sum(fresh, []))
        for o in out + made:
            o.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_exact(out, *fresh)
        assert_exact(made, *fresh)


@requires_cuda
@needs_kernel
def test_torch_compile_on_the_gpu(kernel):
    compiled_twice(torch.device("cuda"))


@requires_cuda
@needs_kernel
def test_two_threads_each_on_its_own_queue(kernel):
    m, n, k, calls = kernel
    if not calls:
        pytest.skip("needs the native kernel (the tcgen05 emulation models one kernel at a time)")
    failures = []

    def worker(seed: int) -> None:
        try:
            queue = torch.cuda.Stream()
            with torch.cuda.stream(queue):
                a, b, sfa, sfb = operands(m, n, k, seed=seed)
                out = poisoned_out(a, b)
                for i in range(calls):
                    fresh = operands(m, n, k, seed=seed + 1 + i % 3) if i % 10 == 9 else None
                    if fresh:
                        rewrite(a + b + sfa + sfb, sum(fresh, []))
                    nvfp4.grouped_gemm(a, b, sfa, sfb, out=out)
                queue.synchronize()
                assert_exact(out, a, b, sfa, sfb)
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            failures.append(e)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in (100, 200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures


@requires_cuda
def test_a_tensor_on_another_device_than_the_current_one_raises():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs")
    a, b, sfa, sfb = operands(*CASE, seed=17, device=torch.device("cuda", 1))
    with pytest.raises(ValueError, match="the current device is cuda:0"):
        nvfp4.grouped_gemm(a, b, sfa, sfb)


@requires_cuda
@needs_kernel
def test_a_first_use_inside_a_capture_says_to_prepare_first():
    """The kernel is built, loaded (and, for sm_100a, self-checked) on first use, which must happen
    outside a capture: in a fresh process, the first call inside one raises a clear error, and after
    nvfp4.prepare() the same capture works."""
    import subprocess
    import sys
    import textwrap

    from conftest import ROOT, child_env

    code = textwrap.dedent("""
        import torch, nvfp4
        from test_library import CASE, operands, assert_exact
        a, b, sfa, sfb = operands(*CASE, seed=21)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                nvfp4.grouped_gemm(a, b, sfa, sfb)
        except RuntimeError as e:
            print("refused:", e)
        nvfp4.prepare()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = nvfp4.grouped_gemm(a, b, sfa, sfb)
        graph.replay()
        torch.cuda.synchronize()
        assert_exact(out, a, b, sfa, sfb)
        print("captured after prepare: exact")
    """)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=child_env("tests/library"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "refused: nvfp4 grouped gemm: the sm_" in proc.stdout and "call nvfp4.prepare() (or the op once) before capturing" in proc.stdout
    assert "captured after prepare: exact" in proc.stdout


def test_tensors_on_another_device_than_the_current_one_are_an_error_not_a_fallback():
    """The kernels run on the current device: the check behind the raise above, on any machine."""
    from nvfp4.kernel_path import kernel_unsupported
    from nvfp4.layout import from_leaderboard

    tensors, sizes = from_leaderboard(generate_full_range_input((64,), (128,), (256,), 1, seed=18, device="cpu"))
    assert kernel_unsupported(tensors, sizes, 64, -1) is None  # CPU tensors, "current device" -1: takes them
    with pytest.raises(ValueError, match="the tensors are on cpu, the current device is cuda:0; make theirs current"):
        kernel_unsupported(tensors, sizes, 64, 0)
