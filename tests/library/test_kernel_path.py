"""The CUDA kernel path on the GPU at hand (skipped without a kernel for it): the package's, and
submission.py's on the default queue."""

import pytest
import torch
from numpy_reference import assert_matches_exact
from plan_launches import launches

import nvfp4
import submission
from conftest import ROOT, requires_cuda
from harness.runners import clone_data
from harness.spec import read_cases
from nvfp4.build import kernel_target
from nvfp4.dispatch import select_path
from nvfp4.kernel_path import TILES_FEW_ROWS, KernelPath
from nvfp4.layout import from_leaderboard
from reference import generate_full_range_input, generate_input

HAS_KERNEL = torch.cuda.is_available() and kernel_target(torch.cuda.get_device_capability()) is not None
pytestmark = [requires_cuda, pytest.mark.skipif(not HAS_KERNEL, reason="needs a GPU with a CUDA kernel path (sm_90)")]


@pytest.fixture(scope="module")
def path():
    p = select_path(torch.device("cuda", torch.cuda.current_device()))
    assert isinstance(p, KernelPath)
    assert p.arch == kernel_target(torch.cuda.get_device_capability())[0]  # sm_90 never takes sm_100a
    return p


def run(path, data):
    """The path on the leaderboard's data; the outputs."""
    path(*from_leaderboard(data), 3)
    return [c for _, _, c in data[0]]


def poisoned(data):
    data = clone_data(data)
    for _, _, c in data[0]:
        c.fill_(float("nan"))
    return data


def check(path, data, calls=1):
    """Run the kernel `calls` times (first sight, graph build, replays) on poisoned outputs."""
    for _ in range(calls):
        out = run(path, poisoned(data))
        torch.cuda.synchronize()
        assert_matches_exact(out, data)


@pytest.mark.parametrize("case", read_cases(str(ROOT / "task.yml"), "tests", None), ids=lambda c: c.spec)
def test_official_tests(path, case):
    check(path, generate_input(**case.args))


@pytest.mark.parametrize(
    "m,n,k",
    [
        ((96, 128), (128, 256), (256, 512)),
        ((512, 384, 200), (256, 384, 1024), (768, 256, 512)),
        ((1, 7, 13, 300), (128, 256, 136, 128), (256, 512, 320, 1024)),  # M = 1, M and N not multiples of 8/128
        ((0, 64, 0), (128, 256, 128), (256, 256, 256)),  # empty groups
    ],
)
def test_full_range_codes_and_scales(path, m, n, k):
    check(path, generate_full_range_input(m, n, k, len(m), seed=sum(m) + 3), calls=3)


def test_sixty_four_groups(path):
    g = 64
    m = tuple(8 * (i % 9) + 1 + i % 5 for i in range(g))
    data = generate_full_range_input(m, (256,) * g, (512,) * g, g, seed=64)
    check(path, data, calls=3)


def test_more_groups_than_one_launch_holds(path):
    g = 70
    data = generate_input((16,) * g, (128,) * g, (256,) * g, g, seed=70)
    check(path, data, calls=2)


def test_an_empty_group_in_any_layout_keeps_the_kernel_path(path):
    """An expert with no tokens: its scale tensor's strides are not the packed ones, and nothing falls back."""
    import warnings

    data = generate_full_range_input((0, 64, 200), (128, 256, 128), (256, 256, 512), 3, seed=31)
    sfa, sfb = data[2][0]
    data[2][0] = (sfa.clone(memory_format=torch.contiguous_format), sfb)
    assert data[2][0][0].stride() != data[2][1][0].stride()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the portable fallback warns
        check(path, data, calls=3)


def test_sizes_given_as_lists_take_the_kernel_path(path):
    data = generate_full_range_input((64, 200), (256, 128), (512, 256), 2, seed=32)
    check(path, (data[0], data[1], data[2], [list(size) for size in data[3]]), calls=3)


def test_benchmark_shapes(path):
    spec = read_cases(str(ROOT / "task.yml"), "benchmarks", None)[1].args
    data = generate_full_range_input(**{**spec, "seed": 5})
    assert [launch.fixed_n8 for launch in launches(path, data)] == [0]  # tiles of 40 to 196 rows: N chosen per tile
    check(path, data, calls=2)


