"""tools/bundle.py: submission.py is the nvfp4 package's leaderboard modules and csrc/, generated."""

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from nvfp4.cuda_source import LEADERBOARD_SWAPS, SourceError, translation_unit
from tools import bundle

CURRENT = (ROOT / "submission.py").read_text()


def test_submission_is_what_the_sources_produce():
    proc = subprocess.run([sys.executable, "-m", "tools.bundle", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("generator", ["gen_wgmma", "gen_boundary"])
def test_each_generated_header_is_what_its_generator_writes(generator):
    """csrc/sm90/wgmma_generated.cuh and csrc/boundary_generated.cuh come from tools/gen_wgmma.py and
    tools/gen_boundary.py (nvfp4/boundary.py's table): an edit to either side alone fails here."""
    module = importlib.import_module(f"tools.{generator}")
    assert module.OUT.read_text() == module.generated(), "run make bundle"


@pytest.fixture
def csrc_copy(tmp_path):
    return Path(shutil.copytree(ROOT / "csrc", tmp_path / "csrc"))


@pytest.fixture
def package_copy(tmp_path):
    return Path(shutil.copytree(ROOT / "nvfp4", tmp_path / "nvfp4", ignore=shutil.ignore_patterns("__pycache__")))


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def test_an_edit_to_a_package_module_without_bundling_fails_the_check(package_copy):
    assert bundle.bundled(package_copy) == CURRENT
    edit(package_copy / "self_check.py", "TOLERANCE = 1e-3", "TOLERANCE = 2e-3")
    assert bundle.bundled(package_copy) != CURRENT


def test_an_edit_to_one_cuda_source_without_bundling_fails_the_check(csrc_copy):
    assert bundle.bundled(cuda=translation_unit(csrc_copy, LEADERBOARD_SWAPS)) == CURRENT
    edit(csrc_copy / "sm90" / "decode.cuh", "constexpr float kUnscale = 16384.0f;", "constexpr float kUnscale = 16384.5f;")
    assert bundle.bundled(cuda=translation_unit(csrc_copy, LEADERBOARD_SWAPS)) != CURRENT


def test_the_leaderboard_form_takes_the_default_queue_modules_and_headers():
    assert (
        'def current_queue(device_index: int) -> int:\n    """The default queue\'s handle, whatever the device."""\n    return 0' in CURRENT
    )
    assert '#line 1 "csrc/host/queue_default.cuh"' in CURRENT and "csrc/host/queue.cuh" not in CURRENT
    assert "stream" not in CURRENT.lower()
    assert "stream" in (ROOT / "nvfp4" / "launch_queue.py").read_text() and "stream" in (ROOT / "csrc" / "host" / "queue.cuh").read_text()


def test_a_name_two_modules_define_is_refused(package_copy):
    edit(package_copy / "portable.py", "def blocked_scales(", "def validate(reordered, *_):\n    return reordered\n\n\ndef blocked_scales(")
    with pytest.raises(bundle.BundleError, match="validate is defined by both nvfp4/validate.py and nvfp4/portable.py"):
        bundle.bundled(package_copy)


def test_an_import_of_a_name_the_module_lacks_is_refused(package_copy):
    edit(package_copy / "dispatch.py", "from .validate import validate", "from .validate import validate, _missing")
    with pytest.raises(bundle.BundleError, match="imports _missing from .validate, which does not define it"):
        bundle.bundled(package_copy)


def test_an_import_of_the_package_inside_a_function_is_refused(package_copy):
    edit(package_copy / "dispatch.py", "    if device not in _paths:\n", "    from .layout import matrix\n    if device not in _paths:\n")
    with pytest.raises(bundle.BundleError, match="import other modules of the package at the top level only"):
        bundle.bundled(package_copy)


def test_a_file_first_included_under_a_conditional_it_does_not_share_is_refused(csrc_copy):
    for unconditional in ("arch.cuh", "output.cuh", "experts.cuh", "nvfp4.cu"):
        edit(csrc_copy / unconditional, '#include "launch_params.cuh"\n', "")
    with pytest.raises(SourceError, match="first included under other conditionals"):
        translation_unit(csrc_copy)


def test_a_condition_is_known_by_its_text_in_every_file(csrc_copy):
    """csrc/arch.cuh and csrc/arch_tiles.cuh both open `#if NVFP4_ARCH == 90` over the same headers:
    one condition, so the bundle takes them; the same test written otherwise in one of them is
    another condition to the bundle, which refuses it."""
    assert '#line 1 "csrc/sm90/tiles.cuh"' in translation_unit(csrc_copy)
    edit(csrc_copy / "arch_tiles.cuh", "#if NVFP4_ARCH == 90\n", "#if NVFP4_ARCH + 0 == 90\n")
    with pytest.raises(SourceError, match="first included under other conditionals"):
        translation_unit(csrc_copy)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_an_nvcc_error_in_a_source_file_is_reported_at_that_files_line(csrc_copy, tmp_path):
    decode = csrc_copy / "sm90" / "decode.cuh"
    lines = decode.read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "constexpr float kUnscale" in text)
    lines[line - 1] = "constexpr float kUnscale = undeclared_name;"
    decode.write_text("\n".join(lines) + "\n")
    unit = tmp_path / "bundled.cu"
    unit.write_text(translation_unit(csrc_copy))
    proc = subprocess.run(
        ["nvcc", "-DNVFP4_ARCH=90", "-std=c++17", "-arch=sm_90a", "-ptx", str(unit), "-o", str(tmp_path / "x.ptx")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
    assert f'csrc/sm90/decode.cuh({line}): error: identifier "undeclared_name" is undefined' in proc.stdout + proc.stderr


def test_a_project_include_that_is_not_alone_on_its_line_is_refused(csrc_copy):
    edit(csrc_copy / "arch.cuh", '#include "ptx.cuh"\n', '#include "ptx.cuh"  // the PTX wrappers\n')
    with pytest.raises(SourceError, match="write a project include alone on its line"):
        translation_unit(csrc_copy)
