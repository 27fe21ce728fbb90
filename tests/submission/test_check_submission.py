"""tools/check_submission.py: the leaderboard server's gate (its text rules, KernelGuard), applied before a file is sent."""

import importlib.util
import subprocess
import sys

import pytest

from conftest import ROOT
from tools.check_submission import MAX_BYTES, problems

SUBMISSION = ROOT / "submission.py"


def test_the_submission_passes_the_gate():
    assert problems(SUBMISSION) == []


needs_kernelguard = pytest.mark.skipif(
    importlib.util.find_spec("kernelguard") is None,
    reason="needs KernelGuard (pip install kernelguard==0.3.1; make deps installs it where it can)",
)


@needs_kernelguard
def test_make_check_submission_passes_with_kernelguards_verdicts():
    """Each profile's verdict reads as what the server does with the file (it filters on that alone),
    so a pass never follows a line that sounds like a failure."""
    proc = subprocess.run(["make", "-s", "check-submission"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "passes the leaderboard's gate" in proc.stdout
    for profile in ("default", "strict"):
        assert f"submission.py: KernelGuard's {profile} profile lets it through (its notes: classified " in proc.stdout
    assert "suspicious," not in proc.stdout and "FILTER" not in proc.stdout


@needs_kernelguard
def test_kernelguard_fails_an_output_cache_keyed_on_data_pointers():
    """A file that passes the text rules but caches its outputs by the inputs' addresses (tests/planted/)."""
    planted = ROOT / "tests" / "planted" / "output_cache.py"
    assert problems(planted) == []
    proc = subprocess.run(["make", "-s", "check-submission", f"SUBMISSION={planted}"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode != 0 and "FAILS the leaderboard's gate" in proc.stdout
    assert "KernelGuard's default profile would filter it" in proc.stderr and "POINTER_REPLAY" in proc.stdout


def planted(tmp_path, text: str | bytes):
    path = tmp_path / "submission.py"
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


def test_the_banned_word_in_a_comment_fails_with_its_line(tmp_path):
    lines = SUBMISSION.read_text().splitlines()
    lines.insert(3, "# runs on a side STREAM")
    path = planted(tmp_path, "\n".join(lines) + "\n")
    assert problems(path) == [f"{path}:4:18: contains 'stream' (in any case), which the server refuses"]
    proc = subprocess.run(["make", "-s", "check-submission", f"SUBMISSION={path}"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode != 0 and f"{path}:4:18" in proc.stderr


@pytest.mark.parametrize(
    "text,message",
    [
        ("", "the file is empty"),
        ("  \n\n", "the file is empty"),
        (b"x = '\xff'\n", "not UTF-8"),
        ("import numpy\n", "imports 'numpy'"),
        ("def f():\n    from triton import jit\n", "imports 'triton'"),
        ("from . import helper\n", "imports '.'"),
        ("x = (\n", "not valid Python"),
    ],
)
def test_each_rule_fails_on_its_own(tmp_path, text, message):
    found = problems(planted(tmp_path, text))
    assert len(found) == 1 and message in found[0]


def test_a_file_over_the_size_limit_fails(tmp_path):
    path = planted(tmp_path, "x = 1\n" + "#" * MAX_BYTES + "\n")
    assert any("bytes, the limit is 1,000,000" in p for p in problems(path))


def test_the_standard_library_torch_and_task_are_allowed(tmp_path):
    path = planted(tmp_path, "import ctypes, os.path\nimport torch.utils.cpp_extension\nfrom task import input_t\n")
    assert problems(path) == []


def test_a_byte_order_mark_is_taken_as_python_takes_it(tmp_path):
    assert problems(planted(tmp_path, b"\xef\xbb\xbfimport torch\n")) == []


def test_every_file_given_is_checked(tmp_path):
    banned = planted(tmp_path, "import torch\n# a side STREAM\n")
    proc = subprocess.run(
        [sys.executable, "-m", "tools.check_submission", str(ROOT / "template.py"), str(banned)], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 1 and f"{banned}:2:10" in proc.stderr and "template.py" in proc.stdout


def test_help_prints_the_usage_and_checks_nothing():
    proc = subprocess.run([sys.executable, "-m", "tools.check_submission", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("usage:") and "gate" not in proc.stderr
