"""tools/b200_model.py: the B200 estimate's inputs (public figures, tiles, schedules) and its fit."""

import shutil
from collections import Counter

import pytest

from harness.floors import floor_us
from tools import b200_model as model

PROBLEM_SOL_US = (18.833, 10.667, 2.406, 1.525)  # docs/PROBLEM.md, the B200 SOL column
CONFIGS = {"ours-static": model.replace(model.OURS, shapes=model.every_case()), **{name: c for name, (c, _) in model.WORKLOG.items()}}


def test_the_public_figures_reproduce_the_problems_speed_of_light():
    for (m, n, k), sol in zip(model.BENCHMARKS, PROBLEM_SOL_US):
        assert floor_us(model.B200, m, (n,) * len(m), (k,) * len(m)) == pytest.approx(sol, rel=2e-3)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_schedule_runs_each_tile_once_and_stores_each_output_once(name):
    config = CONFIGS[name]
    for case, (m, n, k) in enumerate(model.BENCHMARKS):
        shape = config.shapes[case]
        schedule = model.static_schedule(shape, m, n, k)
        counts = Counter(t for unit in schedule for t in unit)
        assert set(counts) == set(model.tiles(shape, m, n, k)) and set(counts.values()) == {1}
        assert shape.one_tile_per_cta or len(schedule) <= shape.ctas // (2 if shape.pair else 1)
        w = model.work(config, case)
        assert w.store_bytes.sum() * (2 if shape.pair else 1) == pytest.approx(2 * sum(m) * n)


def test_the_column_schedule_launches_the_ctas_the_worklog_gives():
    """v5e: a CTA pair per N column of 256 and as many rows as fit on 148 SMs: 128, 112, 120, 128 CTAs."""
    config = model.WORKLOG["v5e"][0]
    units = [len(model.static_schedule(config.shapes[c], *model.BENCHMARKS[c])) for c in range(4)]
    assert [2 * u for u in units] == [128, 112, 120, 128]


def test_a_case_is_bound_by_dram_or_by_its_slowest_cta():
    params = model.Params()
    w = model.work(CONFIGS["v2"], 0)
    e = model.estimate(CONFIGS["v2"], w, params)
    assert e.us == pytest.approx(params.launch_us + max(e.dram_us, e.slowest_unit_us))
    faster = model.estimate(CONFIGS["v2"], w, model.replace(params, dram_efficiency=1.0, load_bw=10 * params.load_bw))
    assert faster.us < e.us


def test_wider_stores_and_an_unrolled_fill_never_cost_time():
    params = model.Params()
    for case in range(4):
        base = model.estimate(CONFIGS["v2"], model.work(CONFIGS["v2"], case), params).us
        for better in (model.replace(CONFIGS["v2"], store_bytes=64), model.replace(CONFIGS["v2"], fill_unrolled=True)):
            assert model.estimate(better, model.work(better, case), params).us <= base


def test_the_fit_matches_every_worklog_point_within_its_documented_error():
    """docs/perf-log/log.md gives the fit's error per point: rms log error 0.05, none beyond 11%."""
    params, errors = model.fit()
    assert len(errors) == 4 * len(model.WORKLOG)
    assert max(abs(e) for e in errors.values()) < 0.12
    assert sum(abs(e) for e in errors.values()) / len(errors) < 0.06
    assert 0 < params.dram_efficiency <= 1


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the plan's schedule comes from the sm_100a library)")
def test_our_estimate_uses_the_plans_real_schedule():
    for case, (m, n, k) in enumerate(model.BENCHMARKS):
        for forced, fields in enumerate(model.OUR_SHAPES):
            shape = model.Shape(**fields)
            schedule, chosen = model.our_schedule(m, n, k, forced)
            tiles = [t for unit in schedule for t in unit]
            assert chosen == forced and sorted(tiles) == sorted(model.tiles(shape, m, n, k))
            assert len(schedule) <= model.SMS // (2 if shape.pair else 1)
    table = model.case_table(model.OURS, model.Params())
    assert table.count("\n| ") == 1 + len(model.BENCHMARKS)


def test_the_design_search_finds_nothing_worse_than_the_winners_own_shapes():
    """Every shape of the worklog's last version lies in the design space, so the best per case is at
    or below that version's estimate; and the space holds no duplicates."""
    params = model.Params()
    space = model.design_space()
    assert len(space) == len(set(space)) and all(s in space for s in model.WORKLOG["v6b"][0].shapes)
    v6b = model.WORKLOG["v6b"][0]
    for case, (us, shape) in enumerate(model.best_designs(params)):
        assert us <= model.estimate(v6b, model.work(v6b, case), params).us + 1e-9 and shape in space
