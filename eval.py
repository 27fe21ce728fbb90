"""The evaluation harness: the leaderboard's protocol (PROBLEM.md section 5), usable on any machine.

    python eval.py MODE SPEC [--submission PATH] [--timeout SECONDS]

MODE is test, benchmark, leaderboard, profile or diff. SPEC is a spec file (one case a line)
or task.yml (its `tests` for test and diff, its `benchmarks` otherwise). With POPCORN_FD
set, `key: value` result lines go to that file descriptor; readable results always go to
stdout and progress to stderr. Exit codes: 0 pass, 112 a check failed, 113 bad spec, 2 bad
arguments.
"""
import argparse
import base64
import dataclasses
import os
import sys
from pathlib import Path

from floors import ceilings_for, floor_us, geomean
from spec import SpecError, read_cases
from utils import set_seed

HERE = Path(__file__).resolve().parent
EXIT_PASS, EXIT_BAD_ARGS, EXIT_FAIL, EXIT_BAD_SPEC = 0, 2, 112, 113
MODES = ("test", "benchmark", "leaderboard", "profile", "diff")


class Protocol:
    """`key: value` lines on POPCORN_FD; does nothing when no descriptor was given."""

    def __init__(self, fd: int | None):
        self.file = None
        if fd is not None:
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


def _call(worker, name, *args, timeout):
    """(True, result) or (False, failure message)."""
    from worker import WorkerFailure

    try:
        return True, worker.call(name, *args, timeout=timeout)
    except WorkerFailure as e:
        return False, str(e)


# ----------------------------------------------------------------------------- modes
def run_testing(out, worker, tests, submission, timeout) -> int:
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
    print(f"\ndevice: {device}" + (f"  [floors: {ceilings.basis}]" if ceilings else ""))
    print(f"{'case':<5} {'mean (us)':>11} {'err (us)':>9} {'runs':>5}  {floor_head}  shape")
    means, floors = [], []
    for i, (test, stats) in enumerate(zip(tests, results)):
        shape = _summarize(test.args)
        if stats is None:
            print(f"{i:<5} {'FAIL':>11}  {shape}")
            continue
        mean_us = stats.mean / 1e3
        means.append(mean_us)
        floor_cols = ""
        if ceilings:
            f = floor_us(ceilings, test.args["m"], test.args["n"], test.args["k"])
            floors.append(f)
            floor_cols = f"{f:>15.2f} {mean_us / f:>8.2f}"
        print(f"{i:<5} {mean_us:>11.2f} {stats.err / 1e3:>9.3f} {stats.runs:>5}  {floor_cols}  {shape}")
    if means and len(means) == len(results):
        line = f"{'geo':<5} {geomean(means):>11.2f} {'':>9} {'':>5}"
        if ceilings:
            line += f"  {geomean(floors):>15.2f} {geomean(means) / geomean(floors):>8.2f}"
        print(line + "  (geometric mean)")


def run_benchmarking(out, worker, tests, submission, timeout, leaderboard: bool) -> int:
    if leaderboard:
        for i, test in enumerate(tests):
            progress(f"warm-up {i + 1}/{len(tests)}")
            _call(worker, "run_benchmark", submission, test.args, False, 50, 5e8, timeout=timeout)
    else:
        progress("warm-up on the first case")
        _call(worker, "run_benchmark", submission, tests[0].args, False, 100, 1e8, timeout=timeout)
    out.log("benchmark-count", len(tests))
    passed, results = True, []
    max_time_ns = 30e9 if leaderboard else 10e9
    for i, test in enumerate(tests):
        progress(f"benchmark {i + 1}/{len(tests)}: {test.spec}")
        out.log(f"benchmark.{i}.spec", test.spec)
        ok, result = _call(worker, "run_benchmark", submission, test.args, leaderboard, 100, max_time_ns, timeout=timeout)
        if ok and not isinstance(result, str):
            _log_stats(out, i, result)
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


def run_profiling(out, worker, tests, submission, timeout) -> int:
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

    from worker import Worker

    out = Protocol(fd)
    worker = Worker(str(HERE))
    try:
        if args.mode == "test":
            return run_testing(out, worker, tests, submission, args.timeout)
        if args.mode in ("benchmark", "leaderboard"):
            return run_benchmarking(out, worker, tests, submission, args.timeout, args.mode == "leaderboard")
        if args.mode == "profile":
            return run_profiling(out, worker, tests, submission, args.timeout)
        return run_diffing(out, worker, tests, submission, args.timeout)
    finally:
        worker.stop()
        out.close()


if __name__ == "__main__":
    sys.exit(main())
