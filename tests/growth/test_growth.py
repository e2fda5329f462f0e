"""How the cost grows, on numbers whose answer is known: the points of a sweep, the fitted
costs, the crossovers and their confirmations, the count lines, the budget and the
analysis of a run's records. No measurement: samples are made around known costs (the
growth module's "fake clock"), so the tolerances are about the arithmetic only.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from scanbench.api import Counts, InputError, Record, UnknownNameError
from scanbench.growth.analysis import analyse
from scanbench.growth.budget import PREDICTED, decide, part_measured
from scanbench.growth.count_lines import count_lines, priced_line
from scanbench.growth.crossover import CONFIRMED, CONTRADICTED, TIE, confirm, crossings, trend
from scanbench.growth.fit import fit_costs, predict_call_s
from scanbench.growth.points import GrowSpec, parse_grow, sweep_of
from scanbench.sources import file_source, load
from tests.support.paths import SCENARIO_FILES

FILES = SCENARIO_FILES
GROWING = file_source(FILES / "growing.py")
STEPS = file_source(FILES / "steps.py")
NOISE = 0.03  # relative spread of the made-up samples (a quiet machine's)


def samples_of(seconds: float, rng: np.random.Generator, count: int = 40) -> np.ndarray:
    return seconds * np.exp(rng.normal(0.0, NOISE, count))


def line_samples(fixed: float, per_unit: float, units, exponent: float = 1.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [samples_of(fixed + per_unit * x**exponent, rng) for x in units]


# -- points ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("population=2..64", (2, 4, 8, 16, 32, 64)),
        ("population=2..64:x2", (2, 4, 8, 16, 32, 64)),
        ("n=10..10000:4", (10, 100, 1000, 10000)),
        ("batch=1000..100000:x3", (1000, 3000, 9000, 27000, 100000)),  # 81000 merged
        ("n=1..3", (1, 2, 3)),
        ("n=2..5", (2, 5)),  # 4 is closer to 5 than half a step: merged
    ],
)
def test_grow_points_are_geometric_from_start_to_stop(text, values):
    assert parse_grow(text).values() == values


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("population", "expected AXIS=START..STOP"),
        ("population=8..2", "START must be >= 1 and below STOP"),
        ("population=0..8", "START must be >= 1"),
        ("population=2..8:1", "POINTS must be 2 .. 64"),
        ("population=2..8:x1", "factor after x must be a number > 1"),
        ("population=2..8:x1.2.3", "factor after x must be a number > 1"),
        ("population=1..1000000:x1.01", "more than 64 points"),
    ],
)
def test_a_bad_grow_spec_is_one_line_naming_the_option(text, says):
    with pytest.raises(InputError) as error:
        parse_grow(text)
    assert says in str(error.value) and str(error.value).startswith("--grow")
    assert "\n" not in str(error.value)


def test_a_sweep_measures_the_base_size_at_its_own_value_and_names_the_others():
    scenario = load(GROWING)
    sweep = sweep_of(GrowSpec("n", 1, 64, factor=4), scenario, GROWING, "default", "float64")
    assert sweep.values == (1, 4, 16, 64)  # default has n = 16: already a point
    sweep = sweep_of(GrowSpec("n", 1, 64, factor=8), scenario, GROWING, "default", "float64")
    assert sweep.values == (1, 8, 16, 64)  # the user's own size added
    assert [sweep.size_name(v) for v in sweep.values] == [
        "default@n=1", "default@n=8", "default", "default@n=64"
    ]  # fmt: skip
    assert scenario.size("default@n=8")["n"] == 8
    assert sweep.value_of("default@n=8", {"n": 8}) == 8
    assert sweep.value_of("smoke@n=8", {"n": 8}) is None  # another base
    with pytest.raises(UnknownNameError, match=r"unknown axis 'm'.*choose one of: n"):
        sweep_of(GrowSpec("m", 1, 8), scenario, GROWING, "default", "float64")


def test_bundled_scenarios_declare_their_axes():
    tridiagonal, mppi = (
        load("scanbench.scenarios.tridiagonal:SCENARIO"),
        load("scanbench.scenarios.mppi_tuning:SCENARIO"),
    )
    assert set(tridiagonal.axes) == {"batch", "n"}
    assert set(mppi.axes) == {"population", "samples", "horizon", "generations"}
    grown = mppi.size("smoke@population=5")
    assert grown["population"] == 5 and grown["samples"] == mppi.size("smoke")["samples"]
    # a backend that runs only at smoke runs at the sizes grown from it
    assert mppi.backend("sequential-eager").runs_at("smoke@population=5")
    assert not mppi.backend("sequential-eager").runs_at("default@population=5")
    with pytest.raises(InputError, match="takes integers >= 2"):
        mppi.size("smoke@population=1")


# -- fit ------------------------------------------------------------------------------


def test_the_fit_recovers_a_known_fixed_and_per_unit_cost_within_2_percent():
    units = [1, 2, 4, 8, 16, 32, 64]
    fit, _ = fit_costs(units, line_samples(2e-3, 1e-4, units))
    assert fit.exponent == 1.0 and not fit.exponent_fitted
    assert fit.fixed_s == pytest.approx(2e-3, rel=0.02)
    assert fit.per_unit_s == pytest.approx(1e-4, rel=0.02)
    # the intervals show the samples' noise (3%): narrow, and at the truth within 2%
    assert fit.fixed_interval[0] <= 2e-3 * 1.02 and fit.fixed_interval[1] >= 2e-3 / 1.02
    assert fit.per_unit_interval[0] <= 1e-4 * 1.02 and fit.per_unit_interval[1] >= 1e-4 / 1.02
    assert fit.per_unit_interval[1] / fit.per_unit_interval[0] < 1.1
    assert fit.rms < 0.02 and fit.points == 7
    assert fit.exponent_interval[0] <= 1.0 <= fit.exponent_interval[1]


def test_the_fit_keeps_the_fixed_cost_a_fit_without_intercept_would_lose():
    """Google Benchmark #296: with a large fixed cost the time looks flatter than linear;
    the intercept keeps k = 1 and the fixed cost apart."""
    units = [1, 10, 100, 1000]
    fit, _ = fit_costs(units, line_samples(5e-3, 1e-6, units))
    assert fit.exponent == 1.0
    assert fit.fixed_s == pytest.approx(5e-3, rel=0.02)
    assert fit.per_unit_s == pytest.approx(1e-6, rel=0.1)


def test_the_fit_finds_a_quadratic_cost_and_says_so():
    units = [2, 4, 8, 16, 32, 64]
    fit, _ = fit_costs(units, line_samples(1e-3, 1e-6, units, exponent=2.0))
    assert fit.exponent_fitted and fit.exponent == pytest.approx(2.0, abs=0.05)
    assert not fit.exponent_interval[0] <= 1.0 <= fit.exponent_interval[1]
    assert fit.at(100) == pytest.approx(1e-3 + 1e-6 * 100**2, rel=0.1)


def test_two_points_fit_exactly_and_a_single_point_does_not_fit():
    fit, _ = fit_costs([1, 10], [[2e-3], [3e-3]])
    assert (fit.fixed_s, fit.per_unit_s) == pytest.approx((1.8889e-3, 1.1111e-4), rel=1e-3)
    assert fit.exponent_interval is None and fit.rms == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="2 or more distinct points"):
        fit_costs([4, 4], [[1e-3], [1e-3]])


def test_the_budget_predicts_from_the_points_before():
    assert predict_call_s([], [], 8) is None
    assert predict_call_s([2], [0.01], 8) == pytest.approx(0.04)  # proportional: an upper bound
    assert predict_call_s([2], [0.01], 1) == pytest.approx(0.01)
    assert predict_call_s([1, 2], [0.011, 0.012], 11) == pytest.approx(0.021)
    assert decide([], 1, 0.5).measure
    skip = decide([(2, 0.01), (4, 0.02)], 256, 0.5)
    assert not skip.measure and skip.predicted_s == pytest.approx(1.28) and skip.basis == (2, 4)
    # measured on part of the work: what measuring it costs is held to the budget
    assert decide([(2, 0.01), (4, 0.02)], 256, 0.5, part=0.25).measure


def test_a_reducible_backend_is_measured_on_part_of_the_work():
    steps = load(STEPS)
    assert part_measured(steps, steps.backend("sleepy"), steps.size("smoke")) == pytest.approx(0.2)
    assert part_measured(steps, steps.backend("sleepy"), steps.size("default")) == 1.0
    growing = load(GROWING)
    assert part_measured(growing, growing.backend("loop"), growing.size("smoke")) == 1.0


# -- crossovers -----------------------------------------------------------------------


def _fits(units, a, b, seed=0):
    return fit_costs(units, line_samples(*a, units, seed=seed), seed=seed), fit_costs(
        units, line_samples(*b, units, seed=seed + 1), seed=seed + 1
    )


def test_two_lines_cross_where_their_costs_are_equal_within_3_percent():
    units = [1, 4, 16, 64]
    loop, batched = (2e-4, 1e-4), (1e-3, 1e-5)
    truth = (1e-3 - 2e-4) / (1e-4 - 1e-5)  # 8.9
    (fa, da), (fb, db) = _fits(units, loop, batched)
    (found,) = crossings(("loop", "batched"), (fa, fb), (da, db), (1, 64), (0.25, 256))
    assert found.at == pytest.approx(truth, rel=0.03)
    assert found.interval[0] <= truth * 1.03 and found.interval[1] >= truth / 1.03
    assert (found.below, found.above) == ("loop", "batched")
    assert found.confirm_at == math.ceil(found.at) and found.inside
    assert found.crossing_share > 0.99
    assert found.predicted_ratio > 1.0  # batched predicted faster at ceil(crossing)


def test_lines_that_do_not_cross_have_a_trend():
    units = [64, 256, 1024, 4096]
    (fa, da), (fb, db) = _fits(units, (1e-4, 2.2e-6), (1e-4 / 2.2, 1e-6))
    assert crossings(("vmapped", "scanned"), (fa, fb), (da, db), (64, 4096), (16, 16384)) == []
    medians = tuple(
        {x: fit.at(x) for x in units} for fit in (fa, fb)
    )  # the fits at the points: made-up medians
    found = trend(("vmapped", "scanned"), medians)
    assert (found.ahead, found.behind) == ("scanned", "vmapped")
    assert 2.0 < found.ratio_low <= found.ratio_high < 2.5
    assert (found.start, found.stop, found.points) == (64, 4096, 4)


@pytest.mark.parametrize(
    ("below_s", "above_s", "verdict"),
    [(1.2e-3, 1.0e-3, CONFIRMED), (1.0e-3, 1.0e-3, TIE), (1.0e-3, 1.2e-3, CONTRADICTED)],
)
def test_a_confirmation_says_what_the_measurement_at_the_crossover_found(below_s, above_s, verdict):
    units = [1, 4, 16, 64]
    (fa, da), (fb, db) = _fits(units, (2e-4, 1e-4), (1e-3, 1e-5))
    (crossover,) = crossings(("loop", "batched"), (fa, fb), (da, db), (1, 64), (0.25, 256))
    rng = np.random.default_rng(3)
    result = confirm(crossover, samples_of(below_s, rng), samples_of(above_s, rng), added=True)
    assert result.verdict == verdict and result.at == crossover.confirm_at
    assert result.ratio == pytest.approx(below_s / above_s, rel=0.05)


@pytest.mark.parametrize(
    ("interval", "says"),
    [
        ((0.9, 1.3), "as predicted"),
        ((2.4, 4.2), "by more than the fits say (the crossing lies lower)"),
        ((1.01, 1.04), "by less than the fits say (the crossing lies higher)"),
    ],
)
def test_a_confirmed_crossing_says_when_the_fits_misplace_it(interval, says):
    """Measured 3.35x faster where the fits predict 1.1x: the side is right, the place is
    not (the TDMA batch sweep's case)."""
    from scanbench.reports.growth_section import _verdict

    confirmation = {"verdict": CONFIRMED, "interval": interval, "ratio": sum(interval) / 2}
    assert _verdict(confirmation, predicted=1.1).endswith(says)
    assert _verdict({**confirmation, "verdict": TIE}, predicted=1.1).startswith("not told")


# -- counts ---------------------------------------------------------------------------


def test_counts_are_exact_lines_or_said_not_to_be():
    units = [1, 2, 4, 8]
    per_call = [
        {"dispatches": 2 + 3 * x, "kernels": 7.0, "h2d": x * x, "waits": None} for x in units
    ]
    lines = {line.name: line for line in count_lines(units, per_call)}
    assert (lines["dispatches"].fixed, lines["dispatches"].per_unit) == (2.0, 3.0)
    assert (lines["kernels"].fixed, lines["kernels"].per_unit) == (7.0, 0.0)
    assert not lines["h2d"].linear and lines["h2d"].values == (1, 4, 16, 64)
    assert "waits" not in lines  # not counted at every point
    priced = priced_line(
        units,
        [{"dispatch_s": 1e-5 * (2 + 3 * x), "launch_s": 0.0, "transfer_s": 2e-6, "sync_s": 0.0}
         for x in units],
    )  # fmt: skip
    assert priced.fixed_s == pytest.approx(2e-5 + 2e-6)
    assert priced.per_unit_s == pytest.approx(3e-5)
    assert priced_line(units, [{"dispatch_s": 1.0}] * 4) is None


# -- the analysis of a run's records --------------------------------------------------


def _record(backend: str, strategy: str, size: str, n: int, seconds: float | None, seed=0, **kw):
    rng = np.random.default_rng(seed + n)
    base = {"scenario": "growing", "backend": backend, "strategy": strategy, "engine": "numpy"}
    base.update(size=size, dtype="float64", seed=0, size_params={"n": n}, work={"items": n})
    if seconds is None:
        return Record(status="skipped", error="skipped at n = 64: over budget", **base, **kw)
    samples = samples_of(seconds, rng)
    stats = {"median": float(np.median(samples)), "ci_low": float(np.percentile(samples, 40)),
             "ci_high": float(np.percentile(samples, 60)), "count": len(samples)}  # fmt: skip
    counts = Counts({"trace": {"dispatches": 1 + n if strategy == "sequential" else 1}})
    return Record(status="ok", samples_s=tuple(samples), stats=stats, counts=counts, **base, **kw)


def _sweep_records(sweep, confirm_at=None, skip_loop_at=()):
    records = []
    points = list(sweep.values) + ([confirm_at] if confirm_at else [])
    for n in points:
        size = sweep.size_name(n)
        loop = None if n in skip_loop_at else 2e-4 + 1e-4 * n
        records.append(_record("loop", "sequential", size, n, loop))
        records.append(_record("batched", "vmapped", size, n, 1e-3 + 1e-5 * n, seed=100))
    return records


def test_the_analysis_fits_each_backend_names_the_crossover_and_asks_for_its_confirmation():
    scenario = load(GROWING)
    sweep = sweep_of(parse_grow("n=1..64:x4"), scenario, GROWING, "smoke", "float64")
    analysis = analyse(sweep, _sweep_records(sweep))
    lines = {line.label: line for line in analysis.lines}
    assert lines["loop"].fit.per_unit_s == pytest.approx(1e-4, rel=0.03)
    assert lines["batched"].fit.fixed_s == pytest.approx(1e-3, rel=0.03)
    dispatches = {c.name: c for c in lines["loop"].counts}["dispatches"]
    assert (dispatches.fixed, dispatches.per_unit) == (1.0, 1.0)
    (crossover,) = analysis.crossovers
    assert crossover.confirm_at == 9 and crossover.confirmation is None
    missing = {(line.label, units) for line, units in analysis.confirmations_missing()}
    assert missing == {("loop", 9), ("batched", 9)}
    assert analysis.own.units == 4 and analysis.own.fastest == "loop" and analysis.own.measured
    confirmed = analyse(sweep, _sweep_records(sweep, confirm_at=9))
    (crossover,) = confirmed.crossovers
    assert crossover.confirmation.verdict in (CONFIRMED, TIE) and crossover.confirmation.added
    assert crossover.at == analysis.crossovers[0].at  # the added point is never fitted
    assert confirmed.to_json()["crossovers"][0]["confirmation"]["at"] == 9


def test_skipped_points_are_kept_with_their_reason_and_prediction():
    scenario = load(GROWING)
    sweep = sweep_of(parse_grow("n=1..64:x4"), scenario, GROWING, "smoke", "float64")
    records = _sweep_records(sweep, skip_loop_at=(64,))
    records[-2] = Record(**{**records[-2].to_json(), "extra": {PREDICTED: 6.6e-3}})
    analysis = analyse(sweep, records)
    loop = next(line for line in analysis.lines if line.label == "loop")
    skipped = [p for p in loop.points if p.status == "skipped"]
    assert [(p.units, p.predicted_s) for p in skipped] == [(64, 6.6e-3)]
    assert "over budget" in skipped[0].note and loop.fit.points == 3


# -- a grown run's plan and budget (measurements made up) -----------------------------


def _grown_plan(specs: list[str], budget_s: float):
    from scanbench.cells import Selection
    from scanbench.execution import runner

    selection = Selection(scenarios=(GROWING,), sizes=("smoke",))
    return runner.plan(selection, grow=[parse_grow(s) for s in specs], grow_budget_s=budget_s)


def test_a_grown_plan_runs_point_by_point_and_stores_its_sweeps():
    from scanbench.invocation import Invocation, Stage

    invocation = _grown_plan(["n=1..64:x4"], 0.5)
    assert [(c.backend, c.size) for c in invocation.plan.cells] == [
        (backend, size)
        for size in ("smoke@n=1", "smoke", "smoke@n=16", "smoke@n=64")
        for backend in ("loop", "batched")
    ]
    growth = invocation.growth
    assert growth.budget_s == 0.5 and growth.stage == Stage.SWEEP
    assert growth.sweeps[0].values == (1, 4, 16, 64)
    stored = invocation.to_json()
    assert stored["growth"]["stage"] == "sweep" and "cells" in stored  # resumable as any run
    assert Invocation.from_json(stored) == invocation
    with pytest.raises(UnknownNameError, match="unknown axis 'batch'"):
        _grown_plan(["batch=1..8"], 0.5)
    with pytest.raises(InputError, match="axis 'n' is given twice"):
        _grown_plan(["n=1..8", "n=2..4"], 0.5)


def test_the_budget_skips_a_point_predicted_over_it_without_measuring_it():
    from scanbench.execution import grown

    invocation = _grown_plan(["n=1..64:x4"], 5e-3)
    plan = invocation.plan
    measured = []

    def fake_measure(cell, say):  # the known costs, no worker
        measured.append((cell.backend, cell.size))
        n = load(GROWING).size(cell.size)["n"]
        cost = 2e-4 + 1e-4 * n if cell.backend == "loop" else 1e-3 + 1e-5 * n
        strategy = "sequential" if cell.backend == "loop" else "vmapped"
        return _record(cell.backend, strategy, cell.size, n, cost)

    budgeted = grown.measuring(invocation, (), fake_measure)
    records = [budgeted(cell, print) for cell in plan.cells]
    assert ("loop", "smoke@n=64") not in measured and ("batched", "smoke@n=64") in measured
    skipped = records[-2]
    assert skipped.status == "skipped" and skipped.backend == "loop"
    assert skipped.extra[PREDICTED] == pytest.approx(2e-4 + 1e-4 * 64, rel=0.05)
    assert skipped.error.startswith("skipped at n = 64: one call predicted 6.")
    assert "> --grow-budget 5 ms (from n = 1, 4, 16)" in skipped.error
    assert skipped.size_params["n"] == 64 and skipped.work == {"items": 64.0}


# -- the report of a grown run --------------------------------------------------------


def test_the_report_shows_the_fits_the_crossover_and_the_users_size(tmp_path):
    from scanbench.invocation import Growth, Invocation, ScenarioFacts, Stage
    from scanbench.reports.written import write_reports
    from scanbench.results import Run

    scenario = load(GROWING)
    sweep = sweep_of(parse_grow("n=1..64:x4"), scenario, GROWING, "smoke", "float64")
    records = _sweep_records(sweep, confirm_at=9, skip_loop_at=(64,))
    analysis = analyse(sweep, records)
    facts = ScenarioFacts(GROWING, "items", "loop")
    growth = Growth((sweep,), 1.0, Stage.DONE, (analysis.to_json(),))
    run = Run({"hostname": "test"}, Invocation({"growing": facts}, growth=growth), tuple(records))
    md, html = tmp_path / "r.md", tmp_path / "r.html"
    text = write_reports([run], (), md, html)
    assert "## Growth: growing along n from smoke (n = 1–64, float64)" in text
    assert "| loop      | 3 (n = 1–16)" in text and "per item" in text
    assert "batched beats loop from n >= 9: the fits cross at n = 8." in text
    assert "Measured at n = 9 (an added point): batched" in text
    assert "skipped or failed: loop at n = 64: skipped: skipped at n = 64" in text
    # the base size's own table carries what the sweep says about it; points get no table
    assert "- **growth**: At n = 4 (size smoke, measured) loop is fastest" in text
    assert "from n >= 9 on, batched." in text
    assert "## growing / smoke / float64" in text and "smoke@n=16 /" not in text
    page = html.read_text()
    assert "<h2>Growth: growing along n" in page and page.count("data:image/svg+xml") >= 1


def test_a_malformed_stored_analysis_is_a_note_not_a_crash():
    from scanbench.invocation import Growth, Invocation, Stage
    from scanbench.reports.growth_section import growth_sections
    from scanbench.results import Run

    growth = Growth((), 1.0, Stage.DONE, ({"sweep": {}},))
    (section,) = growth_sections([Run({}, Invocation(growth=growth), ())])
    assert "cannot be read" in section.notes[0] and section.plot() is None


def test_a_crossing_far_beyond_the_points_is_named_but_not_measured():
    """One step beyond a x4 sweep is 4x the work (and its memory): named, not measured."""
    units = [1, 4, 16, 64]
    (fa, da), (fb, db) = _fits(units, (2e-4, 1e-5), (1.7e-3, 1e-9))
    (found,) = crossings(("loop", "batched"), (fa, fb), (da, db), (1, 64), (0.25, 256))
    assert found.at == pytest.approx(150, rel=0.05) and not found.inside
    assert not found.measurable  # 150 > 2 x 64