@pytest.mark.skipif(not HAS_KERNEL or torch.cuda.get_device_capability()[0] != 9, reason="needs an sm_90 GPU (sm_90a kernels)")
@pytest.mark.parametrize(
    "m,n,k,fixed_n8",
    [
        ((1, 17, 0, 129), (1024, 512, 256, 768), (512, 512, 256, 512), 2),  # tiles of 1 to 16 rows issued with N = 16
        ((192, 320), (3072, 3072), (512, 1024), 14),  # A chunks of 96 and 112 rows
        ((256, 256), (128 * 80, 128 * 80), (256, 256), 32),  # several waves, every tile 256 rows
    ],
)
def test_kernel_built_for_one_wgmma_n_writes_only_its_tiles_rows(path, m, n, k, fixed_n8):
    """Columns past a tile's rows (the next chunk's A rows, or zeros past the group's) are computed and never stored."""
    data = generate_full_range_input(m, n, k, len(m), seed=sum(m) + fixed_n8)
    assert {launch.fixed_n8 for launch in launches(path, data)} == {fixed_n8}
    check(path, data, calls=3)


@pytest.fixture(scope="module")
def few_rows_path(path):
    """sm_90a's tile shape 1 (256 B rows by at most 64 A rows a tile, 11 stages), asked for on every
    problem: wider groups are cut into chunks of 64 rows."""
    if path.arch != 90:
        pytest.skip("tile shape 1 is sm_90a's few-rows pipeline")
    p = KernelPath(path.lib, torch.device("cuda", torch.cuda.current_device()))
    p.tiles = TILES_FEW_ROWS
    return p


@pytest.mark.parametrize("case", read_cases(str(ROOT / "task.yml"), "tests", None), ids=lambda c: c.spec)
def test_the_few_rows_pipeline_on_the_official_tests(few_rows_path, case):
    data = generate_input(**case.args)
    assert {launch.shape for launch in launches(few_rows_path, data)} == {TILES_FEW_ROWS}
    check(few_rows_path, data)


@pytest.mark.parametrize(
    "m,n,k",
    [
        ((1, 7, 13, 300), (128, 256, 136, 128), (256, 512, 320, 1024)),  # M = 1, odd M and N, a group of five chunks; tiles of one half
        ((8, 0, 64, 33, 16, 2, 40, 64), (4096,) * 8, (2048,) * 8),  # decode-like: many tiles, 11 stages wrap
        ((5, 17), (384, 640), (512, 256)),  # a tile whose second half has no rows of B
        ((24,), (128,), (7168,)),  # one tile, 112 K blocks
    ],
)
def test_the_few_rows_pipeline_on_full_range_data(few_rows_path, m, n, k):
    check(few_rows_path, generate_full_range_input(m, n, k, len(m), seed=sum(m) + 11), calls=3)


def views_at(buffers, m, n, k):
    """Group tensors of the given sizes laid over fixed buffers: same addresses, other shapes."""
    data = generate_full_range_input(m, n, k, len(m), seed=sum(m) + sum(n))
    abc, _, sfr, _ = data
    for g, (a_buf, b_buf, c_buf, sfa_buf, sfb_buf) in enumerate(buffers):
        (a, b, c), (sfa, sfb) = abc[g], sfr[g]
        views = []
        for src, buf in ((a, a_buf), (b, b_buf), (c, c_buf), (sfa, sfa_buf), (sfb, sfb_buf)):
            flat = buf[: src.numel() * src.element_size()].view(src.dtype)
            view = torch.as_strided(flat, src.shape, src.stride())
            view.copy_(src)
            views.append(view)
        abc[g], sfr[g] = tuple(views[:3]), tuple(views[3:])
    return data


def rerun(path, inputs):
    """One more call on the same objects, into NaN-poisoned outputs, checked against their current values."""
    for _, _, c in inputs[0]:
        c.fill_(float("nan"))
    out = run(path, inputs)
    torch.cuda.synchronize()
    assert_matches_exact(out, inputs)


def test_same_addresses_with_new_shapes_never_replay_a_stale_graph(path):
    buffers = [tuple(torch.empty(1 << 20, dtype=torch.uint8, device="cuda") for _ in range(5)) for _ in range(2)]
    first = views_at(buffers, (64, 128), (256, 128), (512, 256))
    check(path, first, calls=1)
    run(path, first)  # second call: graph built
    run(path, first)  # third call: graph replayed
    torch.cuda.synchronize()
    for shapes in [((64, 128), (256, 128), (256, 512)), ((128, 64), (128, 256), (512, 256)), ((64, 120), (256, 128), (512, 256))]:
        data = views_at(buffers, *shapes)
        assert data[0][0][0].data_ptr() == first[0][0][0].data_ptr()
        for _ in range(3):
            rerun(path, data)


def test_inputs_cloned_for_every_call_reuse_addresses_and_ids_safely(path):
    """The leaderboard may clone the inputs per call: each clone dies after its call, and the next
    one often lands at the same addresses with the same object ids (a dead plan's key). Every
    clone holds other values, so a result kept from an earlier call would show."""
    for seed in range(11, 17):
        check(path, generate_full_range_input((64, 200), (256, 128), (512, 256), 2, seed=seed), calls=1)


