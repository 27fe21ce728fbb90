"""What the worker process runs for one case: test, benchmark, profile, diff (docs/PROBLEM.md section 5).

Each function takes the submission's path first; the submission is imported once per
worker process and reused, as on the leaderboard.
"""

import dataclasses
import importlib.util
import math
import random
import sys
import time

import torch

from harness.report import format_time
from reference import TOLERANCE, generate_input, ref_kernel
from utils import clear_l2_cache, l2_flush_bytes, match_reference, mismatch_mask

NUM_ITERATIONS_PER_BENCHMARK = 15
WALL_LIMIT_NS = 120e9

_modules = {}


def import_submission(path: str) -> None:
    """Import the submission (once per worker), so that a failure to import shows before any case."""
    load_kernel(path)


def load_kernel(path: str):
    """The submission's custom_kernel (or, in a reference module, the ref_kernel it defines), imported once."""
    if path not in _modules:
        spec = importlib.util.spec_from_file_location("submission", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if _kernel_of(module) is None:
            raise AttributeError(f"{path} defines no custom_kernel(data) function")
        _modules[path] = module
    return _kernel_of(_modules[path])


def _kernel_of(module):
    kernel = getattr(module, "custom_kernel", None)
    if kernel is None and getattr(getattr(module, "ref_kernel", None), "__module__", None) == module.__name__:
        kernel = module.ref_kernel
    return kernel if callable(kernel) else None


def device_name() -> str:
    """The GPU's name, or "" on a machine without one."""
    return torch.cuda.get_device_name() if torch.cuda.is_available() else ""


def describe_run(path: str) -> tuple[str, str | None]:
    """The device the cases ran on, and the submission's own account of the path it took there: its
    path_in_use() where it defines one (submission.py does), else None."""
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        device = f"{torch.cuda.get_device_name()} (compute capability {major}.{minor})"
    else:
        device = "no GPU (the CPU)"
    load_kernel(path)
    describe = getattr(_modules[path], "path_in_use", None)
    return device, describe() if callable(describe) else None


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


LEADERBOARD_FLUSH_SHAPE = (16000, 1024, 1024)  # the leaderboard's flush: torch.randn of 64 GiB of float32
LEADERBOARD_FLUSH_BYTES = 4 * math.prod(LEADERBOARD_FLUSH_SHAPE)


class Flush:
    """What each timed repeat runs on the GPU just before its start event (docs/PROBLEM.md section 5).

    The leaderboard's flush (torch.randn over 64 GiB) evicts L2 and keeps the GPU busy long enough
    for the host to queue all the repeat's calls before the first one starts, so its scores are GPU
    time. Where the GPU lacks the memory, a stand-in does both: a randn over four times L2, then a
    GPU spin as long as the leaderboard's flush takes on this GPU (a 1 GiB randn, timed and scaled).
    """

    def __init__(self, leaderboard: bool | None = None, held: bool = False):
        """leaderboard: None, the leaderboard's flush where the GPU has the memory; False, the stand-in.
        held: the leaderboard's flush writes into one buffer held for the worker's life instead of a new
        tensor each time (the same GPU work), so that two workers side by side (eval.py compare) each
        keep their 64 GiB whole while their input sets come and go."""
        free, _ = torch.cuda.mem_get_info()
        self.leaderboard = free >= LEADERBOARD_FLUSH_BYTES + (4 << 30) and leaderboard is not False
        self._held = torch.empty(LEADERBOARD_FLUSH_SHAPE, device="cuda") if held and self.leaderboard else None
        if not self.leaderboard:
            self._small = l2_flush_bytes(torch.device("cuda")) // 4
            sample, spin = (lambda: torch.randn(1 << 28, device="cuda")), (lambda: torch.cuda._sleep(1 << 24))
            sample(), spin()  # warm: the allocation and the kernels' first load stay out of the timing
            self.estimated_ms = _gpu_ms(sample) * LEADERBOARD_FLUSH_BYTES / (1 << 30)
            self._cycles = int((1 << 24) * self.estimated_ms / _gpu_ms(spin))
        self()  # warm: the allocator's first reservation of the buffer stays out of the figure
        torch.cuda.synchronize()
        self.ms = _gpu_ms(self)

    def __call__(self) -> None:
        if self._held is not None:
            torch.randn(LEADERBOARD_FLUSH_SHAPE, device="cuda", out=self._held)
        elif self.leaderboard:
            torch.randn(LEADERBOARD_FLUSH_SHAPE, device="cuda")
        else:
            torch.randn(self._small, device="cuda")
            torch.cuda._sleep(self._cycles)

    def describe(self) -> str:
        if self.leaderboard:
            held = ", into a buffer each worker holds" if self._held is not None else ""
            return f"the leaderboard's flush (torch.randn of 64 GiB{held}): {self.ms:.1f} ms of GPU time before each repeat"
        return (
            f"a stand-in for the leaderboard's 64 GiB flush (too little free GPU memory): a randn over 4x L2, then a GPU spin; "
            f"{self.ms:.1f} ms of GPU time before each repeat, the 64 GiB flush's time here estimated from a 1 GiB randn "
            f"({self.estimated_ms:.1f} ms)"
        )


def _gpu_ms(fn) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


_flush = None


def leaderboard_flush() -> Flush:
    """The worker's Flush, made (and measured) on first use."""
    global _flush
    if _flush is None:
        _flush = Flush()
    return _flush


def use_flush(leaderboard: bool | None) -> bool:
    """Make the worker's Flush anew, its buffer held (see Flush); True when it is the leaderboard's.
    Two workers timed side by side (eval.py compare) use the same kind."""
    global _flush
    _flush = None
    torch.cuda.empty_cache()  # an earlier flush's 64 GiB, held by torch's allocator
    _flush = Flush(leaderboard, held=True)
    return _flush.leaderboard


@dataclasses.dataclass
class CaseTiming:
    stats: Stats  # timed as the leaderboard does: the official figures
    host_included: Stats | None  # the same calls with the host's part counted (None on the CPU)
    flush: str  # what ran before each repeat
    warnings: list[str]  # strict mode: outputs that are not the given c tensors, or not fp16


def run_test(path: str, args: dict) -> tuple[bool, str, str]:
    """(passed, the failure as the leaderboard's check words it, the failure in plain words)."""
    kernel = load_kernel(path)
    data = generate_input(**args)
    synchronize()
    output = kernel(clone_data(data))
    synchronize()
    expected = ref_kernel(data)
    good, message = match_reference(None, output, reference=lambda _: expected, **TOLERANCE)
    return good, message, "" if good else describe_mismatch(output, expected)


def describe_mismatch(output, expected, most_groups: int = 3) -> str:
    """What is wrong with `output`, in words: per failing group the count of elements out of
    tolerance, and the first one's index, value and expected value."""
    if not isinstance(output, (list, tuple)):
        return f"the output is a {type(output).__name__}, not a list of tensors"
    if len(output) != len(expected):
        return f"{len(output)} outputs for {len(expected)} groups"
    found = []
    for g, (got, want) in enumerate(zip(output, expected)):
        if not isinstance(got, torch.Tensor):
            found.append(f"group {g}: the output is a {type(got).__name__}, not a tensor")
        elif got.shape != want.shape:
            found.append(f"group {g}: shape {tuple(got.shape)}, expected {tuple(want.shape)}")
        elif (bad := mismatch_mask(got, want, **TOLERANCE)).any():
            index = tuple(bad.nonzero()[0].tolist())
            found.append(
                f"group {g}: {int(bad.count_nonzero()):,} of {bad.numel():,} elements wrong; the first, at {index}, "
                f"is {got[index].item():.6g}, expected {want[index].item():.6g}"
            )
    more = f"; and {len(found) - most_groups} more groups" if len(found) > most_groups else ""
    return "; ".join(found[:most_groups]) + more


def output_warnings(inputs, outputs) -> set[str]:
    """How the outputs differ from the given c tensors written in place (the leaderboard compares values only)."""
    found = set()
    for (abc, _, _, _), output in zip(inputs, outputs):
        if not isinstance(output, (list, tuple)):
            found.add(f"the output is {type(output).__name__}, not a list of tensors")
            continue
        for g, ((_, _, c), out) in enumerate(zip(abc, output)):
            if not isinstance(out, torch.Tensor):
                continue
            if out.dtype != torch.float16:
                found.add(f"group {g}: the output is {out.dtype}, not float16")
            if out.data_ptr() != c.data_ptr() or out.shape != c.shape:
                found.add(f"group {g}: the output is not the given c written in place")
    return found


def run_benchmark(
    path: str,
    args: dict,
    recheck: bool,
    max_repeats: int,
    max_time_ns: float,
    sets: int = NUM_ITERATIONS_PER_BENCHMARK,
    strict: bool = False,
    with_host: bool = True,
    progress: bool = False,
) -> CaseTiming | str:
    """The timing of one case, or the failure message. With `recheck`, every output of every repeat
    is checked; with `strict`, every repeat runs on fresh clones of the input sets, in a shuffled
    order, and the outputs are checked for being the given c tensors in fp16. `with_host`: time the
    calls a second way, with the host's part counted (on a GPU). `progress` reports each step on
    stderr (for slow devices)."""
    checked = checked_input_sets(path, args, sets, progress)
    if isinstance(checked, str):
        return checked
    kernel, data_list, first_mismatch, (inputs, outputs) = checked
    warnings = output_warnings(inputs, outputs) if strict else None
    on_gpu = torch.cuda.is_available()
    flush = leaderboard_flush() if on_gpu else None
    timed = dict(fresh_inputs=strict, warnings=warnings, progress=progress)
    stats = time_calls(kernel, data_list, max_repeats, max_time_ns, first_mismatch if recheck else None, flush=flush, **timed)
    if isinstance(stats, str):
        return stats
    host_included = time_calls(kernel, data_list, max_repeats, max_time_ns, None, flush=None, **timed) if on_gpu and with_host else None
    if isinstance(host_included, str):
        return host_included
    described = flush.describe() if flush else "none (the CPU: host clock around the calls)"
    return CaseTiming(stats, host_included, described, sorted(warnings or ()))


def checked_input_sets(path: str, args: dict, sets: int, progress: bool = False):
    """A case's input sets as the benchmark makes them, each run once through the submission (on
    clones) and checked: (kernel, the sets, first_mismatch(outputs), (the clones, their outputs)),
    or the failure message."""
    kernel = load_kernel(path)
    args = dict(args)
    data_list = []
    for i in range(sets):
        args["seed"] += 42
        data_list.append(generate_input(**args))
        _report(progress, f"input set {i + 1}/{sets} generated")
    expected = [ref_kernel(clone_data(data)) for data in data_list]

    def first_mismatch(outputs) -> str | None:
        for j, (exp, out) in enumerate(zip(expected, outputs)):
            good, message = match_reference(None, out, reference=lambda _, e=exp: e, **TOLERANCE)
            if not good:
                return f"input set {j}: {message}"
        return None

    inputs = [clone_data(data) for data in data_list]
    outputs = [kernel(data) for data in inputs]
    synchronize()
    if message := first_mismatch(outputs):
        return message
    _report(progress, f"{sets} outputs checked; timing")
    return kernel, data_list, first_mismatch, (inputs, outputs)


_compared = {}  # path -> (kernel, input sets) of the case being compared


def prepare_comparison(path: str, args: dict, sets: int, progress: bool = False) -> str | None:
    """Make and check a case's input sets (as run_benchmark does) for compare_repeat(); None, or the
    failure message."""
    _compared.pop(path, None)
    checked = checked_input_sets(path, args, sets, progress)
    if isinstance(checked, str):
        return checked
    _compared[path] = checked[:2]
    return None


def compare_repeat(path: str) -> float:
    """One repeat of the prepared case, timed as run_benchmark times it: ns per call."""
    kernel, data_list = _compared[path]
    flush = leaderboard_flush() if torch.cuda.is_available() else None
    return time_repeat(kernel, data_list, list(range(len(data_list))), flush)[0]


def _spacer(rng: random.Random):
    """A block of a random size (a few 2 MiB pages on a GPU) held while a repeat's clones are made."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.empty(rng.randrange(1, 16) << 21, dtype=torch.uint8, device=device)


def _report(enabled: bool, text: str) -> None:
    if enabled:
        print(f"[eval]   {text}", file=sys.stderr, flush=True)


def time_calls(
    fn,
    data_list,
    max_repeats: int,
    max_time_ns: float,
    check=None,
    flush: Flush | None = None,
    fresh_inputs: bool = False,
    warnings: set | None = None,
    progress: bool = False,
) -> Stats | str:
    """The harness's timing: per repeat, flush L2 and time fn on every input set back to back.

    With `flush` (a Flush), as the leaderboard: no synchronize between the flush and the start
    event, so the host's part of the calls is hidden behind the flush and the time is the GPU's.
    Without it, 4x L2 is flushed and the GPU synchronized before the start event: the host's part
    counts. The repeat's time is the batch time over the number of sets; repeats stop by the
    leaderboard's rule. `check(outputs)` may return a failure message, which ends the timing.
    `fresh_inputs`: each repeat runs on clones of the sets made before the flush, in a shuffled
    order (the leaderboard's fix against caching on object identity, not deployed); `warnings`
    collects output_warnings() of every repeat.
    """
    durations = []
    order = list(range(len(data_list)))
    shuffler = random.Random(len(data_list))
    start = time.perf_counter_ns()
    for repeat in range(max_repeats):
        ns, inputs, outputs = time_repeat(fn, data_list, order, flush, shuffler if fresh_inputs else None)
        if check and (message := check(outputs)):
            return message
        if warnings is not None:
            warnings |= output_warnings(inputs, outputs)
        durations.append(ns)
        _report(progress, f"repeat {repeat + 1}/{max_repeats}: {format_time(ns)} per call")
        if should_stop(durations, time.perf_counter_ns() - start, max_time_ns):
            break
    return calculate_stats(durations)


def time_repeat(fn, data_list, order: list, flush: Flush | None, shuffler: random.Random | None = None):
    """One repeat of time_calls(): (ns per call, the inputs, the outputs). With a shuffler, on fresh
    clones of the input sets in a newly shuffled `order`."""
    synchronize()
    inputs = data_list
    if shuffler is not None:
        shuffler.shuffle(order)
        inputs = [None] * len(data_list)
        spacer = _spacer(shuffler)  # so that the clones do not land where earlier clones were, repeat after repeat
        for j in order:
            inputs[j] = clone_data(data_list[j])
        del spacer
    if flush is not None:
        flush()
    else:
        clear_l2_cache()
        synchronize()
    outputs = [None] * len(data_list)
    with BatchTimer() as timer:
        for j in order:
            outputs[j] = fn(inputs[j])
    return timer.ns / len(data_list), inputs, outputs


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
