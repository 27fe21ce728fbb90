"""tools/check_changed.py (make check-changed): the checks a change needs, from the files it touches."""

import re
import subprocess

from conftest import ROOT
from tools.check_changed import EVERYTHING, ROUTES, checks_for

GLOBAL = {".ci/run", ".clang-format", ".gitignore", "Makefile", "pyproject.toml", "requirements.txt"}  # the build's own: everything


def test_every_tracked_file_has_a_route_or_runs_everything():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    unrouted = {p for p in tracked if not p.startswith("tests/") and checks_for([p]) == list(EVERYTHING)}
    assert unrouted <= GLOBAL, sorted(unrouted - GLOBAL)
    named = {c for _, checks in ROUTES for c in checks if c.startswith("tests/")}
    assert all((ROOT / c).is_file() for c in named), sorted(c for c in named if not (ROOT / c).is_file())


def test_a_change_runs_the_checks_of_its_folders_and_no_others():
    kernel = checks_for(["csrc/sm90/kernel.cuh"])
    assert kernel[:4] == ["make:format-check", "make:check-bundle", "make:check-submission", "make:check-cuda"]
    assert "tests/kernels/test_cuda_host.py" in kernel and "tests/harness/test_eval.py" not in kernel
    assert checks_for(["docs/MOE.md", "README.md"]) == ["tests/house/test_front_door.py", "tests/house/test_check_changed.py"]
    assert checks_for(["tests/library/test_moe.py"]) == ["make:format-check", "tests/library/test_moe.py"]
    assert checks_for(["Makefile", "docs/MOE.md"]) == list(EVERYTHING)  # the suite, not its files one by one
    assert checks_for(["tests/conftest.py"]) == list(EVERYTHING)


def test_changing_md_shows_the_routes_in_their_order():
    table = re.findall(r"^\| `([^`]+)` \|", (ROOT / "docs" / "CHANGING.md").read_text(), re.MULTILINE)
    assert table == [prefix for prefix, _ in ROUTES]
