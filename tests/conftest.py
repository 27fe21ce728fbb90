import os
from collections import Counter
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


def child_env(*folders: str) -> dict:
    """The environment for a test's child Python process: what pyproject.toml gives pytest (the
    repository's packages, the tests' helpers) and these folders under it importable."""
    paths = [ROOT, ROOT / "tests", *(ROOT / f for f in folders)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, paths))}


# A test that needs a CUDA GPU: skipped without one; `make test-gpu` runs it (with `make test-gpu-quick`
# when it is also marked quick, the GPU smoke set).
requires_cuda = pytest.mark.gpu
quick = pytest.mark.quick


# The GPU smoke set (make test-gpu-quick, a few minutes on an H200 with its builds; make test-gpu runs
# everything else): test ids, or the start of them, under tests/. The native kernels of each form,
# their exactness, graph replays and queue, and submission.py through the harness.
QUICK = (
    "library/test_kernel_path.py::test_official_tests",
    "library/test_kernel_path.py::test_full_range_codes_and_scales",
    "library/test_kernel_path.py::test_sixty_four_groups",
    "library/test_kernel_path.py::test_the_few_rows_pipeline_on_full_range_data",
    "library/test_kernel_path.py::test_a_replay_reads_the_current_values_of_its_tensors",
    "library/test_library.py::test_the_op_runs_on_the_callers_queue_behind_its_work[native",
    "library/test_library.py::test_a_captured_graph_computes_from_the_values_at_each_replay[native",
    "library/test_moe.py::test_both_forms_are_exact_over_the_cases[native]",
    "library/test_moe.py::test_a_captured_graph_replays_with_new_counts_and_new_data[native]",
    "library/test_moe.py::test_the_moe_calls_run_on_the_callers_queue_behind_its_work[native]",
    "library/test_fused_moe.py::test_fused_moe_graph_replays_with_new_tokens_and_routing_on_a_busy_side_queue",
    "library/test_two_level.py::test_alpha_is_read_on_the_callers_queue_and_at_each_graph_replay[native]",
    "library/test_self_check.py::test_a_correct_kernel_passes_silently_and_fast",
    "harness/test_reference.py::test_decode_path_on_the_gpu_matches_float64_numpy",
    "harness/test_eval.py::test_the_default_submission_passes_and_names_the_device_and_its_path",
    "submission/test_submission.py::test_custom_kernel_matches_the_reference_and_writes_every_element",
)


def _skips_for_want_of_a_gpu(mark) -> bool:
    reason = mark.kwargs.get("reason", "")
    return bool(mark.args and mark.args[0] is True) and "GPU" in reason and "without" not in reason


def pytest_collection_modifyitems(config, items):
    """Without a CUDA GPU the gpu-marked tests skip. Every test that another condition skips for want of
    a GPU must carry the mark too, or make test-gpu would never run it: a usage error names them."""
    _mark_quick(items)
    if torch.cuda.is_available():
        return
    unmarked = []
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        elif any(map(_skips_for_want_of_a_gpu, item.iter_markers("skipif"))):
            unmarked.append(item.nodeid)
    if unmarked:
        files = Counter(nodeid.split("::")[0] for nodeid in unmarked)
        raise pytest.UsageError(
            f"{len(unmarked)} tests skip for want of a GPU without the gpu mark (conftest.requires_cuda): "
            + ", ".join(f"{count} in {path}" for path, count in files.items())
        )


_skips = Counter()  # skip reason -> tests skipped for it


def pytest_runtest_logreport(report):
    if report.skipped and isinstance(report.longrepr, tuple):
        _skips[report.longrepr[2].removeprefix("Skipped: ")] += 1


def pytest_unconfigure(config):
    """The run's last line: the skipped tests counted by reason (say "needs X" in a skip's reason)."""
    if not _skips:
        return
    reasons = ", ".join(
        f"{count} {reason.replace('needs ', 'need ', 1) if count > 1 else reason}" for reason, count in _skips.most_common()
    )
    print(f"{sum(_skips.values())} skipped: {reasons}")


def _mark_quick(items) -> None:
    """Marks QUICK's tests quick; a usage error for an entry whose test function its file, when
    collected, does not define (a renamed test would otherwise leave the smoke set silently)."""
    modules = {}
    for item in items:
        nodeid = item.nodeid.removeprefix("tests/")
        modules[nodeid.split("::")[0]] = getattr(item, "module", None)
        for entry in QUICK:
            if nodeid.startswith(entry):
                item.add_marker(quick)
    stale = []
    for entry in QUICK:
        path, name = entry.split("::")
        module = modules.get(path)
        if module is not None and not callable(getattr(module, name.split("[")[0], None)):
            stale.append(entry)
    if stale:
        raise pytest.UsageError(f"conftest.QUICK names no test function: {', '.join(stale)}")
