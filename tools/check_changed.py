"""The checks a change needs, from the files it touches (make check-changed; docs/CHANGING.md).

    python3 -m tools.check_changed [--base main] [--dry-run]

The files that differ from BASE (committed since the branch left it, staged, unstaged or untracked)
are mapped by ROUTES, the table docs/CHANGING.md shows, to make targets and test files; each is run
once, the make targets first. A file no route names (the build's own files among them) runs
everything CI runs. --dry-run prints the plan and runs nothing.
"""

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING = ("make:format-check", "make:check-bundle", "make:check-submission", "make:check-cuda", "tests")

# (path prefix, the checks it needs): "make:T" a make target, "tests/..." a test file, "tests" the suite.
ROUTES = [
    (
        "csrc/",
        (
            "make:format-check",
            "make:check-bundle",
            "make:check-submission",
            "make:check-cuda",
            "tests/kernels/test_cuda_host.py",
            "tests/kernels/test_check_cuda.py",
            "tests/kernels/test_boundary.py",
            "tests/submission/test_bundle.py",
            "tests/library/test_kernel_path.py",
            "tests/library/test_moe.py",
            "tests/library/test_self_check.py",
            "tests/kernels/test_tcgen05_emulation.py",
            "tests/kernels/test_planted_kernel_bugs.py",
            "tests/house/test_front_door.py",
        ),
    ),
    (
        "nvfp4/",
        (
            "make:format-check",
            "make:check-bundle",
            "make:check-submission",
            "tests/kernels/test_boundary.py",
            "tests/library/test_library.py",
            "tests/library/test_moe.py",
            "tests/library/test_fused_moe.py",
            "tests/library/test_two_level.py",
            "tests/library/test_checkpoint.py",
            "tests/library/test_self_check.py",
            "tests/library/test_kernel_path.py",
            "tests/submission/test_submission.py",
            "tests/submission/test_bundle.py",
        ),
    ),
    (
        "harness/",
        (
            "make:format-check",
            "tests/harness/test_eval.py",
            "tests/harness/test_runners.py",
            "tests/harness/test_spec.py",
            "tests/harness/test_official.py",
            "tests/bench/test_regimes.py",
        ),
    ),
    ("eval.py", ("make:format-check", "tests/harness/test_eval.py", "tests/harness/test_official.py")),
    (
        "reference.py",
        ("make:format-check", "tests/harness/test_reference.py", "tests/harness/test_eval.py", "tests/harness/test_official.py"),
    ),
    ("task.py", ("make:format-check", "tests/harness/test_reference.py", "tests/harness/test_official.py")),
    ("utils.py", ("make:format-check", "tests/harness/test_reference.py", "tests/harness/test_eval.py")),
    ("task.yml", ("tests/harness/test_spec.py", "tests/harness/test_official.py", "tests/harness/test_eval.py")),
    ("template.py", ("make:format-check", "tests/house/test_front_door.py")),
    ("submission.py", ("make:check-bundle", "make:check-submission", "tests/submission/test_submission.py")),
    ("bench/", ("make:format-check", "tests/bench/test_bench_scripts.py", "tests/bench/test_regimes.py", "tests/bench/test_kernels_ab.py")),
    ("examples/", ("make:format-check", "tests/library/test_fused_moe.py", "tests/house/test_front_door.py")),
    ("tools/__init__.py", ("make:format-check", "tests/submission/test_bundle.py", "tests/house/test_check_changed.py")),
    ("tools/bundle.py", ("make:format-check", "make:check-bundle", "tests/submission/test_bundle.py", "tests/house/test_tools_cli.py")),
    ("tools/gen_wgmma.py", ("make:format-check", "make:check-bundle", "tests/submission/test_bundle.py", "tests/house/test_tools_cli.py")),
    (
        "tools/gen_boundary.py",
        (
            "make:format-check",
            "make:check-bundle",
            "tests/submission/test_bundle.py",
            "tests/kernels/test_boundary.py",
            "tests/house/test_tools_cli.py",
        ),
    ),
    (
        "tools/check_submission.py",
        ("make:format-check", "make:check-submission", "tests/submission/test_check_submission.py", "tests/house/test_tools_cli.py"),
    ),
    ("tools/check_cuda.py", ("make:format-check", "make:check-cuda", "tests/kernels/test_check_cuda.py", "tests/house/test_tools_cli.py")),
    (
        "tools/nvcc_build.py",
        ("make:format-check", "make:check-cuda", "tests/kernels/test_cuda_host.py", "tests/kernels/test_check_cuda.py"),
    ),
    ("tools/cuda_toolkits.py", ("make:format-check", "make:check-cuda", "tests/kernels/test_check_cuda.py")),
    ("tools/k_block_sass.py", ("make:format-check", "tests/kernels/test_cuda_host.py", "tests/house/test_tools_cli.py")),
    ("tools/b200_model.py", ("make:format-check", "tests/kernels/test_b200_model.py", "tests/house/test_tools_cli.py")),
    ("tools/sanitize.py", ("make:format-check", "tests/harness/test_sanitize_driver.py", "tests/house/test_tools_cli.py")),
    ("tools/submit.py", ("make:format-check", "tests/harness/test_submit.py", "tests/house/test_tools_cli.py")),
    ("tools/official.py", ("make:format-check", "tests/harness/test_official.py", "tests/house/test_tools_cli.py")),
    ("tools/dry_run.py", ("make:format-check", "tests/kernels/test_cuda_host.py", "tests/house/test_tools_cli.py")),
    ("tools/check_changed.py", ("make:format-check", "tests/house/test_check_changed.py", "tests/house/test_tools_cli.py")),
    ("docs/", ("tests/house/test_front_door.py", "tests/house/test_check_changed.py")),
    ("README.md", ("tests/house/test_front_door.py",)),
    ("tests/cuda/", ("make:format-check", "make:check-cuda", "tests/kernels/test_tcgen05_emulation.py")),
]


