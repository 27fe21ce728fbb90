"""What a newcomer meets first: make's default target, the README's size, the template."""

import os
import re
import subprocess
import sys

from conftest import ROOT


def test_plain_make_lists_every_target_and_installs_nothing():
    proc = subprocess.run(["make", "-n"], cwd=ROOT, capture_output=True, text=True)
    assert "pip" not in proc.stdout  # the default target only prints
    listed = subprocess.run(["make", "-s"], cwd=ROOT, capture_output=True, text=True).stdout
    targets = re.findall(r"^([a-z0-9-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert len(targets) > 10 and all(f"make {t} " in listed for t in targets)
    assert len(listed.splitlines()) == len(targets)


def test_the_readme_is_a_front_page():
    """Short, and its quick start says that the test suite takes minutes, not seconds."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 90
    assert re.search(r"^ +make test +#.*minutes", readme, re.MULTILINE)


MEASURED = re.compile(r"\b\d+(\.\d+)? ?(us|ms|TFLOP/s|GB/s)\b|\b\d+\.\d+x\b")


def test_figures_live_in_one_reference_and_its_log():
    """docs/PERF.md holds the current figures (at most 400 lines), docs/perf-log/ the dated log; the
    README quotes none, and no CUDA source cites a document's section (sections move, code stays)."""
    assert MEASURED.search("1.86x faster, 40.6 us") and not MEASURED.search("sm_90a, 16 rows, K % 64")
    assert not MEASURED.search((ROOT / "README.md").read_text())
    assert len((ROOT / "docs" / "PERF.md").read_text().splitlines()) <= 400
    assert (ROOT / "docs" / "perf-log" / "log.md").is_file()
    cited = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in sorted((ROOT / "csrc").rglob("*.cu*"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"section \d", line)
    ]
    assert cited == []


def test_the_template_passes_the_harness(tmp_path):
    spec = tmp_path / "cases.txt"
    spec.write_text("m: [64, 0, 130]; n: [128, 256, 136]; k: [256, 512, 256]; g: 3; seed: 7\n")
    proc = subprocess.run(
        [sys.executable, "eval.py", "test", str(spec), "--submission", "template.py"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("1 of 1 passed")
    assert 20 <= len((ROOT / "template.py").read_text().splitlines()) <= 40


def test_the_readmes_library_example_runs_as_written(tmp_path):
    """The checkpoint the README says how to write, then its example, as written, beside it."""
    made = subprocess.run(
        [sys.executable, "-m", "examples.moe_layer", "--tokens", "8", "--save", "model.safetensors"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # as from the repository's root, writing here
    )
    assert made.returncode == 0, made.stderr
    text = (ROOT / "README.md").read_text()
    example = text.split("```python\n", 1)[1].split("```", 1)[0]
    proc = subprocess.run(
        [sys.executable, "-c", example],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"\(16, \d+\)$", proc.stdout.strip()), proc.stdout


def test_no_hand_written_cuda_file_passes_400_lines():
    """One job a file: the CUDA sources stay short enough to read whole (the generated wgmma table aside)."""
    long = {
        str(p.relative_to(ROOT)): n
        for p in (ROOT / "csrc").rglob("*.cu*")
        if p.name != "wgmma_generated.cuh" and (n := len(p.read_text().splitlines())) > 400
    }
    assert long == {}


def test_the_package_declares_what_it_needs_at_versions_that_were_tested():
    """pyproject.toml: numpy (torch warns on import without it) and a torch floor no newer than the
    version CI pins (the Makefile's TORCH_SPEC), so an install resolves to a tested torch."""
    deps = re.search(r"^dependencies = \[(.*?)\]", (ROOT / "pyproject.toml").read_text(), re.MULTILINE).group(1)
    names = dict(re.match(r'"([a-z_-]+)(?:>=([0-9.]+))?"', d.strip()).groups() for d in deps.split(","))
    pin = re.search(r"TORCH_SPEC\s*\?=\s*torch==([0-9.]+)", (ROOT / "Makefile").read_text()).group(1)
    version = lambda v: tuple(int(x) for x in v.split("."))  # noqa: E731
    assert "numpy" in names and names["torch"] and version(names["torch"]) <= version(pin)
    assert version(names["torch"]) >= (2, 11)
