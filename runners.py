"""What the worker process runs for one case: test, benchmark, profile, diff (PROBLEM.md section 5).

Each function takes the submission's path first; the submission is imported once per
worker process and reused, as on the leaderboard.
"""
import dataclasses
import importlib.util
import math
import time

import torch

from reference import TOLERANCE, check_implementation, generate_input, ref_kernel
from utils import clear_l2_cache, match_reference, mismatch_mask

NUM_ITERATIONS_PER_BENCHMARK = 15
WALL_LIMIT_NS = 120e9

_kernels = {}


def load_kernel(path: str):
    """The submission's custom_kernel (or a reference module's ref_kernel), imported once."""
    if path not in _kernels:
        spec = importlib.util.spec_from_file_location("submission", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        kernel = getattr(module, "custom_kernel", None) or getattr(module, "ref_kernel", None)
        if kernel is None:
            raise AttributeError(f"{path} defines neither custom_kernel nor ref_kernel")
        _kernels[path] = kernel
    return _kernels[path]


def device_name() -> str:
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


def clone_data(data):
    if isinstance(data, tuple):
        return tuple(clone_data(x) for x in data)
    if isinstance(data, list):
        return [clone_data(x) for x in data]
    if isinstance(data, torch.Tensor):
        return data.clone()
    return data


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


@dataclasses.dataclass
class Stats:
    runs: int
    mean: float
    std: float
    err: float
    best: float
    worst: float


def calculate_stats(durations: list[float]) -> Stats:
    """Durations in ns; std is the sample standard deviation, err = std / sqrt(runs)."""
    runs = len(durations)
    mean = sum(durations) / runs
    std = math.sqrt(sum((x - mean) ** 2 for x in durations) / (runs - 1)) if runs > 1 else 0.0
    return Stats(runs=runs, mean=mean, std=std, err=std / math.sqrt(runs), best=float(min(durations)), worst=float(max(durations)))


def should_stop(durations: list[float], elapsed_ns: float, max_time_ns: float) -> bool:
    """The leaderboard's stopping rule, checked after each repeat."""
    if len(durations) < 3 or elapsed_ns <= 1e8:
        return False
    stats = calculate_stats(durations)
    return stats.err / stats.mean < 0.001 or stats.mean * stats.runs > max_time_ns or elapsed_ns > WALL_LIMIT_NS


class BatchTimer:
    """Times a batch of calls: CUDA events on a GPU, the host clock on the CPU. Result in ns."""

    def __init__(self):
        self.cuda = torch.cuda.is_available()

    def __enter__(self):
        if self.cuda:
            self._start, self._end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self._start.record()
        else:
            self._t0 = time.perf_counter_ns()
        return self

    def __exit__(self, *exc):
        if self.cuda:
            self._end.record()
            torch.cuda.synchronize()
            self.ns = self._start.elapsed_time(self._end) * 1e6
        else:
            self.ns = float(time.perf_counter_ns() - self._t0)


def run_test(path: str, args: dict) -> tuple[bool, str]:
    kernel = load_kernel(path)
    data = generate_input(**args)
    synchronize()
    output = kernel(clone_data(data))
    synchronize()
    return check_implementation(data, output)


def run_benchmark(path: str, args: dict, recheck: bool, max_repeats: int, max_time_ns: float) -> Stats | str:
    """Stats of one case, or the failure message. With `recheck`, every output of every repeat is checked."""
    kernel = load_kernel(path)
    args = dict(args)
    data_list = []
    for _ in range(NUM_ITERATIONS_PER_BENCHMARK):
        args["seed"] += 42
        data_list.append(generate_input(**args))
    expected = [ref_kernel(clone_data(data)) for data in data_list]

    def first_mismatch(outputs) -> str | None:
        for j, (exp, out) in enumerate(zip(expected, outputs)):
            good, message = match_reference(None, out, reference=lambda _, e=exp: e, **TOLERANCE)
            if not good:
                return f"input set {j}: {message}"
        return None

    outputs = [kernel(clone_data(data)) for data in data_list]
    synchronize()
    if message := first_mismatch(outputs):
        return message
    return time_calls(kernel, data_list, max_repeats, max_time_ns, first_mismatch if recheck else None)


def time_calls(fn, data_list, max_repeats: int, max_time_ns: float, check=None) -> Stats | str:
    """The harness's timing: per repeat, flush L2 and time fn on every input set back to back.

    The repeat's time is the batch time over the number of sets; repeats stop by the
    leaderboard's rule. `check(outputs)` may return a failure message, which ends the timing.
    """
    durations = []
    start = time.perf_counter_ns()
    for _ in range(max_repeats):
        synchronize()
        clear_l2_cache()
        with BatchTimer() as timer:
            outputs = [fn(data) for data in data_list]
        if check and (message := check(outputs)):
            return message
        durations.append(timer.ns / len(data_list))
        if should_stop(durations, time.perf_counter_ns() - start, max_time_ns):
            break
    return calculate_stats(durations)


def run_profile(path: str, args: dict) -> str:
    """A torch-profiler table of one call (after one warm-up call that absorbs any JIT build)."""
    from torch.profiler import ProfilerActivity, profile

    kernel = load_kernel(path)
    data = generate_input(**args)
    kernel(clone_data(data))
    synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    cloned = clone_data(data)
    with profile(activities=activities) as prof:
        kernel(cloned)
        synchronize()
    sort_by = "self_cuda_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=sort_by, row_limit=20)


def run_diff(path: str, args: dict, worst: int = 3) -> list[dict]:
    """Per group: max abs error, max relative error, mismatch count and the worst elements."""
    kernel = load_kernel(path)
    data = generate_input(**args)
    output = kernel(clone_data(data))
    synchronize()
    expected = ref_kernel(data)
    if len(output) != len(expected):
        return [{"group": "all", "error": f"{len(output)} outputs, expected {len(expected)}"}]
    report = []
    for g, (out, exp) in enumerate(zip(output, expected)):
        if out.shape != exp.shape:
            report.append({"group": g, "error": f"shape {tuple(out.shape)}, expected {tuple(exp.shape)}"})
            continue
        o, e = out.to(exp.device, torch.float32), exp.to(torch.float32)
        d = (o - e).abs()
        d = torch.where(torch.isnan(d), torch.full_like(d, float("inf")), d)
        rel = d / e.abs().clamp_min(TOLERANCE["atol"])
        bad = mismatch_mask(out, exp, **TOLERANCE)
        excess = d / (TOLERANCE["atol"] + TOLERANCE["rtol"] * e.abs())
        top = torch.topk(excess.flatten(), min(worst, excess.numel())).indices if excess.numel() else []
        elements = []
        for flat in top:
            idx = tuple(int(i) for i in torch.unravel_index(flat, excess.shape))
            elements.append({"index": idx, "got": float(o[idx]), "expected": float(e[idx])})
        report.append(
            {
                "group": g,
                "shape": tuple(out.shape),
                "max_abs": float(d.max()) if d.numel() else 0.0,
                "max_rel": float(rel.max()) if rel.numel() else 0.0,
                "mismatches": int(bad.count_nonzero()),
                "worst": elements,
            }
        )
    return report
