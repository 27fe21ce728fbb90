"""The bench/ scripts at the command line: each explains itself with --help, and on a machine
without a GPU says what it needs instead of failing with a traceback."""

import subprocess
import sys

import pytest
import torch

from conftest import ROOT

SCRIPTS = sorted(p for p in (ROOT / "bench").glob("*.py") if p.name != "__init__.py")
NEEDS_ARGUMENTS = {"kernels_ab.py"}  # refuses to run without its NAME=WHAT arguments (tests/bench/test_kernels_ab.py)


def run(script, *args):
    return subprocess.run([sys.executable, "-m", f"bench.{script.stem}", *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_bench_script_answers_help(script):
    proc = run(script, "--help")
    assert proc.returncode == 0 and proc.stdout.startswith("usage:"), proc.stderr[-400:]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a CUDA GPU (it would run the benchmark)")
@pytest.mark.parametrize("script", [s for s in SCRIPTS if s.name not in NEEDS_ARGUMENTS], ids=lambda p: p.name)
def test_without_a_gpu_a_bench_script_says_what_it_needs(script):
    proc = run(script)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "GPU" in proc.stderr, proc.stderr[-400:]


def test_the_timeline_refuses_cases_that_match_no_case_before_building():
    proc = run(ROOT / "bench" / "timeline.py", "--cases", "E=8, 1-8;decode")
    assert proc.returncode == 2 and "['decode'] match no case" in proc.stderr


def test_the_timeline_reads_one_calls_ctas_from_the_first_entry():
    import numpy as np

    from bench.timeline import call_marks

    marks = np.zeros((1024, 4), dtype=np.uint64)
    marks[:2] = [[1000, 4000, 9000, 9500], [1500, 4200, 8000, 8200]]  # an earlier call's CTAs
    marks[2:4] = [[20000, 23000, 50000, 50400], [20500, 24000, 52000, 52100]]
    np.testing.assert_allclose(call_marks(marks, after=9999), [[0, 3, 30, 30.4], [0.5, 4, 32, 32.1]])
    with pytest.raises(SystemExit, match="no CTA left marks"):
        call_marks(marks, after=20500)
