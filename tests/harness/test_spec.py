import math
import statistics

import pytest

from harness.runners import calculate_stats, should_stop
from harness.spec import SpecError, combine_seed, format_case, parse_line, read_cases


def write(tmp_path, text):
    path = tmp_path / "cases.txt"
    path.write_text(text)
    return str(path)


def test_line_grammar_reads_lists_tuples_ints_and_words():
    assert parse_line("m: [96, 128]; n: (1,2); g: 2; seed: -5; mode: fast") == {
        "m": (96, 128),
        "n": (1, 2),
        "g": 2,
        "seed": -5,
        "mode": "fast",
    }


@pytest.mark.parametrize(
    "line",
    [
        "m: [96, 128]; n: [128 256]; k: [256, 512]; g: 2; seed: 1",  # list without comma
        "m: [96, x]; n: [128, 256]; k: [256, 512]; g: 2; seed: 1",  # non-integer in a list
        "m: [96, 128] n: [128, 256]; k: [256, 512]; g: 2; seed: 1",  # missing ';'
        "m: [96, 128]; n: [128, 256]; k: [256, 512]; g: 2",  # missing seed
        "m: [96]; n: [128, 256]; k: [256, 512]; g: 2; seed: 1",  # m shorter than g
        "m: [96, 128]; n: [128, 256]; k: [256, 512]; g: 2; seed: 1; x: 3",  # unknown key
        "m: 1.5; n: [128]; k: [256]; g: 1; seed: 1",  # a float is no value
        "m: [64]; m: [32]; n: [128]; k: [256]; g: 1; seed: 1",  # a key given twice
    ],
)
def test_bad_lines_are_spec_errors(tmp_path, line):
    with pytest.raises(SpecError):
        read_cases(write(tmp_path, line + "\n"), "tests", None)


@pytest.mark.parametrize(
    "entry,message",
    [
        ('{m: ["a"], n: [128], k: [256], g: 1, seed: 1}', "m must be a list of 1 non-negative integers"),
        ("{m: [64.5], n: [128], k: [256], g: 1, seed: 1}", "m must be a list of 1 non-negative integers"),
        ("{m: [true], n: [128], k: [256], g: 1, seed: 1}", "m must be a list of 1 non-negative integers"),
        ("{m: [64], n: [128], k: [256], g: true, seed: 1}", "g must be a positive integer"),
        ("{m: [64], m: [32], n: [128], k: [256], g: 1, seed: 1}", "m is given twice"),
    ],
)
def test_yaml_values_that_are_not_integers_are_spec_errors(tmp_path, entry, message):
    path = tmp_path / "task.yml"
    path.write_text(f"tests:\n  - {entry}\n")
    with pytest.raises(SpecError, match=message):
        read_cases(str(path), "tests", None)


@pytest.mark.parametrize("name", ["cases.txt", "task.yml"])
def test_a_file_that_is_not_text_is_a_spec_error(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"\xff\xfe m: [64]")
    with pytest.raises(SpecError, match="can't decode|could not read|Could not open"):
        read_cases(str(path), "tests", None)


def test_blank_lines_are_skipped_and_the_line_is_kept_as_spec(tmp_path):
    line = "m: [96, 128]; n: [128, 256]; k: [256, 512]; g: 2; seed: 1111"
    cases = read_cases(write(tmp_path, f"\n{line}\n\n"), "tests", None)
    assert [c.spec for c in cases] == [line]
    assert cases[0].args == {"m": (96, 128), "n": (128, 256), "k": (256, 512), "g": 2, "seed": 1111}


def test_task_yml_sections_give_the_official_cases():
    from conftest import ROOT

    tests = read_cases(str(ROOT / "task.yml"), "tests", None)
    benchmarks = read_cases(str(ROOT / "task.yml"), "benchmarks", None)
    assert len(tests) == 10 and len(benchmarks) == 4
    assert tests[0].spec == "m: [96, 128]; n: [128, 256]; k: [256, 512]; g: 2; seed: 1111"
    assert benchmarks[0].args["m"] == (80, 176, 128, 72, 64, 248, 96, 160)
    assert all(c.args["seed"] == 1111 for c in tests + benchmarks)
    assert parse_line(tests[3].spec) == tests[3].args  # the canonical line parses back to the case


def test_secret_seed_is_combined_with_every_case_seed(tmp_path):
    path = write(tmp_path, "m: [8]; n: [128]; k: [256]; g: 1; seed: 1111\nm: [8]; n: [128]; k: [256]; g: 1; seed: 7\n")
    cases = read_cases(path, "tests", 123456789)
    assert [c.args["seed"] for c in cases] == [combine_seed(1111, 123456789), combine_seed(7, 123456789)]
    assert combine_seed(1111, 123456789) == 1111 + (1111 + 123456789) * (1111 + 123456789 + 1) // 2


def test_format_case_round_trips():
    case = {"m": (1, 2), "n": (128, 256), "k": (256, 256), "g": 2, "seed": 3}
    assert parse_line(format_case(case)) == case


def test_stats_match_the_sample_statistics():
    durations = [10.0, 12.0, 11.0, 15.0]
    stats = calculate_stats(durations)
    assert stats.runs == 4 and stats.mean == 12.0 and stats.best == 10.0 and stats.worst == 15.0
    assert stats.std == pytest.approx(statistics.stdev(durations))
    assert stats.err == pytest.approx(statistics.stdev(durations) / 2)


def test_stopping_rule_needs_three_runs_and_100ms():
    steady = [1000.0] * 3
    assert not should_stop(steady[:2], 2e8, 1e12)  # fewer than 3 repeats
    assert not should_stop(steady, 5e7, 1e12)  # under 100 ms
    assert should_stop(steady, 2e8, 1e12)  # relative error 0 < 0.1%
    noisy = [1000.0, 3000.0, 1000.0, 5000.0]
    assert not should_stop(noisy, 2e8, 1e12)
    assert should_stop(noisy, 2e8, 1e3)  # over the case's time budget
    assert should_stop(noisy, 121e9, 1e12)  # over 120 s of wall time
    assert math.isfinite(calculate_stats([5.0]).std)