def test_a_new_b_with_the_same_a_and_c_objects_is_read(path):
    inputs = poisoned(generate_full_range_input((64, 64), (128, 128), (256, 256), 2, seed=8))
    for _ in range(3):  # first sight, graph build, replay
        rerun(path, inputs)
    new_b = generate_full_range_input((64, 64), (128, 128), (256, 256), 2, seed=9)[0][0][1]
    assert not torch.equal(new_b.view(torch.uint8), inputs[0][0][1].view(torch.uint8))
    inputs[0][0] = (inputs[0][0][0], new_b, inputs[0][0][2])  # same A and C objects, another B
    for _ in range(3):
        rerun(path, inputs)


def test_a_replay_reads_the_current_values_of_its_tensors(path):
    inputs = poisoned(generate_full_range_input((64, 200), (256, 128), (512, 256), 2, seed=18))
    for _ in range(3):
        rerun(path, inputs)
    other = generate_full_range_input((64, 200), (256, 128), (512, 256), 2, seed=19)
    for mine, theirs in zip(inputs[0] + inputs[1] + inputs[2], other[0] + other[1] + other[2]):  # new values, in place
        for t, u in zip(mine, theirs):
            t.copy_(u)
    rerun(path, inputs)


def plans_of(path, sets):
    """The cached plans made for these input sets (a plan's key holds its tensors' ids)."""
    ids = {id(d[0][0][0]) for d in sets}
    return [p for p in path._plans.values() if ids.intersection(p.key)]


def test_input_sets_alive_side_by_side_share_one_workspace(path):
    """The harness keeps its 15 input sets alive: their plans need one workspace, not one each."""
    sets = [poisoned(generate_full_range_input((64, 200), (256, 128), (512, 256), 2, seed=s)) for s in range(20, 24)]
    for _ in range(3):  # first sight, graph build, replay; each set has its own values
        for d in sets:
            for _, _, c in d[0]:
                c.fill_(float("nan"))
        outs = [run(path, d) for d in sets]
        torch.cuda.synchronize()
        for out, d in zip(outs, sets):
            assert_matches_exact(out, d)
    plans = plans_of(path, sets)
    assert len(plans) == 4 and len({p.workspace.data_ptr() for p in plans}) == 1


def test_the_workspace_outlives_its_plans_and_grows_when_needed(path):
    """Never handed back to torch's allocator, which could give it to other work while a graph that
    bakes it in may still run."""
    check(path, generate_input((64,), (128,), (256,), 1, seed=21))
    queue = torch.cuda.current_stream().cuda_stream
    workspace = path._workspaces[queue]
    for key in list(path._plans):
        path._release(key)
    assert path._workspaces[queue] is workspace
    needed = 300 * 4096 * 2 + 256 * 2048 * 2  # fp16 A rows of both groups
    check(path, generate_full_range_input((300, 256), (256, 128), (4096, 2048), 2, seed=22), calls=3)
    assert path._workspaces[queue].numel() >= needed
    assert (path._workspaces[queue] is workspace) == (workspace.numel() >= needed)
    assert path._workspaces[queue] is workspace or any(w is workspace for w in path._retired)


@pytest.mark.parametrize("calls", [1, 3], ids=["first sight", "graph replay"])
def test_submission_py_works_on_the_default_queue_whatever_the_current_one(calls):
    """submission.py's form: under another current stream that is busy, its kernels still run on the
    default stream at once: waiting for the default stream alone finds every output written."""
    submission.prepare()  # built and loaded before the side stream's work starts its clock
    data = generate_full_range_input((64, 200), (256, 128), (512, 256), 2, seed=15)
    inputs = poisoned(data)
    for _ in range(calls - 1):  # first sight, then the graph's build
        submission.custom_kernel(inputs)
    for _, _, c in inputs[0]:
        c.fill_(float("nan"))
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(1 << 31)  # about a second of work queued on the side stream
        out = submission.custom_kernel(inputs)
    torch.cuda.default_stream().synchronize()
    assert side.query() is False  # the side stream is still busy: the outputs did not wait for it
    assert_matches_exact(out, data)
    side.synchronize()


def test_the_plan_cache_stays_bounded(path):
    before = path.capacity
    path.capacity = 4
    try:
        for seed in range(7):
            check(path, generate_input((8,), (128,), (256,), 1, seed=seed), calls=2)
        assert len(path._plans) <= 4
    finally:
        path.capacity = before


def test_a_bad_input_raises_before_any_launch(path):
    data = generate_input((64,), (128,), (256,), 1, seed=1)
    data[0][0] = (data[0][0][0], data[0][0][1], data[0][0][2].float())
    with pytest.raises(ValueError, match="group 0: c has dtype"):
        nvfp4.custom_kernel(data)
    torch.cuda.synchronize()  # the context is still healthy
