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
    assert len((ROOT / "README.md").read_text().splitlines()) <= 90


def test_the_template_passes_the_harness(tmp_path):
    spec = tmp_path / "cases.txt"
    spec.write_text("m: [64, 0, 130]; n: [128, 256, 136]; k: [256, 512, 256]; g: 3; seed: 7\n")
    proc = subprocess.run([sys.executable, "eval.py", "test", str(spec), "--submission", "template.py"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("1 of 1 passed")
    assert 20 <= len((ROOT / "template.py").read_text().splitlines()) <= 40


def test_the_readmes_library_example_runs_as_written(tmp_path):
    """The checkpoint the README says how to write, then its example, as written, beside it."""
    made = subprocess.run([sys.executable, str(ROOT / "examples" / "moe_layer.py"), "--tokens", "8", "--save", "model.safetensors"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    text = (ROOT / "README.md").read_text()
    example = text.split("```python\n", 1)[1].split("```", 1)[0]
    proc = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"\(16, \d+\)$", proc.stdout.strip()), proc.stdout
