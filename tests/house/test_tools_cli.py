"""The tools/ modules at the command line: each explains itself with --help and does nothing else,
and a bad argument is one line of usage error, not a traceback."""

import subprocess
import sys

import pytest

from conftest import ROOT

TOOLS = sorted(p.stem for p in (ROOT / "tools").glob("*.py") if "__main__" in p.read_text())
GENERATED = [ROOT / "submission.py", ROOT / "csrc" / "boundary_generated.cuh", ROOT / "csrc" / "sm90" / "wgmma_generated.cuh"]


def run(tool, *args):
    return subprocess.run([sys.executable, "-m", f"tools.{tool}", *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_answers_help_and_writes_nothing(tool):
    before = [p.stat().st_mtime_ns for p in GENERATED]
    proc = run(tool, "--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage:"), proc.stdout[:200] + proc.stderr[-400:]
    assert [p.stat().st_mtime_ns for p in GENERATED] == before


@pytest.mark.parametrize(
    "tool,args,message",
    [
        ("b200_model", ("--config", "bogus"), "invalid choice: 'bogus'"),
        ("check_cuda", ("--arch", "75"), "invalid choice: 75"),
        ("sanitize", ("--limit", "0"), "--limit must be at least 1"),
        ("sanitize", ("--submission", "no/such.py"), "no submission file at no/such.py"),
        ("gen_boundary", ("--bogus",), "unrecognized arguments: --bogus"),
    ],
)
def test_a_bad_argument_is_a_usage_error(tool, args, message):
    proc = run(tool, *args)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-400:]
