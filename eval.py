"""The evaluation harness: the leaderboard's protocol (docs/PROBLEM.md section 5), usable on any machine.

    python eval.py MODE SPEC [--submission PATH] [--timeout SECONDS] [--strict]
    python eval.py compare A.py B.py SPEC [--timeout SECONDS]

MODE is test, benchmark, leaderboard, profile or diff. SPEC is a spec file (one case a line)
or task.yml (its `tests` for test and diff, its `benchmarks` otherwise). compare times two
submissions on the same inputs, each in its own worker, alternating between them every repeat.
With POPCORN_FD set, `key: value` result lines go to that file descriptor; readable results go to
stdout and progress to stderr. Benchmarks are timed as the leaderboard times them (its 64 GiB
flush, or a stand-in where the GPU has less memory, with no synchronize before the start event:
GPU time), and once more with the host's part counted. --strict times every repeat on fresh
clones of the inputs, shuffled, and warns about outputs that are not the given c tensors in
fp16. Exit codes: 0 pass, 112 a check failed, 113 bad spec, 2 bad arguments. The contract:
docs/PROBLEM.md.
"""

import argparse
import base64
import dataclasses
import errno
import fcntl
import os
import sys
from pathlib import Path
from textwrap import indent

from harness.floors import KNOWN_GPUS, ceilings_for, floor_us, geomean
from harness.report import FailureLog, first_line, format_time, table
from harness.spec import SpecError, read_cases
from utils import set_seed

HERE = Path(__file__).resolve().parent
EXIT_PASS, EXIT_BAD_ARGS, EXIT_FAIL, EXIT_BAD_SPEC = 0, 2, 112, 113
MODES = ("test", "benchmark", "leaderboard", "profile", "diff")


class Protocol:
    """`key: value` lines on POPCORN_FD; does nothing when no descriptor was given."""

    def __init__(self, fd: int | None):
        self.file = None
        if fd is not None:
            if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:  # fcntl: OSError when fd is not open
                raise OSError(errno.EBADF, "open for reading only")
            self.file = os.fdopen(fd, "w")
            os.set_inheritable(fd, False)

    def log(self, key: str, value) -> None:
        if self.file:
            text = str(value).replace("\n", "\\n")
            print(f"{key}: {text}", file=self.file, flush=True)

    def close(self) -> None:
        if self.file:
            self.file.close()


def progress(text: str) -> None:
    print(f"[eval] {text}", file=sys.stderr, flush=True)


def finish(out: Protocol, passed: int, total: int, why: str = "") -> int:
    """The run's last line, `N of M passed`, and its check line on the protocol."""
    out.log("check", "pass" if passed == total else "fail")
    print(f"{passed} of {total} passed{why}", flush=True)
    return EXIT_PASS if passed == total else EXIT_FAIL


def _call(worker, name, *args, timeout, **kwargs):
    """(True, result) or (False, failure message)."""
    from harness.worker import WorkerFailure

    try:
        return True, worker.call(name, *args, timeout=timeout, **kwargs)
    except WorkerFailure as e:
        return False, str(e)


def tell_failure(failures: FailureLog, message: str, summary: str | None = None) -> None:
    """A failed case on stdout: its traceback where this run has not shown it yet, then one line."""
    if trace := failures.explain(message):
        print(trace, flush=True)
    print(f"      {summary or first_line(message)}", flush=True)


# ----------------------------------------------------------------------------- modes
def submission_imports(out, worker, tests, submission, timeout, kind: str, mode: str) -> bool:
    """Import the submission in the worker; on failure, say why once, and fail every case in a line
    (kind: the keys' section, test or benchmark; mode: the mode that says it)."""
    ok, result = _call(worker, "import_submission", submission, timeout=timeout)
    if ok:
        return True
    reason = first_line(result)
    print(f"{submission} failed to import:", flush=True)
    print(FailureLog().explain(result) or f"      {reason}", flush=True)  # the traceback ends with the error: once
    out.log(f"{kind}-count", len(tests))
    for i, test in enumerate(tests):
        out.log(f"{kind}.{i}.spec", test.spec)
        out.log(f"{kind}.{i}.status", "fail")
        out.log(f"{kind}.{i}.error", f"the submission failed to import: {reason}")
        print(f"{mode} {i + 1}/{len(tests)} FAIL  {test.spec}: the submission failed to import", flush=True)
    return False


