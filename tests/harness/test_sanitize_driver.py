"""tools/sanitize.py, the workload of `make sanitize`, without the sanitizer (on the CPU in CI)."""

from conftest import ROOT
from tools import sanitize


def test_the_submission_passes_every_input_three_times(capsys):
    assert sanitize.main(["--submission", str(ROOT / "submission.py")]) == 0
    assert "14 inputs checked: every call matched the reference (3 calls each)" in capsys.readouterr().out


def test_an_element_left_unwritten_fails_through_the_poisoned_output(tmp_path, capsys):
    candidate = tmp_path / "leaves_one_element.py"
    candidate.write_text(
        "from reference import ref_kernel\n\n"
        "def custom_kernel(data):\n"
        "    c = data[0][0][2]\n"
        "    before = c.view(-1)[0].clone()  # what the caller left there\n"
        "    out = ref_kernel(data)\n"
        "    c.view(-1)[0] = before  # as if the kernel never wrote it\n"
        "    return out\n"
    )
    assert sanitize.main(["--submission", str(candidate)]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_limit_checks_only_the_first_inputs(capsys):
    assert sanitize.main(["--submission", str(ROOT / "submission.py"), "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 inputs checked: every call matched" in out and out.count("ok   ") == 2
