"""The leaderboard's own eval, run on a submission exactly as its server lays the files out.

    python3 -m tools.official --ref PATH [--mode test|benchmark|leaderboard] [--submission submission.py]
    (make official REF=PATH MODE=...)

PATH is a checkout of gpu-mode/reference-kernels (`git clone https://github.com/gpu-mode/reference-kernels`);
nothing of it is copied into this project. Its problems/nvidia/nvfp4_group_gemm/task.yml names the
files the server puts beside the submission (task.py, utils.py, reference.py, and its eval); they are
copied from the checkout into build/official/, with the submission as submission.py. As on the
server, `python3 submission.py` runs first (the compile step, 120 s), then `eval.py MODE` on the
task's tests (test) or benchmarks, its `key: value` results written to POPCORN_FD and printed here.

Two things stand in where the checkout's files cannot run as they are: its reference computes with
FP4 `torch._scaled_mm`, which needs an sm_100-class GPU, so on any other GPU this project's
reference.py (the same inputs and check, an exact decode; it needs only what the leaderboard's
utils.py defines) takes its place; and its eval imports exception types from NVIDIA CUTLASS's
Python package, so where that is not installed stub modules define them. Both are said when they happen. The eval needs a CUDA GPU.
"""

import argparse
import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from harness.floors import geomean

ROOT = Path(__file__).resolve().parent.parent

PROBLEM = Path("problems/nvidia/nvfp4_group_gemm")
SCRATCH = ROOT / "build" / "official"
COMPILE_SECONDS = 120


class OfficialError(Exception):
    pass


def spec_lines(cases: list[dict]) -> str:
    """Cases of a task.yml in the eval's one-case-a-line grammar."""

    def value(v):
        return f"[{', '.join(map(str, v))}]" if isinstance(v, list) else str(v)

    return "".join("; ".join(f"{key}: {value(v)}" for key, v in case.items()) + "\n" for case in cases)


def write_cutlass_stubs(eval_file: Path, stubs: Path) -> list[str]:
    """Modules under `stubs` for what the eval imports from NVIDIA CUTLASS's Python package: each
    name it imports (exception types it only catches) as an Exception subclass. The names stubbed."""
    names = []
    for node in ast.walk(ast.parse(eval_file.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "cutlass":
            parts = node.module.split(".")
            for depth in range(1, len(parts) + 1):
                folder = stubs.joinpath(*parts[:depth])
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "__init__.py").touch()
            with open(stubs.joinpath(*parts) / "__init__.py", "a") as f:
                for alias in node.names:
                    f.write(f'class {alias.name}(Exception):\n    """A stand-in: the eval only catches it."""\n\n\n')
                    names.append(f"{node.module}.{alias.name}")
    return names


def prepare(ref: Path, submission: Path, mode: str, our_reference: bool, stub_cutlass: bool, scratch: Path = SCRATCH) -> Path:
    """Lay the files out in `scratch` as the server does; returns the spec file for `mode`."""
    problem = ref / PROBLEM
    task_file = problem / "task.yml"
    if not task_file.is_file():
        raise OfficialError(f"{ref} is not a checkout of gpu-mode/reference-kernels: no {PROBLEM / 'task.yml'} there")
    task = yaml.safe_load(task_file.read_text())
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    for entry in task["files"]:
        name, source = entry["name"], entry["source"]
        origin = submission if source == "@SUBMISSION@" else (problem / source)
        if name == "reference.py" and our_reference:
            origin = ROOT / "reference.py"
        if not origin.is_file():
            raise OfficialError(f"task.yml names {source} for {name}, and there is no {origin}")
        shutil.copyfile(origin, scratch / name)
    if stub_cutlass:
        write_cutlass_stubs(scratch / "eval.py", scratch / "stubs")
    spec = scratch / f"{mode}.txt"
    spec.write_text(spec_lines(task["tests" if mode == "test" else "benchmarks"]))
    return spec


def run(scratch: Path, mode: str, spec: Path, stubbed: bool) -> int:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(scratch / "stubs") if stubbed else "", os.environ.get("PYTHONPATH", "")])),
    }
    print(f"official: compile step, python3 submission.py (limit {COMPILE_SECONDS} s)", flush=True)
    try:
        compiled = subprocess.run([sys.executable, "submission.py"], cwd=scratch, env=env, timeout=COMPILE_SECONDS)
    except subprocess.TimeoutExpired:
        print(f"official: the compile step ran past {COMPILE_SECONDS} s, which the server fails", file=sys.stderr)
        return 1
    if compiled.returncode:
        print(f"official: the compile step failed (exit {compiled.returncode})", file=sys.stderr)
        return compiled.returncode
    results = scratch / "results.txt"
    print(f"official: python3 eval.py {mode} {spec.name} (the leaderboard's eval; results as its server reads them)", flush=True)
    with open(results, "w") as fd_out:
        proc = subprocess.run(
            [sys.executable, "eval.py", mode, spec.name],
            cwd=scratch,
            pass_fds=(fd_out.fileno(),),
            env={**env, "POPCORN_FD": str(fd_out.fileno())},
        )
    lines = results.read_text()
    print(lines, end="")
    means = [float(line.split(": ", 1)[1]) / 1e3 for line in lines.splitlines() if line.startswith("benchmark.") and ".mean: " in line]
    if means:
        print(f"official: means {', '.join(f'{m:.2f}' for m in means)} us; geometric mean {geomean(means):.2f} us")
    print(
        f"official: eval.py exited {proc.returncode}; results in {results.relative_to(ROOT) if results.is_relative_to(ROOT) else results}"
    )
    return proc.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ref", default="", help="a checkout of gpu-mode/reference-kernels")
    parser.add_argument("--mode", default="test", choices=("test", "benchmark", "leaderboard"))
    parser.add_argument("--submission", default=str(ROOT / "submission.py"))
    args = parser.parse_args()
    if not args.ref:
        print(
            "official: say where a checkout of gpu-mode/reference-kernels is: make official REF=path/to/reference-kernels "
            "(git clone https://github.com/gpu-mode/reference-kernels)",
            file=sys.stderr,
        )
        return 2
    import importlib.util

    import torch

    if not torch.cuda.is_available():
        print(
            "official: the leaderboard's eval needs a CUDA GPU, and there is none here (make run runs this project's harness "
            "on any device)",
            file=sys.stderr,
        )
        return 2
    our_reference = torch.cuda.get_device_capability()[0] < 10
    stub_cutlass = importlib.util.find_spec("cutlass") is None
    if our_reference:
        print(
            "official: this GPU has no FP4 torch._scaled_mm (an sm_100-class GPU has), which the leaderboard's reference uses; "
            "this project's reference.py takes its place (the same inputs and check, an exact decode)",
            flush=True,
        )
    if stub_cutlass:
        print(
            "official: NVIDIA CUTLASS's Python package is not installed; stubs define the exception types the eval imports from it",
            flush=True,
        )
    try:
        spec = prepare(Path(args.ref).expanduser().resolve(), Path(args.submission).resolve(), args.mode, our_reference, stub_cutlass)
    except OfficialError as e:
        print(f"official: {e}", file=sys.stderr)
        return 2
    return run(SCRATCH, args.mode, spec, stub_cutlass)


if __name__ == "__main__":
    sys.exit(main())
