"""eval.py end to end, in subprocesses, on whatever device is there (the CPU in CI)."""
import os
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
    args = [sys.executable, str(ROOT / "eval.py"), mode, str(spec), *extra]
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
    assert proc.stdout.rstrip().endswith("check: pass")


def test_the_default_submission_passes(tmp_path):
    proc, lines = run_eval(tmp_path, "test", TWO_CASES)
    assert proc.returncode == 0, proc.stderr
    assert lines["check"] == "pass"


def test_a_wrong_submission_fails_and_names_the_group(tmp_path):
    wrong = write_submission(tmp_path, (
        "def custom_kernel(data):\n"
        "    out = ref_kernel(data)\n"
        "    out[1][3, 5, 0] += 1.0\n"
        "    return out\n"))
    proc, lines = run_eval(tmp_path, "test", TINY, submission=wrong)
    assert proc.returncode == 112
    assert lines["test.0.status"] == "fail" and lines["check"] == "fail"
    assert "group 1" in lines["test.0.error"] and "group 0" not in lines["test.0.error"]
    assert "(3, 5, 0)" in lines["test.0.error"]


def test_a_crashing_submission_fails_its_case_and_the_next_case_still_runs(tmp_path):
    crash = write_submission(tmp_path, (
        "def custom_kernel(data):\n"
        "    if data[3][0][0] == 64:\n"
        "        os.abort()\n"
        "    return ref_kernel(data)\n"))
    proc, lines = run_eval(tmp_path, "test", TWO_CASES, submission=crash)
    assert proc.returncode == 112
    assert lines["test.0.status"] == "fail" and "SIGABRT" in lines["test.0.error"]
    assert lines["test.1.status"] == "pass"


def test_an_exception_in_the_submission_is_reported(tmp_path):
    raising = write_submission(tmp_path, "def custom_kernel(data):\n    raise RuntimeError('CUDA error: an illegal memory access')\n")
    proc, lines = run_eval(tmp_path, "test", TINY, submission=raising)
    assert proc.returncode == 112 and "illegal memory access" in lines["test.0.error"]


def test_a_hanging_submission_times_out(tmp_path):
    hanging = write_submission(tmp_path, "def custom_kernel(data):\n    time.sleep(600)\n")
    proc, lines = run_eval(tmp_path, "test", TINY, submission=hanging, extra=("--timeout", "20"))
    assert proc.returncode == 112 and "did not finish within 20 s" in lines["test.0.error"]


def test_the_secret_seed_is_hidden_from_the_submission(tmp_path):
    nosy = write_submission(tmp_path, (
        "def custom_kernel(data):\n"
        "    assert 'POPCORN_SEED' not in os.environ, 'secret seed leaked'\n"
        "    return ref_kernel(data)\n"))
    proc, lines = run_eval(tmp_path, "test", TINY, submission=nosy, env={"POPCORN_SEED": "987654321"})
    assert proc.returncode == 0, lines


def test_benchmark_mode_on_a_tiny_case(tmp_path):
    proc, lines = run_eval(tmp_path, "benchmark", TINY, submission=ROOT / "reference.py")
    assert proc.returncode == 0, proc.stderr
    assert lines["benchmark-count"] == "1" and lines["check"] == "pass"
    runs = int(lines["benchmark.0.runs"])
    best, mean, worst = (float(lines[f"benchmark.0.{k}"]) for k in ("best", "mean", "worst"))
    assert runs >= (3 if ON_GPU else 2) and 0 < best <= mean <= worst
    assert {key.split(".")[-1] for key in lines if key.startswith("benchmark.0.")} == {"spec", "runs", "mean", "std", "err", "best", "worst"}
    assert float(lines["benchmark.0.err"]) == pytest.approx(float(lines["benchmark.0.std"]) / runs**0.5)
    assert "mean (us)" in proc.stdout


