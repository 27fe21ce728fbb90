"""The deliberately broken builds that the tcgen05 emulation's tests run on a GPU still break what
they name: each edit finds its text in csrc/ exactly once (on any machine, so that a change to
csrc/ that moves the text fails here rather than only on an sm_90 GPU)."""

import pytest
from planted_kernel_bugs import BROKEN, PLANTED

from conftest import ROOT
from tools.nvcc_build import replacing, sources


def edited_files(*edits: tuple[str, str]) -> set[str]:
    original = sources()
    changed = replacing(*edits)
    return {name for name, text in changed.items() if text != original[name]}


@pytest.mark.parametrize("bug", list(BROKEN))
def test_each_layout_bug_edits_one_file_of_csrc(bug):
    assert len(edited_files(BROKEN[bug])) == 1


@pytest.mark.parametrize("bug", list(PLANTED))
def test_each_synchronization_bug_edits_csrc(bug):
    edits = PLANTED[bug][0]
    assert edited_files(*edits)


def test_the_planted_wrong_result_finds_its_text_once_in_submission_py():
    good, _ = BROKEN["scale columns of the next 32 rows"]
    assert (ROOT / "submission.py").read_text().count(good) == 1


def test_an_edit_whose_text_moved_is_refused_with_its_text():
    with pytest.raises(ValueError, match="occurs 0 times in csrc/, not once"):
        replacing(("(t.n_block * S::kCtaGroup + int(rank)) * S::kRowsB", "(t.n_block * S::kCtaGroup) * S::kRowsB"))