def tell_device_and_path(worker, submission, timeout) -> None:
    ok, result = _call(worker, "describe_run", submission, timeout=timeout)
    if ok:
        device, path = result
        print(f"ran on: {device}; path: {path or 'not named (the submission defines no path_in_use())'}", flush=True)


def run_testing(out, worker, tests, submission, timeout) -> int:
    if not submission_imports(out, worker, tests, submission, timeout, "test", "test"):
        return finish(out, 0, len(tests))
    out.log("test-count", len(tests))
    passed, failures = 0, FailureLog()
    for i, test in enumerate(tests):
        progress(f"test {i + 1}/{len(tests)}: {test.spec}")
        out.log(f"test.{i}.spec", test.spec)
        ok, result = _call(worker, "run_test", submission, test.args, timeout=timeout)
        good, message, readable = result if ok else (False, result, None)
        out.log(f"test.{i}.status", "pass" if good else "fail")
        print(f"test {i + 1}/{len(tests)} {'pass' if good else 'FAIL'}  {test.spec}", flush=True)
        if good:
            passed += 1
            continue
        out.log(f"test.{i}.error", message)
        tell_failure(failures, message, readable)
    tell_device_and_path(worker, submission, timeout)
    return finish(out, passed, len(tests))


def _log_stats(out, i, stats) -> None:
    for field in dataclasses.fields(stats):
        out.log(f"benchmark.{i}.{field.name}", getattr(stats, field.name))


def _summarize(case: dict) -> str:
    def dims(values):
        return str(values[0]) if len(set(values)) == 1 else ",".join(map(str, values))

    return f"G={case['g']} M={','.join(map(str, case['m']))} N={dims(case['n'])} K={dims(case['k'])}"


def device_header(device: str):
    """The table's device line, and the GPU's ceilings where they are known."""
    if not device:
        return "device: no GPU (the CPU)", None
    ceilings = ceilings_for(device)
    if ceilings is None:
        return f"device: {device} (no speed-of-light floor: floors are known for {' and '.join(KNOWN_GPUS)})", None
    return f"device: {device}  [floors: {ceilings.basis}]", ceilings


def print_timing_table(tests, results, device: str) -> None:
    header, ceilings = device_header(device)
    timed = [r for r in results if r is not None]
    on_gpu = any(r.host_included for r in timed)
    print(f"\n{header}")
    if timed and on_gpu:
        print(f"flush: {timed[0].flush}")
    headers = ["case", "mean", "+- err", "runs"] + (["with host"] if on_gpu else [])
    headers += [f"{ceilings.name} floor", "x floor"] if ceilings else []
    rows, means, floors, hosts = [], [], [], []
    for i, (test, result) in enumerate(zip(tests, results)):
        shape = _summarize(test.args)
        if result is None:
            rows.append([str(i), "FAIL"] + [""] * (len(headers) - 2) + [shape])
            continue
        stats = result.stats
        means.append(stats.mean)
        row = [str(i), format_time(stats.mean), format_time(stats.err), str(stats.runs)]
        if on_gpu:
            hosts.append(result.host_included.mean)
            row.append(format_time(result.host_included.mean))
        if ceilings:
            floor = floor_us(ceilings, test.args["m"], test.args["n"], test.args["k"]) * 1e3
            floors.append(floor)
            row += [format_time(floor), f"{stats.mean / floor:.2f}"]
        rows.append(row + [shape])
    if len(results) > 1 and means and len(means) == len(results):
        row = ["geo", format_time(geomean(means)), "", ""] + ([format_time(geomean(hosts))] if on_gpu else [])
        row += [format_time(geomean(floors)), f"{geomean(means) / geomean(floors):.2f}"] if ceilings else []
        rows.append(row + ["(geometric mean)"])
    print(table(headers + ["shape"], rows))
    if on_gpu:
        print(
            "mean: GPU time per call, timed as the leaderboard does; with host: the same calls timed after a synchronize, "
            "so the host's part of each call counts (what a caller outside a CUDA graph waits for)"
        )
    elif timed:
        print("mean: wall time per call on the CPU")
    for i, result in enumerate(results):
        for warning in result.warnings if result else ():
            print(f"warning, case {i}: {warning} (the leaderboard compares values only)")


