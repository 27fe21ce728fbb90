"""eval.py end to end, in subprocesses, on whatever device is there (the CPU in CI)."""

import os
import re
import subprocess
import sys

import pytest
import torch

from conftest import ROOT

ON_GPU = torch.cuda.is_available()

TINY = "m: [64, 8]; n: [128, 128]; k: [256, 256]; g: 2; seed: 5\n"
TWO_CASES = TINY + "m: [24]; n: [256]; k: [512]; g: 1; seed: 6\n"


def run_eval(tmp_path, mode, spec_text, submission=None, env=None, extra=()):
    spec = tmp_path / "cases.txt"
    spec.write_text(spec_text)
    fd_file = tmp_path / "popcorn.txt"
    args = [sys.executable, str(ROOT / "eval.py"), mode, *([*extra, str(spec)] if mode == "compare" else [str(spec), *extra])]
    if submission:
        args += ["--submission", str(submission)]
    with open(fd_file, "w") as fd_out:
        full_env = {**os.environ, "POPCORN_FD": str(fd_out.fileno()), **(env or {})}
        proc = subprocess.run(args, env=full_env, pass_fds=(fd_out.fileno(),), capture_output=True, text=True, timeout=600)
    lines = dict(line.split(": ", 1) for line in fd_file.read_text().splitlines())
    return proc, lines


def write_submission(tmp_path, body):
    path = tmp_path / "candidate.py"
    path.write_text("import os, time\nimport torch\nfrom reference import ref_kernel\n\n" + body)
    return path


def test_reference_passes_as_a_submission_with_protocol_lines(tmp_path):
    proc, lines = run_eval(tmp_path, "test", TWO_CASES, submission=ROOT / "reference.py")
    assert proc.returncode == 0, proc.stderr
    assert lines["test-count"] == "2"
    assert lines["test.0.spec"] == TINY.strip() and lines["test.0.status"] == "pass"
    assert lines["test.1.status"] == "pass" and lines["check"] == "pass"
    assert proc.stdout.rstrip().endswith("\n2 of 2 passed")
    # Readable lines count cases as the progress lines do, from 1 (the protocol's keys count from 0).
    assert [line.split()[:3] for line in proc.stdout.splitlines() if line.startswith("test ")] == [
        ["test", "1/2", "pass"],
        ["test", "2/2", "pass"],
    ]
    assert "[eval] test 1/2:" in proc.stderr


def test_the_default_submission_passes_and_names_the_device_and_its_path(tmp_path):
    proc, lines = run_eval(tmp_path, "test", TWO_CASES)
    assert proc.returncode == 0, proc.stderr
    assert lines["check"] == "pass"
    if not ON_GPU:
        assert "ran on: no GPU (the CPU); path: portable PyTorch path\n" in proc.stdout
    else:
        assert "; path: sm_" in proc.stdout


def test_a_wrong_submission_fails_and_names_the_group(tmp_path):
    wrong = write_submission(
        tmp_path, ("def custom_kernel(data):\n    out = ref_kernel(data)\n    out[1][3, 5, 0] += 1.0\n    return out\n")
    )
    proc, lines = run_eval(tmp_path, "test", TINY, submission=wrong)
    assert proc.returncode == 112
    assert lines["test.0.status"] == "fail" and lines["check"] == "fail"
    assert "group 1" in lines["test.0.error"] and "group 0" not in lines["test.0.error"]
    assert "(3, 5, 0)" in lines["test.0.error"]  # the protocol line, worded as the leaderboard's check words it
    said = [line.strip() for line in proc.stdout.splitlines() if "elements wrong" in line]
    assert len(said) == 1 and said[0].startswith("group 1: 1 of 1,024 elements wrong; the first, at (3, 5, 0), is ")
    got, expected = said[0].split(" is ")[1].split(", expected ")
    assert float(got) == float(expected) + 1.0
    assert proc.stdout.rstrip().endswith("\n0 of 1 passed")


def test_a_crashing_submission_fails_its_case_and_the_next_case_still_runs(tmp_path):
    crash = write_submission(
        tmp_path, ("def custom_kernel(data):\n    if data[3][0][0] == 64:\n        os.abort()\n    return ref_kernel(data)\n")
    )
    proc, lines = run_eval(tmp_path, "test", TWO_CASES, submission=crash)
    assert proc.returncode == 112
    assert lines["test.0.status"] == "fail" and "SIGABRT" in lines["test.0.error"]
    assert lines["test.1.status"] == "pass"


def test_an_exception_in_the_submission_is_told_once_with_its_traceback_and_a_line_a_case(tmp_path):
    raising = write_submission(tmp_path, "def custom_kernel(data):\n    raise RuntimeError('CUDA error: an illegal memory access')\n")
    proc, lines = run_eval(tmp_path, "test", TWO_CASES, submission=raising)
    assert proc.returncode == 112 and "illegal memory access" in lines["test.0.error"] and "illegal memory access" in lines["test.1.error"]
    assert proc.stdout.count("Traceback (most recent call last)") == 1 and 'candidate.py", line 6, in custom_kernel' in proc.stdout
    assert "harness/" not in proc.stdout  # the traceback starts at the submission's own frame
    assert proc.stdout.count("      RuntimeError: CUDA error: an illegal memory access") == 2
    assert proc.stdout.rstrip().endswith("\n0 of 2 passed")


