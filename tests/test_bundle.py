"""tools/bundle.py: submission.py carries exactly the CUDA sources of csrc/, and nvcc names them."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import bundle  # noqa: E402


def test_submission_is_what_the_sources_produce():
    proc = subprocess.run([sys.executable, "tools/bundle.py", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture
def csrc_copy(tmp_path):
    return Path(shutil.copytree(ROOT / "csrc", tmp_path / "csrc"))


def test_an_edit_to_one_source_without_bundling_fails_the_check(csrc_copy):
    current = (ROOT / "submission.py").read_text()
    assert bundle.bundled_submission(current, bundle.bundle(csrc_copy)) == current
    decode = csrc_copy / "sm90" / "decode.cuh"
    decode.write_text(decode.read_text().replace("constexpr float kUnscale = 16384.0f;", "constexpr float kUnscale = 16384.5f;"))
    assert bundle.bundled_submission(current, bundle.bundle(csrc_copy)) != current


def test_a_file_first_included_under_a_conditional_it_does_not_share_is_refused(csrc_copy):
    arch = csrc_copy / "arch.cuh"
    arch.write_text(arch.read_text().replace('#include "launch_params.cuh"\n', "", 1))
    root = csrc_copy / "nvfp4.cu"
    root.write_text(root.read_text().replace('#include "launch_params.cuh"\n', "", 1))
    with pytest.raises(bundle.BundleError, match="first included under other conditionals"):
        bundle.bundle(csrc_copy)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_an_nvcc_error_in_a_source_file_is_reported_at_that_files_line(csrc_copy, tmp_path):
    decode = csrc_copy / "sm90" / "decode.cuh"
    lines = decode.read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "constexpr float kUnscale" in text)
    lines[line - 1] = "constexpr float kUnscale = undeclared_name;"
    decode.write_text("\n".join(lines) + "\n")
    unit = tmp_path / "bundled.cu"
    unit.write_text(bundle.bundle(csrc_copy))
    proc = subprocess.run(["nvcc", "-DNVFP4_ARCH=90", "-std=c++17", "-arch=sm_90a", "-ptx", str(unit), "-o", str(tmp_path / "x.ptx")],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert f'csrc/sm90/decode.cuh({line}): error: identifier "undeclared_name" is undefined' in proc.stdout + proc.stderr


def test_a_project_include_that_is_not_alone_on_its_line_is_refused(csrc_copy):
    arch = csrc_copy / "arch.cuh"
    arch.write_text(arch.read_text().replace('#include "ptx.cuh"\n', '#include "ptx.cuh"  // the PTX wrappers\n', 1))
    with pytest.raises(bundle.BundleError, match="write a project include alone on its line"):
        bundle.bundle(csrc_copy)
