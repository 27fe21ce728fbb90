"""tools/official.py (make official): the leaderboard's own files laid out around a submission."""

import subprocess
import sys

import torch
import yaml

from conftest import ROOT
from harness.spec import parse_line
from tools.official import PROBLEM, prepare, spec_lines

TASK = {
    "files": [
        {"name": "submission.py", "source": "@SUBMISSION@"},
        {"name": "task.py", "source": "task.py"},
        {"name": "utils.py", "source": "utils.py"},
        {"name": "reference.py", "source": "reference.py"},
        {"name": "eval.py", "source": "../eval_better_bench_grouped_gemm.py"},
    ],
    "tests": [{"m": [96, 128], "n": [128, 256], "k": [256, 512], "g": 2, "seed": 1111}],
    "benchmarks": [{"m": [128, 384], "n": [4096, 4096], "k": [1536, 1536], "g": 2, "seed": 1111}],
}


EVAL = "from cutlass.cute.nvgpu.common import OpError\nfrom cutlass._mlir.ir import MLIRError\n"


def checkout(tmp_path):
    """A stand-in for a reference-kernels checkout: the problem's task.yml and files, its eval one level up."""
    problem = tmp_path / "ref" / PROBLEM
    problem.mkdir(parents=True)
    (problem / "task.yml").write_text(yaml.safe_dump(TASK))
    for name in ("task.py", "utils.py", "reference.py"):
        (problem / name).write_text(f"# theirs: {name}\n")
    (problem.parent / "eval_better_bench_grouped_gemm.py").write_text(EVAL)
    return tmp_path / "ref"


def test_the_files_are_laid_out_as_the_task_names_them(tmp_path):
    scratch = tmp_path / "scratch"
    spec = prepare(checkout(tmp_path), ROOT / "template.py", "benchmark", our_reference=False, stub_cutlass=False, scratch=scratch)
    assert sorted(p.name for p in scratch.iterdir()) == ["benchmark.txt", "eval.py", "reference.py", "submission.py", "task.py", "utils.py"]
    assert (scratch / "submission.py").read_text() == (ROOT / "template.py").read_text()
    assert (scratch / "eval.py").read_text() == EVAL and (scratch / "reference.py").read_text() == "# theirs: reference.py\n"
    assert [parse_line(line) for line in spec.read_text().splitlines()] == [
        {k: tuple(v) if isinstance(v, list) else v for k, v in case.items()} for case in TASK["benchmarks"]
    ]


def test_our_reference_and_a_cutlass_stub_stand_in_where_asked(tmp_path):
    scratch = tmp_path / "scratch"
    prepare(checkout(tmp_path), ROOT / "submission.py", "test", our_reference=True, stub_cutlass=True, scratch=scratch)
    assert (scratch / "reference.py").read_text() == (ROOT / "reference.py").read_text()
    assert (scratch / "utils.py").read_text() == "# theirs: utils.py\n"
    found = subprocess.run(
        [sys.executable, "-c", EVAL + "print(issubclass(OpError, Exception) and issubclass(MLIRError, Exception))"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(scratch / "stubs")},
        capture_output=True,
        text=True,
    )
    assert found.stdout.strip() == "True", found.stderr


def test_the_spec_lines_read_back_as_the_cases():
    cases = yaml.safe_load((ROOT / "task.yml").read_text())["tests"]
    lines = spec_lines(cases).splitlines()
    assert len(lines) == 10 and parse_line(lines[0]) == {"m": (96, 128), "n": (128, 256), "k": (256, 512), "g": 2, "seed": 1111}


def test_make_official_says_what_it_needs():
    proc = subprocess.run(["make", "-s", "official"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode != 0 and "make official REF=path/to/reference-kernels" in proc.stderr
    if not torch.cuda.is_available():
        proc = subprocess.run([sys.executable, "-m", "tools.official", "--ref", str(ROOT)], cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode == 2 and "the leaderboard's eval needs a CUDA GPU" in proc.stderr