def checks_for(paths: list[str]) -> list[str]:
    """The checks of the changed paths, each once, the make targets first; everything for a path no
    route names, and for a changed test file that file itself (with the suite's shared helpers, everything)."""
    found: list[str] = []
    for path in paths:
        if path.startswith("tests/") and not path.startswith("tests/cuda/"):
            found += ["make:format-check", path] if Path(path).name.startswith("test_") else list(EVERYTHING)
            continue
        routes = [checks for prefix, checks in ROUTES if path == prefix or (prefix.endswith("/") and path.startswith(prefix))]
        found += [c for checks in routes for c in checks] if routes else list(EVERYTHING)
    unique = list(dict.fromkeys(found))
    if "tests" in unique:
        unique = [c for c in unique if not c.startswith("tests/")]
    return sorted(unique, key=lambda c: not c.startswith("make:"))


def changed_paths(base: str) -> list[str]:
    """Files that differ from `base`: committed since the merge base, staged, unstaged, untracked."""

    def git(*args):
        proc = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        if proc.returncode:
            sys.exit(f"git {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout.split()

    merge_base = git("merge-base", base, "HEAD")[0]
    return sorted(set(git("diff", "--name-only", merge_base)) | set(git("ls-files", "--others", "--exclude-standard")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="main", help="the revision the change is measured from (default main)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan only")
    args = parser.parse_args()
    paths = changed_paths(args.base)
    if not paths:
        print(f"nothing differs from {args.base}: no checks to run")
        return 0
    checks = checks_for(paths)
    print(f"{len(paths)} file(s) differ from {args.base}; checks: {', '.join(checks)}", flush=True)
    if args.dry_run:
        return 0
    for target in [c.removeprefix("make:") for c in checks if c.startswith("make:")]:
        if subprocess.run(["make", "-s", target], cwd=ROOT).returncode:
            return 1
    tests = [c for c in checks if c.startswith("tests")]
    return subprocess.run([sys.executable, "-m", "pytest", "-q", *tests], cwd=ROOT).returncode if tests else 0


if __name__ == "__main__":
    sys.exit(main())