def test_leaderboard_mode_passes_the_reference(tmp_path):
    proc, lines = run_eval(tmp_path, "leaderboard", TINY, submission=ROOT / "reference.py")
    assert proc.returncode == 0, proc.stderr
    assert lines["benchmark-count"] == "1" and int(lines["benchmark.0.runs"]) >= (3 if ON_GPU else 2) and lines["check"] == "pass"


def test_diff_mode_reports_per_group_errors(tmp_path):
    wrong = write_submission(tmp_path, (
        "def custom_kernel(data):\n"
        "    out = ref_kernel(data)\n"
        "    out[0][1, 2, 0] += 0.5\n"
        "    return out\n"))
    proc, _ = run_eval(tmp_path, "diff", TINY, submission=wrong)
    assert proc.returncode == 112
    group_rows = [line.split() for line in proc.stdout.splitlines() if line.startswith("  0 ") or line.startswith("  1 ")]
    assert group_rows[0][4] == "1" and group_rows[1][4] == "0"  # mismatch counts
    assert "(1, 2)" in proc.stdout


@pytest.mark.parametrize("text", ["m: [64, 8]; n: [128 128]; k: [256, 256]; g: 2; seed: 5\n", "g: 1; seed: 2\n"])
def test_bad_spec_lines_exit_113(tmp_path, text):
    proc, _ = run_eval(tmp_path, "test", text)
    assert proc.returncode == 113 and "invalid test case" in proc.stderr


def test_bad_arguments_exit_2(tmp_path):
    proc, _ = run_eval(tmp_path, "nonsense", TINY)
    assert proc.returncode == 2


def test_sizes_outside_the_contract_are_a_spec_error_before_any_submission_runs(tmp_path):
    never = write_submission(tmp_path, "raise SystemExit('imported')\n")
    proc, lines = run_eval(tmp_path, "test", "m: [64, 8]; n: [128, 128]; k: [100, 200]; g: 2; seed: 5\n", submission=never)
    assert proc.returncode == 113 and lines == {}
    assert proc.stderr.strip().splitlines() == [
        "invalid test case: 'm: [64, 8]; n: [128, 128]; k: [100, 200]; g: 2; seed: 5': every k must be a positive multiple of 64 "
        "(docs/PROBLEM.md, the sizes the contract allows), got [100, 200]"]


def test_a_submission_that_fails_to_import_is_reported_once(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def custom_kernel(data)\n    return data\n")
    proc, lines = run_eval(tmp_path, "test", TWO_CASES, submission=broken)
    assert proc.returncode == 112
    assert proc.stdout.count("failed to import") == 1 and 1 <= proc.stdout.count("SyntaxError") <= 2  # the message and its last line
    assert lines["test.0.status"] == lines["test.1.status"] == "fail" and lines["check"] == "fail"
    assert lines["test.1.error"] == "the submission failed to import: SyntaxError: expected ':' (broken.py, line 1)"


def test_a_closed_popcorn_fd_is_a_clear_error(tmp_path):
    spec = tmp_path / "cases.txt"
    spec.write_text(TINY)
    proc = subprocess.run([sys.executable, str(ROOT / "eval.py"), "test", str(spec)], env={**os.environ, "POPCORN_FD": "97"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip() == "POPCORN_FD=97 is not a file descriptor open for writing (Bad file descriptor)"


@pytest.mark.skipif(ON_GPU, reason="the CPU's shortened benchmark")
def test_a_cpu_benchmark_says_its_times_mean_nothing_and_shows_progress(tmp_path):
    proc, lines = run_eval(tmp_path, "benchmark", TINY, submission=ROOT / "reference.py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("no CUDA GPU: these are CPU times, which do not predict the leaderboard's")
    assert "[eval]   repeat 1/2" in proc.stderr and lines["benchmark.0.runs"] == "2"


def test_strict_mode_passes_the_reference_and_says_so(tmp_path):
    proc, lines = run_eval(tmp_path, "benchmark", TINY, submission=ROOT / "reference.py", extra=("--strict",))
    assert proc.returncode == 0, proc.stderr
    assert "strict: every repeat on fresh clones of the input sets" in proc.stdout and "warning" not in proc.stdout