@dataclasses.dataclass
class BenchmarkPlan:
    """How many input sets and repeats a case gets, and what to say about it."""

    sets: int
    repeats: int
    warm_up: bool
    progress: bool
    notice: str | None

    @classmethod
    def for_device(cls, on_gpu: bool) -> "BenchmarkPlan":
        if on_gpu:
            return cls(sets=15, repeats=100, warm_up=True, progress=False, notice=None)
        return cls(
            sets=1,
            repeats=2,
            warm_up=False,
            progress=True,
            notice="no CUDA GPU: these are CPU times, which do not predict the leaderboard's (a B200). To finish in "
            "about a minute each case gets 1 input set (the leaderboard: 15) and 2 repeats (up to 100), and "
            "there is no warm-up.",
        )


def run_benchmarking(out, worker, tests, submission, timeout, leaderboard: bool, plan: BenchmarkPlan, strict: bool) -> int:
    if plan.notice:
        print(plan.notice, flush=True)
    if not submission_imports(out, worker, tests, submission, timeout, "benchmark", "leaderboard" if leaderboard else "benchmark"):
        return finish(out, 0, len(tests))
    if strict:
        print(
            "strict: every repeat on fresh clones of the input sets, in a shuffled order; outputs checked for being "
            "the given c tensors in fp16",
            flush=True,
        )
    common = dict(sets=plan.sets, strict=strict, progress=plan.progress)
    if plan.warm_up and leaderboard:
        for i, test in enumerate(tests):
            progress(f"warm-up {i + 1}/{len(tests)}")
            _call(worker, "run_benchmark", submission, test.args, False, 50, 5e8, **common, with_host=False, timeout=timeout)
    elif plan.warm_up:
        progress("warm-up on the first case")
        _call(worker, "run_benchmark", submission, tests[0].args, False, 100, 1e8, **common, with_host=False, timeout=timeout)
    out.log("benchmark-count", len(tests))
    results, failures = [], FailureLog()
    max_time_ns = 30e9 if leaderboard else 10e9
    for i, test in enumerate(tests):
        progress(f"benchmark {i + 1}/{len(tests)}: {test.spec}")
        out.log(f"benchmark.{i}.spec", test.spec)
        ok, result = _call(
            worker, "run_benchmark", submission, test.args, leaderboard, plan.repeats, max_time_ns, **common, timeout=timeout
        )
        if ok and not isinstance(result, str):
            _log_stats(out, i, result.stats)
            results.append(result)
            continue
        results.append(None)
        out.log(f"benchmark.{i}.status", "fail")
        out.log(f"benchmark.{i}.error", result)
        print(f"benchmark {i} FAIL  {test.spec}", flush=True)
        tell_failure(failures, result)
        if leaderboard:
            break
    ok, device = _call(worker, "device_name", timeout=timeout)
    print_timing_table(tests[: len(results)], results, device if ok else "an unknown GPU")
    passed = sum(r is not None for r in results)
    stopped = f" (the leaderboard stops at the first failure: {len(tests) - len(results)} not run)" if len(results) < len(tests) else ""
    return finish(out, passed, len(tests), stopped)


