"""The worker-side case runners, in process."""

import pytest
import torch

from harness import runners

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
    assert isinstance(result, runners.CaseTiming) and result.stats.runs >= 3


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


RETURNS_NEW_TENSORS = """
from reference import ref_kernel

def custom_kernel(data):
    return [c.float().clone() for c in ref_kernel(data)]
"""


def test_strict_mode_warns_about_outputs_that_are_not_the_given_c_in_fp16(tmp_path):
    path = tmp_path / "new_tensors.py"
    path.write_text(RETURNS_NEW_TENSORS)
    result = runners.run_benchmark(str(path), TINY, True, 4, 1e12, sets=3, strict=True)
    assert isinstance(result, runners.CaseTiming), result
    assert result.warnings == [
        "group 0: the output is not the given c written in place",
        "group 0: the output is torch.float32, not float16",
        "group 1: the output is not the given c written in place",
        "group 1: the output is torch.float32, not float16",
    ]


SEES_EACH_OBJECT = """
from reference import ref_kernel
seen = []  # every call's A tensor of group 0, kept alive (so no id is reused)

def custom_kernel(data):
    seen.append(data[0][0][0])
    return ref_kernel(data)
"""


def timed_calls(tmp_path, name, strict):
    """(objects, fingerprints) of the A tensors of every timed repeat, 4 input sets each."""
    path = tmp_path / name
    path.write_text(SEES_EACH_OBJECT)
    result = runners.run_benchmark(str(path), TINY, False, 5, 1e12, sets=4, strict=strict)
    assert isinstance(result, runners.CaseTiming) and result.warnings == []
    seen = runners.load_kernel(str(path)).__globals__["seen"][4:]  # after the 4 checked first calls
    repeats = [seen[i : i + 4] for i in range(0, len(seen), 4)]
    return repeats, [[int(a.view(torch.uint8).sum()) for a in r] for r in repeats]


def test_strict_mode_gives_every_repeat_fresh_inputs_in_a_shuffled_order(tmp_path):
    repeats, prints = timed_calls(tmp_path, "sees.py", strict=True)
    assert len(repeats) >= 3 and len({id(a) for r in repeats for a in r}) == 4 * len(repeats)  # never the same object twice
    assert all(sorted(p) == sorted(prints[0]) for p in prints)  # every set once per repeat
    assert len({tuple(p) for p in prints}) > 1  # in more than one order


def test_without_strict_every_repeat_sees_the_same_objects_in_order(tmp_path):
    repeats, prints = timed_calls(tmp_path, "sees_same.py", strict=False)
    assert len(repeats) >= 3 and all([id(a) for a in r] == [id(a) for a in repeats[0]] for r in repeats)


class Recorder:
    """Stands in for the GPU-side steps of a timed repeat and records their order."""

    def __init__(self, monkeypatch):
        self.events = []
        recorder = self
        monkeypatch.setattr(runners, "synchronize", lambda: self.events.append("synchronize"))
        monkeypatch.setattr(runners, "clear_l2_cache", lambda: self.events.append("small flush"))

        class Timer:
            def __enter__(self):
                recorder.events.append("start event")
                return self

            def __exit__(self, *exc):
                recorder.events.append("end event")
                self.ns = 1000.0

        monkeypatch.setattr(runners, "BatchTimer", Timer)

    def flush(self):
        self.events.append("leaderboard flush")

    def call(self, data):
        self.events.append("call")


def test_leaderboard_timing_has_no_synchronize_between_its_flush_and_the_start_event(monkeypatch):
    r = Recorder(monkeypatch)
    runners.time_calls(r.call, [None, None], 2, 1e12, flush=r.flush)
    assert r.events == ["synchronize", "leaderboard flush", "start event", "call", "call", "end event"] * 2


def test_host_included_timing_synchronizes_after_its_flush(monkeypatch):
    r = Recorder(monkeypatch)
    runners.time_calls(r.call, [None], 2, 1e12)
    assert r.events == ["synchronize", "small flush", "synchronize", "start event", "call", "end event"] * 2