def test_a_submission_without_custom_kernel_is_told_once(tmp_path):
    empty = write_submission(tmp_path, "def kernel(data):\n    return ref_kernel(data)\n")
    proc, lines = run_eval(tmp_path, "test", TWO_CASES, submission=empty)
    assert proc.returncode == 112 and "defines no custom_kernel(data) function" in lines["test.0.error"]
    assert proc.stdout.count("defines no custom_kernel") == 1 and proc.stdout.rstrip().endswith("\n0 of 2 passed")


def test_a_hanging_submission_times_out(tmp_path):
    hanging = write_submission(tmp_path, "def custom_kernel(data):\n    time.sleep(600)\n")
    proc, lines = run_eval(tmp_path, "test", TINY, submission=hanging, extra=("--timeout", "8"))
    assert proc.returncode == 112 and "did not finish within 8 s" in lines["test.0.error"]


def test_the_secret_seed_is_hidden_from_the_submission(tmp_path):
    nosy = write_submission(
        tmp_path,
        ("def custom_kernel(data):\n    assert 'POPCORN_SEED' not in os.environ, 'secret seed leaked'\n    return ref_kernel(data)\n"),
    )
    proc, lines = run_eval(tmp_path, "test", TINY, submission=nosy, env={"POPCORN_SEED": "987654321"})
    assert proc.returncode == 0, lines


def test_benchmark_mode_on_a_tiny_case(tmp_path):
    proc, lines = run_eval(tmp_path, "benchmark", TINY, submission=ROOT / "reference.py")
    assert proc.returncode == 0, proc.stderr
    assert lines["benchmark-count"] == "1" and lines["check"] == "pass"
    runs = int(lines["benchmark.0.runs"])
    best, mean, worst = (float(lines[f"benchmark.0.{k}"]) for k in ("best", "mean", "worst"))
    assert runs >= (3 if ON_GPU else 2) and 0 < best <= mean <= worst
    assert {key.split(".")[-1] for key in lines if key.startswith("benchmark.0.")} == {
        "spec",
        "runs",
        "mean",
        "std",
        "err",
        "best",
        "worst",
    }
    assert float(lines["benchmark.0.err"]) == pytest.approx(float(lines["benchmark.0.std"]) / runs**0.5)
    header = next(line for line in proc.stdout.splitlines() if line.startswith("case "))
    assert header.split()[:3] == ["case", "mean", "+-"]
    assert proc.stdout.rstrip().endswith("\n1 of 1 passed")


def test_leaderboard_mode_passes_the_reference(tmp_path):
    proc, lines = run_eval(tmp_path, "leaderboard", TINY, submission=ROOT / "reference.py")
    assert proc.returncode == 0, proc.stderr
    assert lines["benchmark-count"] == "1" and int(lines["benchmark.0.runs"]) >= (3 if ON_GPU else 2) and lines["check"] == "pass"


def test_diff_mode_reports_per_group_errors(tmp_path):
    wrong = write_submission(
        tmp_path, ("def custom_kernel(data):\n    out = ref_kernel(data)\n    out[0][1, 2, 0] += 0.5\n    return out\n")
    )
    proc, _ = run_eval(tmp_path, "diff", TINY, submission=wrong)
    assert proc.returncode == 112
    group_rows = [line.split() for line in proc.stdout.splitlines() if line.split()[:1] in (["0"], ["1"])]
    assert group_rows[0][4] == "1" and group_rows[1][4] == "0"  # mismatch counts
    assert "(1, 2)" in proc.stdout


@pytest.mark.parametrize("text", ["m: [64, 8]; n: [128 128]; k: [256, 256]; g: 2; seed: 5\n", "g: 1; seed: 2\n"])
def test_bad_spec_lines_exit_113(tmp_path, text):
    proc, _ = run_eval(tmp_path, "test", text)
    assert proc.returncode == 113 and "invalid test case" in proc.stderr


def test_bad_arguments_exit_2(tmp_path):
    proc, _ = run_eval(tmp_path, "nonsense", TINY)
    assert proc.returncode == 2


@pytest.mark.parametrize("option", [("--strict",), ("--submission", "submission.py")])
def test_compare_refuses_the_options_it_has_no_use_for(tmp_path, option):
    """compare names its two files and times them one way: --submission or --strict would be ignored."""
    proc, _ = run_eval(tmp_path, "compare", TINY, extra=(str(ROOT / "reference.py"), str(ROOT / "template.py"), *option))
    assert proc.returncode == 2 and f"unrecognized arguments: {option[0]}" in proc.stderr


@pytest.mark.parametrize("timeout", ["0", "-1", "nan"])
def test_a_timeout_that_is_not_positive_is_a_bad_argument(tmp_path, timeout):
    proc, _ = run_eval(tmp_path, "test", TINY, extra=("--timeout", timeout))
    assert proc.returncode == 2 and "--timeout must be a positive number of seconds" in proc.stderr


