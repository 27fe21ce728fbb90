"""The evaluation harness: the leaderboard's protocol (docs/PROBLEM.md section 5), usable on any machine.

    python eval.py MODE SPEC [--submission PATH] [--timeout SECONDS] [--strict]

MODE is test, benchmark, leaderboard, profile or diff. SPEC is a spec file (one case a line)
or task.yml (its `tests` for test and diff, its `benchmarks` otherwise). With POPCORN_FD
set, `key: value` result lines go to that file descriptor; readable results always go to
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

from harness.floors import ceilings_for, floor_us, geomean
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


def finish(out: Protocol, passed: bool) -> int:
    out.log("check", "pass" if passed else "fail")
    print(f"check: {'pass' if passed else 'fail'}", flush=True)
    return EXIT_PASS if passed else EXIT_FAIL


def _call(worker, name, *args, timeout, **kwargs):
    """(True, result) or (False, failure message)."""
    from harness.worker import WorkerFailure

    try:
        return True, worker.call(name, *args, timeout=timeout, **kwargs)
    except WorkerFailure as e:
        return False, str(e)


# ----------------------------------------------------------------------------- modes
def submission_imports(out, worker, tests, submission, timeout, kind: str) -> bool:
    """Import the submission in the worker; on failure, say why once and fail every case."""
    ok, result = _call(worker, "import_submission", submission, timeout=timeout)
    if ok:
        return True
    first_line = result.splitlines()[0] if result else "unknown error"
    print(f"{submission} failed to import:\n{result}", flush=True)
    out.log(f"{kind}-count", len(tests))
    for i, test in enumerate(tests):
        out.log(f"{kind}.{i}.spec", test.spec)
        out.log(f"{kind}.{i}.status", "fail")
        out.log(f"{kind}.{i}.error", f"the submission failed to import: {first_line}")
    return False


def run_testing(out, worker, tests, submission, timeout) -> int:
    if not submission_imports(out, worker, tests, submission, timeout, "test"):
        return finish(out, False)
    out.log("test-count", len(tests))
    passed = True
    for i, test in enumerate(tests):
        progress(f"test {i + 1}/{len(tests)}: {test.spec}")
        out.log(f"test.{i}.spec", test.spec)
        ok, result = _call(worker, "run_test", submission, test.args, timeout=timeout)
        good, message = result if ok else (False, result)
        out.log(f"test.{i}.status", "pass" if good else "fail")
        print(f"test {i:<3} {'pass' if good else 'FAIL'}  {test.spec}", flush=True)
        if not good:
            passed = False
            out.log(f"test.{i}.error", message)
            print(f"         {message}", flush=True)
    return finish(out, passed)


def _log_stats(out, i, stats) -> None:
    for field in dataclasses.fields(stats):
        out.log(f"benchmark.{i}.{field.name}", getattr(stats, field.name))


def _summarize(case: dict) -> str:
    def dims(values):
        return str(values[0]) if len(set(values)) == 1 else ",".join(map(str, values))

    return f"G={case['g']} M={','.join(map(str, case['m']))} N={dims(case['n'])} K={dims(case['k'])}"


def print_timing_table(tests, results, device: str) -> None:
    ceilings = ceilings_for(device)
    floor_head = f"{ceilings.name} floor (us)  x floor" if ceilings else "(no floor: unknown GPU)"
    timed = [r for r in results if r is not None]
    print(f"\ndevice: {device}" + (f"  [floors: {ceilings.basis}]" if ceilings else ""))
    if timed:
        print(f"flush: {timed[0].flush}")
    print(f"{'case':<5} {'mean (us)':>11} {'err (us)':>9} {'runs':>5} {'with host':>10}  {floor_head}  shape")
    means, floors, hosts = [], [], []
    for i, (test, result) in enumerate(zip(tests, results)):
        shape = _summarize(test.args)
        if result is None:
            print(f"{i:<5} {'FAIL':>11}  {shape}")
            continue
        stats = result.stats
        mean_us = stats.mean / 1e3
        means.append(mean_us)
        host = f"{result.host_included.mean / 1e3:>10.2f}" if result.host_included else f"{'-':>10}"
        if result.host_included:
            hosts.append(result.host_included.mean / 1e3)
        floor_cols = ""
        if ceilings:
            f = floor_us(ceilings, test.args["m"], test.args["n"], test.args["k"])
            floors.append(f)
            floor_cols = f"{f:>15.2f} {mean_us / f:>8.2f}"
        print(f"{i:<5} {mean_us:>11.2f} {stats.err / 1e3:>9.3f} {stats.runs:>5} {host}  {floor_cols}  {shape}")
    if means and len(means) == len(results):
        host = f"{geomean(hosts):>10.2f}" if len(hosts) == len(means) else f"{'':>10}"
        line = f"{'geo':<5} {geomean(means):>11.2f} {'':>9} {'':>5} {host}"
        if ceilings:
            line += f"  {geomean(floors):>15.2f} {geomean(means) / geomean(floors):>8.2f}"
        print(line + "  (geometric mean)")
    if any(r.host_included for r in timed):
        print("mean: GPU time per call, timed as the leaderboard does; with host: the same calls timed after a synchronize, "
              "so the host's part of each call counts (what a caller outside a CUDA graph waits for)")
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
        return cls(sets=1, repeats=2, warm_up=False, progress=True,
                   notice="no CUDA GPU: these are CPU times, which do not predict the leaderboard's (a B200). To finish in "
                          "about a minute each case gets 1 input set (the leaderboard: 15) and 2 repeats (up to 100), and "
                          "there is no warm-up.")


def run_benchmarking(out, worker, tests, submission, timeout, leaderboard: bool, plan: BenchmarkPlan, strict: bool) -> int:
    if plan.notice:
        print(plan.notice, flush=True)
        progress(plan.notice)
    if not submission_imports(out, worker, tests, submission, timeout, "benchmark"):
        return finish(out, False)
    if strict:
        print("strict: every repeat on fresh clones of the input sets, in a shuffled order; outputs checked for being "
              "the given c tensors in fp16", flush=True)
    common = dict(sets=plan.sets, strict=strict, progress=plan.progress)
    if plan.warm_up and leaderboard:
        for i, test in enumerate(tests):
            progress(f"warm-up {i + 1}/{len(tests)}")
            _call(worker, "run_benchmark", submission, test.args, False, 50, 5e8, **common, with_host=False, timeout=timeout)
    elif plan.warm_up:
        progress("warm-up on the first case")
        _call(worker, "run_benchmark", submission, tests[0].args, False, 100, 1e8, **common, with_host=False, timeout=timeout)
    out.log("benchmark-count", len(tests))
    passed, results = True, []
    max_time_ns = 30e9 if leaderboard else 10e9
    for i, test in enumerate(tests):
        progress(f"benchmark {i + 1}/{len(tests)}: {test.spec}")
        out.log(f"benchmark.{i}.spec", test.spec)
        ok, result = _call(worker, "run_benchmark", submission, test.args, leaderboard, plan.repeats, max_time_ns, **common,
                           timeout=timeout)
        if ok and not isinstance(result, str):
            _log_stats(out, i, result.stats)
            results.append(result)
            continue
        passed = False
        results.append(None)
        out.log(f"benchmark.{i}.status", "fail")
        out.log(f"benchmark.{i}.error", result)
        print(f"benchmark {i} FAIL: {result}", flush=True)
        if leaderboard:
            break
    ok, device = _call(worker, "device_name", timeout=timeout)
    print_timing_table(tests[: len(results)], results, device if ok else "unknown")
    return finish(out, passed)


def run_profiling(out, worker, tests, submission, timeout, plan: BenchmarkPlan) -> int:
    if plan.notice:
        print("no CUDA GPU: a CPU profile of the portable path, which says nothing about the leaderboard's GPU", flush=True)
    if not submission_imports(out, worker, tests, submission, timeout, "benchmark"):
        return finish(out, False)
    out.log("benchmark-count", len(tests))
    passed = True
    for i, test in enumerate(tests):
        progress(f"profile {i + 1}/{len(tests)}: {test.spec}")
        out.log(f"benchmark.{i}.spec", test.spec)
        ok, report = _call(worker, "run_profile", submission, test.args, timeout=timeout)
        if not ok:
            passed = False
            out.log(f"benchmark.{i}.status", "fail")
            out.log(f"benchmark.{i}.error", report)
            print(f"profile {i} FAIL: {report}", flush=True)
            continue
        out.log(f"benchmark.{i}.report", base64.b64encode(report.encode("utf-8"), b"+*").decode("utf-8"))
        print(f"\nprofile {i}: {test.spec}\n{report}", flush=True)
    return finish(out, passed)


def run_diffing(out, worker, tests, submission, timeout) -> int:
    if not submission_imports(out, worker, tests, submission, timeout, "test"):
        return finish(out, False)
    passed = True
    for i, test in enumerate(tests):
        progress(f"diff {i + 1}/{len(tests)}: {test.spec}")
        ok, report = _call(worker, "run_diff", submission, test.args, timeout=timeout)
        print(f"\ncase {i}: {test.spec}")
        if not ok:
            passed = False
            print(f"  FAIL: {report}")
            continue
        print(f"  {'group':<6} {'shape':<18} {'max abs':>10} {'max rel':>10} {'mismatches':>11}  worst elements (index: got / expected)")
        for row in report:
            if "error" in row:
                passed = False
                print(f"  {row['group']!s:<6} {row['error']}")
                continue
            passed &= row["mismatches"] == 0
            worst = "  ".join(f"{w['index'][:2]}: {w['got']:.6g} / {w['expected']:.6g}" for w in row["worst"])
            shape = "x".join(map(str, row["shape"]))
            print(f"  {row['group']:<6} {shape:<18} {row['max_abs']:>10.3g} {row['max_rel']:>10.3g} {row['mismatches']:>11}  {worst}")
    return finish(out, passed)


# ----------------------------------------------------------------------------- entry point
def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("spec", help="spec file, or task.yml")
    parser.add_argument("--submission", default=str(HERE / "submission.py"), help="file defining custom_kernel")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one case may take (default 900)")
    parser.add_argument("--strict", action="store_true", help="benchmark on fresh, shuffled clones every repeat; check outputs are c in fp16")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
        fd = os.environ.get("POPCORN_FD")
        fd = int(fd) if fd else None
        secret = os.environ.pop("POPCORN_SEED", None)
        secret = int(secret) if secret else None
    except SystemExit as e:
        return EXIT_BAD_ARGS if e.code else EXIT_PASS
    except ValueError as e:
        print(f"bad POPCORN_FD or POPCORN_SEED: {e}", file=sys.stderr)
        return EXIT_BAD_ARGS
    submission = str(Path(args.submission).resolve())
    if not Path(submission).is_file():
        print(f"no submission file at {submission}", file=sys.stderr)
        return EXIT_BAD_ARGS
    set_seed(secret or 42)
    section = "tests" if args.mode in ("test", "diff") else "benchmarks"
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
    worker = Worker(str(HERE))
    try:
        if args.mode == "test":
            return run_testing(out, worker, tests, submission, args.timeout)
        if args.mode in ("benchmark", "leaderboard"):
            return run_benchmarking(out, worker, tests, submission, args.timeout, args.mode == "leaderboard", plan, args.strict)
        if args.mode == "profile":
            return run_profiling(out, worker, tests, submission, args.timeout, plan)
        return run_diffing(out, worker, tests, submission, args.timeout)
    finally:
        worker.stop()
        out.close()


if __name__ == "__main__":
    sys.exit(main())