def run_profiling(out, worker, tests, submission, timeout, plan: BenchmarkPlan) -> int:
    if plan.notice:
        print("no CUDA GPU: a CPU profile of the portable path, which says nothing about the leaderboard's GPU", flush=True)
    if not submission_imports(out, worker, tests, submission, timeout, "benchmark", "profile"):
        return finish(out, 0, len(tests))
    out.log("benchmark-count", len(tests))
    passed, failures = 0, FailureLog()
    for i, test in enumerate(tests):
        progress(f"profile {i + 1}/{len(tests)}: {test.spec}")
        out.log(f"benchmark.{i}.spec", test.spec)
        ok, report = _call(worker, "run_profile", submission, test.args, timeout=timeout)
        if not ok:
            out.log(f"benchmark.{i}.status", "fail")
            out.log(f"benchmark.{i}.error", report)
            print(f"profile {i} FAIL  {test.spec}", flush=True)
            tell_failure(failures, report)
            continue
        passed += 1
        out.log(f"benchmark.{i}.report", base64.b64encode(report.encode("utf-8"), b"+*").decode("utf-8"))
        print(f"\nprofile {i}: {test.spec}\n{report}", flush=True)
    return finish(out, passed, len(tests))


def run_diffing(out, worker, tests, submission, timeout) -> int:
    if not submission_imports(out, worker, tests, submission, timeout, "test", "diff"):
        return finish(out, 0, len(tests))
    passed, failures = 0, FailureLog()
    for i, test in enumerate(tests):
        progress(f"diff {i + 1}/{len(tests)}: {test.spec}")
        ok, report = _call(worker, "run_diff", submission, test.args, timeout=timeout)
        print(f"\ncase {i}: {test.spec}")
        if not ok:
            print("  FAIL", flush=True)
            tell_failure(failures, report)
            continue
        rows, good = [], True
        for row in report:
            if "error" in row:
                good = False
                rows.append([str(row["group"]), row["error"]])
                continue
            good &= row["mismatches"] == 0
            worst = "  ".join(f"{w['index'][:2]}: {w['got']:.6g} / {w['expected']:.6g}" for w in row["worst"])
            rows.append(
                [
                    str(row["group"]),
                    "x".join(map(str, row["shape"])),
                    f"{row['max_abs']:.3g}",
                    f"{row['max_rel']:.3g}",
                    str(row["mismatches"]),
                    worst,
                ]
            )
        print(
            indent(
                table(["group", "shape", "max abs", "max rel", "mismatches", "worst elements (index: got / expected)"], rows, left=1), "  "
            )
        )
        passed += good
    return finish(out, passed, len(tests))


def run_comparing(out, workers, tests, submissions, timeout, plan: BenchmarkPlan) -> int:
    """compare mode (harness/compare.py): both submissions on every case, timed repeat by repeat in turn."""
    from harness.compare import alternate, comparison_table
    from harness.worker import WorkerFailure

    if plan.notice:
        print(plan.notice, flush=True)
    for name, worker, submission in zip("AB", workers, submissions):
        print(f"{name}: {submission}", flush=True)
        if not submission_imports(out, worker, tests, submission, timeout, "benchmark", "compare"):
            return finish(out, 0, len(tests))
    if plan.warm_up:  # one flush kind for both: the leaderboard's where the GPU holds two, else the stand-in
        ok_a, kind = _call(workers[0], "use_flush", None, timeout=timeout)
        ok_b, kind_b = _call(workers[1], "use_flush", kind, timeout=timeout)
        if ok_a and ok_b and kind_b != kind:
            _call(workers[0], "use_flush", kind_b, timeout=timeout)
    results, failures = [], FailureLog()
    for i, test in enumerate(tests):
        progress(f"compare {i + 1}/{len(tests)}: {test.spec}")
        for name, worker, submission in zip("AB", workers, submissions):
            ok, result = _call(worker, "prepare_comparison", submission, test.args, plan.sets, plan.progress, timeout=timeout)
            if not ok or result is not None:
                results.append(f"{name} failed")
                print(f"compare {i + 1}/{len(tests)} FAIL  {test.spec}: {name} failed", flush=True)
                tell_failure(failures, result)
                break
        if len(results) > i:
            continue
        repeats = [lambda w=w, s=s: w.call("compare_repeat", s, timeout=timeout) for w, s in zip(workers, submissions)]
        try:
            if plan.warm_up and i == 0:
                alternate(*repeats, 3, 1e8)
            results.append(alternate(*repeats, plan.repeats, 10e9))
        except WorkerFailure as e:
            results.append(str(e))
            print(f"compare {i + 1}/{len(tests)} FAIL  {test.spec}: a timed repeat failed", flush=True)
            tell_failure(failures, str(e))
    ok, device = _call(workers[0], "device_name", timeout=timeout)
    print(f"\n{device_header(device if ok else 'an unknown GPU')[0]}")
    print(comparison_table([_summarize(test.args) for test in tests], results))
    print(
        "A mean, B mean: GPU time per call, timed as the benchmark times it (CPU: wall time); B / A: above 1, B is slower; "
        "+- (95%): of the mean of the per-repeat ratios, each repeat of B next to one of A"
    )
    return finish(out, sum(not isinstance(r, str) for r in results), len(tests))