@pytest.mark.parametrize("mode", ["diff", "profile"])
def test_an_import_failure_is_told_in_the_lines_of_the_mode_that_ran(tmp_path, mode):
    broken = write_submission(tmp_path, "raise RuntimeError('no import')\n")
    proc, _ = run_eval(tmp_path, mode, TINY, submission=broken)
    assert f"{mode} 1/1 FAIL" in proc.stdout and "test 1/1" not in proc.stdout


def test_sizes_outside_the_contract_are_a_spec_error_before_any_submission_runs(tmp_path):
    never = write_submission(tmp_path, "raise SystemExit('imported')\n")
    proc, lines = run_eval(tmp_path, "test", "m: [64, 8]; n: [128, 128]; k: [100, 200]; g: 2; seed: 5\n", submission=never)
    assert proc.returncode == 113 and lines == {}
    assert proc.stderr.strip().splitlines() == [
        "invalid test case: 'm: [64, 8]; n: [128, 128]; k: [100, 200]; g: 2; seed: 5': every k must be a positive multiple of 64 "
        "(docs/PROBLEM.md, the sizes the contract allows), got [100, 200]"
    ]


def test_a_submission_that_fails_to_import_is_reported_once(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def custom_kernel(data)\n    return data\n")
    proc, lines = run_eval(tmp_path, "test", TWO_CASES, submission=broken)
    assert proc.returncode == 112
    assert (
        proc.stdout.count("failed to import:") == 1 and proc.stdout.count("the submission failed to import") == 2
    )  # once, then a line a case
    assert lines["test.0.status"] == lines["test.1.status"] == "fail" and lines["check"] == "fail"
    assert lines["test.1.error"] == "the submission failed to import: SyntaxError: expected ':' (broken.py, line 1)"
    assert "<frozen" not in proc.stdout and proc.stdout.count("expected ':'") == 1  # no importlib frames, the error once


def test_a_closed_popcorn_fd_is_a_clear_error(tmp_path):
    spec = tmp_path / "cases.txt"
    spec.write_text(TINY)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "eval.py"), "test", str(spec)],
        env={**os.environ, "POPCORN_FD": "97"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.strip() == "POPCORN_FD=97 is not a file descriptor open for writing (Bad file descriptor)"


@pytest.mark.skipif(ON_GPU, reason="needs a machine without a GPU (the CPU's shortened benchmark)")
def test_a_cpu_benchmark_says_once_that_its_times_mean_nothing_and_shows_progress(tmp_path):
    proc, lines = run_eval(tmp_path, "benchmark", TWO_CASES, submission=ROOT / "reference.py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("no CUDA GPU: these are CPU times, which do not predict the leaderboard's")
    assert (proc.stdout + proc.stderr).count("these are CPU times") == 1
    assert "[eval]   repeat 1/2" in proc.stderr and lines["benchmark.0.runs"] == "2"
    assert "device: no GPU (the CPU)" in proc.stdout and "floor" not in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.split()[:1] in (["0"], ["1"], ["geo"])]
    # the mean column aligned whatever unit each row's time takes (a CPU run here is 0.4-1.5 ms a call)
    assert len(rows) == 3 and len({re.search(r" (us|ms|s) ", line).end() for line in rows}) == 1


def test_compare_times_two_submissions_and_gives_per_case_ratios(tmp_path):
    proc, lines = run_eval(tmp_path, "compare", TWO_CASES, extra=(str(ROOT / "reference.py"), str(ROOT / "template.py")))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    header = next(line for line in proc.stdout.splitlines() if line.startswith("case "))
    assert header.split()[:6] == ["case", "A", "mean", "B", "mean", "B"]
    rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines() if line.split()[:1] in (["0"], ["1"], ["geo"])}
    assert set(rows) == {"0", "1", "geo"} and all(float(row[5]) > 0 for row in rows.values())
    assert lines["check"] == "pass" and proc.stdout.rstrip().endswith("\n2 of 2 passed")


def test_compare_checks_both_sides_first(tmp_path):
    wrong = write_submission(tmp_path, "def custom_kernel(data):\n    out = ref_kernel(data)\n    out[0][0, 0, 0] += 1.0\n    return out\n")
    proc, lines = run_eval(tmp_path, "compare", TINY, extra=(str(ROOT / "reference.py"), str(wrong)))
    assert proc.returncode == 112 and "compare 1/1 FAIL" in proc.stdout and "B failed" in proc.stdout
    assert lines["check"] == "fail" and proc.stdout.rstrip().endswith("\n0 of 1 passed")


def test_strict_mode_passes_the_reference_and_says_so(tmp_path):
    proc, lines = run_eval(tmp_path, "benchmark", TINY, submission=ROOT / "reference.py", extra=("--strict",))
    assert proc.returncode == 0, proc.stderr
    assert "strict: every repeat on fresh clones of the input sets" in proc.stdout and "warning" not in proc.stdout
