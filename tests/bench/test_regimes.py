"""bench/regimes.py's table (make regimes): the shapes it times and the floors it holds them to."""

import sys

from bench.regimes import floor_us, regime_cases
from conftest import ROOT
from harness.floors import KNOWN_GPUS, case_flop

BYTES_PER_S, FLOP_PER_S = KNOWN_GPUS["H200"].bytes_per_s, KNOWN_GPUS["H200"].flop_per_s


def test_the_few_rows_shapes_span_the_family_the_issue_names():
    few = [args for regime, _, args in regime_cases() if regime == "few rows"]
    assert len(few) >= 8
    for args in few:
        assert 8 <= args["g"] <= 64 and all(0 <= m <= 32 for m in args["m"])
        assert all(2048 <= x <= 7168 for x in args["n"] + args["k"])
    assert {a["g"] for a in few} >= {8, 64} and {a["n"][0] for a in few} >= {2048, 7168} and {a["k"][0] for a in few} >= {2048, 7168}
    assert any(0 in a["m"] for a in few)


def test_a_floor_counts_the_active_experts_only():
    with_empty = {"m": [0, 5, 0, 17], "n": [4096] * 4, "k": [7168] * 4}
    active = {"m": [5, 17], "n": [4096] * 2, "k": [7168] * 2}
    for regime in ("few rows", "benchmark"):
        assert floor_us(regime, with_empty, BYTES_PER_S, FLOP_PER_S) == floor_us(regime, active, BYTES_PER_S, FLOP_PER_S)
    b_bytes = 2 * (4096 * 7168 / 2 + 4096 * 7168 / 16)  # the two experts' B and scales: most of the bytes
    assert floor_us("few rows", active, BYTES_PER_S, FLOP_PER_S) > 1e6 * b_bytes / BYTES_PER_S


def test_outside_the_few_rows_regime_the_larger_of_the_two_floors_holds():
    many = [args for regime, _, args in regime_cases() if regime == "many rows"][0]
    assert floor_us("many rows", many, BYTES_PER_S, FLOP_PER_S) == 1e6 * case_flop(many["m"], many["n"], many["k"]) / FLOP_PER_S
    assert floor_us("few rows", many, BYTES_PER_S, FLOP_PER_S) < floor_us("many rows", many, BYTES_PER_S, FLOP_PER_S)


def test_an_unknown_regime_is_refused_before_anything_is_timed():
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "bench.regimes", "--regimes", "many rows,decode"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert proc.returncode == 2 and "not one of" in proc.stderr and "'decode'" in proc.stderr


def test_a_progress_line_shows_the_repeats_behind_a_mean():
    from bench.regimes import spread
    from harness.runners import Stats

    assert spread(Stats(runs=7, mean=160e3, std=1e3, err=4e2, best=158.3e3, worst=191.1e3)) == " (7 repeats, 158.30-191.10)"
    assert spread("n/a (RuntimeError: no kernel)") == ""


def test_a_repeat_over_three_times_the_best_is_marked_as_a_stall():
    from bench.peers import stalled
    from bench.regimes import spread
    from harness.runners import Stats

    slow = Stats(runs=100, mean=234.25e3, std=5e5, err=5e4, best=180.25e3, worst=5428.19e3)  # perf-log/log.md section 30
    assert stalled(slow) and spread(slow) == " (100 repeats, 180.25-5428.19) !"
    assert not stalled(Stats(runs=26, mean=182.1e3, std=1e3, err=2e2, best=181.09e3, worst=185.01e3))
    assert not stalled("n/a (RuntimeError: no kernel)")