# ----------------------------------------------------------------------------- entry point
def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    compare = bool(argv) and argv[0] == "compare"
    if compare:
        parser.add_argument("mode", choices=("compare",))
        parser.add_argument("a", help="submission A")
        parser.add_argument("b", help="submission B")
    else:
        parser.add_argument("mode", choices=MODES + ("compare",))
    parser.add_argument("spec", help="spec file, or task.yml")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one case may take (default 900)")
    if not compare:  # compare names its two files and has no strict mode
        parser.add_argument("--submission", default=str(HERE / "submission.py"), help="file defining custom_kernel")
        parser.add_argument(
            "--strict", action="store_true", help="benchmark on fresh, shuffled clones every repeat; check outputs are c in fp16"
        )
    args = parser.parse_args(argv)
    if not args.timeout > 0:
        parser.error(f"--timeout must be a positive number of seconds, got {args.timeout}")
    return args


def main(argv=None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        fd = os.environ.get("POPCORN_FD")
        fd = int(fd) if fd else None
        secret = os.environ.pop("POPCORN_SEED", None)
        secret = int(secret) if secret else None
    except SystemExit as e:
        return EXIT_BAD_ARGS if e.code else EXIT_PASS
    except ValueError as e:
        print(f"bad POPCORN_FD or POPCORN_SEED: {e}", file=sys.stderr)
        return EXIT_BAD_ARGS
    submissions = [str(Path(path).resolve()) for path in ((args.a, args.b) if args.mode == "compare" else (args.submission,))]
    for submission in submissions:
        if not Path(submission).is_file():
            print(f"no submission file at {submission}", file=sys.stderr)
            return EXIT_BAD_ARGS
    set_seed(secret or 42)
    section = "tests" if args.mode in ("test", "diff") else "benchmarks"  # compare: the benchmarks
    try:
        tests = read_cases(args.spec, section, secret)
    except SpecError as e:
        print(e, file=sys.stderr)
        return EXIT_BAD_SPEC

    import torch

    from harness.worker import Worker

    try:
        out = Protocol(fd)
    except OSError as e:
        print(f"POPCORN_FD={fd} is not a file descriptor open for writing ({e.strerror})", file=sys.stderr)
        return EXIT_BAD_ARGS
    plan = BenchmarkPlan.for_device(torch.cuda.is_available())
    workers = [Worker(str(HERE)) for _ in submissions]
    worker, submission = workers[0], submissions[0]
    try:
        if args.mode == "compare":
            return run_comparing(out, workers, tests, submissions, args.timeout, plan)
        if args.mode == "test":
            return run_testing(out, worker, tests, submission, args.timeout)
        if args.mode in ("benchmark", "leaderboard"):
            return run_benchmarking(out, worker, tests, submission, args.timeout, args.mode == "leaderboard", plan, args.strict)
        if args.mode == "profile":
            return run_profiling(out, worker, tests, submission, args.timeout, plan)
        return run_diffing(out, worker, tests, submission, args.timeout)
    finally:
        for worker in workers:
            worker.stop()
        out.close()


if __name__ == "__main__":
    sys.exit(main())
