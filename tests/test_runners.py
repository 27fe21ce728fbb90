"""The worker-side case runners, in process."""
import pytest
import torch

import runners

TINY = {"m": (64, 8), "n": (128, 128), "k": (256, 256), "g": 2, "seed": 5}

ONE_BAD_REPEAT = """
from reference import ref_kernel
seen, corrupted = {}, []

def custom_kernel(data):
    out = ref_kernel(data)
    key = data[0][0][2].data_ptr()
    seen[key] = seen.get(key, 0) + 1
    if seen[key] == 3 and not corrupted:  # the second timed repeat of one input set, once
        corrupted.append(key)
        out[1][0, 0, 0] += 100.0
    return out
"""


@pytest.fixture
def one_bad_repeat(tmp_path):
    path = tmp_path / "one_bad_repeat.py"
    path.write_text(ONE_BAD_REPEAT)
    return str(path)


def test_recheck_catches_one_wrong_output_among_all_repeats(one_bad_repeat):
    result = runners.run_benchmark(one_bad_repeat, TINY, True, 10, 1e12)
    assert isinstance(result, str) and "group 1" in result and "input set" in result


def test_without_recheck_only_the_first_outputs_are_checked(one_bad_repeat, tmp_path):
    copy = tmp_path / "copy.py"
    copy.write_text(ONE_BAD_REPEAT)
    result = runners.run_benchmark(str(copy), TINY, False, 10, 1e12)
    assert isinstance(result, runners.Stats) and result.runs >= 3


def test_benchmark_leaves_the_callers_args_alone():
    args = dict(TINY)
    from conftest import ROOT

    runners.run_benchmark(str(ROOT / "reference.py"), args, False, 3, 1e12)
    assert args == TINY


def test_clone_data_copies_every_tensor():
    t = torch.ones(3)
    data = ([(t, t)], (t,), 4)
    cloned = runners.clone_data(data)
    assert cloned[0][0][0] is not t and torch.equal(cloned[0][0][0], t) and cloned[2] == 4
