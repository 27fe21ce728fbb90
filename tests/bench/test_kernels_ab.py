"""bench/kernels_ab.py (make kernels-ab): what it builds and what it refuses, without a GPU."""

import subprocess
import sys

from conftest import ROOT
from tools.nvcc_build import revision_sources, source_tree, sources


def run(*args):
    return subprocess.run([sys.executable, "-m", "bench.kernels_ab", *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_a_kernel_without_a_name_or_a_name_twice_is_refused():
    for args in (["HEAD"], ["a=HEAD", "a=."]):
        proc = run(*args)
        assert proc.returncode == 2 and "each kernel is NAME=WHAT, each NAME once" in proc.stderr


def test_an_unknown_regime_is_refused():
    proc = run("a=.", "--regimes", "few rows,decode")
    assert proc.returncode == 2 and "not one of" in proc.stderr and "'decode'" in proc.stderr


def test_a_revision_gives_every_file_of_its_csrc_and_the_working_tree_none():
    assert revision_sources(".") is None
    committed = revision_sources("HEAD")
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", "HEAD", "csrc"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert sorted(committed) == sorted(n.removeprefix("csrc/") for n in listed)
    assert "NVFP4_ARCH" in committed["arch.cuh"]


def test_a_revision_is_built_from_its_own_files_only():
    """A revision's csrc/ may have files the working tree's lacks, or lack some it has: its build
    directory holds exactly the revision's files, none taken from the working tree."""
    revision = {name: text for name, text in sources().items() if name != "timeline.cuh"}
    revision["only_there.cuh"] = "#pragma once\n"
    directory, _ = source_tree(None, tree=revision)
    built = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())
    assert built == sorted(revision)


def test_a_name_that_is_no_revision_is_refused_with_a_message():
    import pytest

    with pytest.raises(SystemExit, match="nonesuch123: not a revision"):
        revision_sources("nonesuch123")


def test_a_regimes_summary_gives_the_geomean_and_over_the_floors_when_measured():
    from bench.kernels_ab import regime_summary

    assert regime_summary([40.0, 90.0], None) == "60.00"
    assert regime_summary([40.0, 90.0], [20.0, 60.0]) == "60.00 (1.732x the floor)"
    assert regime_summary([40.0, "n/a (RuntimeError)"], [20.0, 60.0]) == "n/a"
