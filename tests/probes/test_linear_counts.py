"""Counts at full size are exact: counted at 2, 3 and 4 units, extrapolated linearly,
the third point checking the line; what happens once per call is not multiplied."""

from __future__ import annotations

import dataclasses

import jax
import pytest

from scanbench.api import InputError, Size
from scanbench.counts import Counts
from scanbench.environment import device_info
from scanbench.probes.extrapolation import extrapolate, linear_counts
from scanbench.probes.passes import counts_per_call
from scanbench.timing import call_and_wait


def point(g: int) -> dict:
    """Counts of a fake backend at g generations: 1 dispatch per call plus 3 per
    generation, 7 H2D once, kernels by op growing, a recompilation time."""
    return {
        "calls": 1,
        "trace": {
            "dispatches": 1 + 3 * g,
            "kernels": 10 * g,
            "dispatches_by_function": {"jit(tune)": 1, "jit(step)": 3 * g},
        },
        "transfers": {"h2d": 7, "note": "zero-copy on CPU"},
        "static": {"available": True, "loops": [{"name": "while", "trip_count": g}]},
        "compilations": {"compiles": 0, "total_s": 0.01 * g + 0.003},
    }


def test_fixed_and_per_unit_parts_are_exact():
    counts = linear_counts([point(2), point(3), point(4)], "generations", 20)
    assert counts["trace"]["dispatches"] == 61 and isinstance(counts["trace"]["dispatches"], int)
    assert counts["trace"]["dispatches_by_function"] == {"jit(tune)": 1, "jit(step)": 60}
    assert counts["transfers"] == {"h2d": 7, "note": "zero-copy on CPU"}  # once, not x20
    assert counts["static"]["loops"][0]["trip_count"] == 20
    assert counts["compilations"]["total_s"] == pytest.approx(0.203)
    model = counts["linear"]["model"]
    assert model["trace.dispatches"] == [1, 3] and model["transfers.h2d"] == [7, 0]
    assert counts["linear"]["not_linear"] == [] and "linear_error" not in counts
    assert Counts.from_json(counts).per_call()["dispatches"] == 61


def test_a_count_off_the_line_gets_no_number_and_says_so():
    third = point(4)
    third["trace"]["kernels"] = 41  # 20, 30, 41: not linear
    counts = linear_counts([point(2), point(3), third], "generations", 20)
    assert counts["trace"]["kernels"] is None
    assert counts["linear"]["not_linear"] == ["trace.kernels"]
    assert (
        "not linear in generations (counted at 2, 3, 4): trace.kernels" in (counts["linear_error"])
    )
    assert Counts.from_json(counts).per_call()["kernels"] is None


def test_a_breakdown_entry_off_the_line_is_left_out_not_fatal():
    points = [point(g) for g in (2, 3, 4)]
    points[2]["trace"]["dispatches_by_function"] = {"jit(tune)": 1, "jit(step.1)": 12}
    counts = linear_counts(points, "generations", 20)
    assert counts["trace"]["dispatches"] == 61 and "linear_error" not in counts
    assert "jit(step.1)" not in counts["trace"]["dispatches_by_function"]
    assert "trace.dispatches_by_function.jit(step.1)" in counts["linear"]["not_linear_details"]


def test_durations_are_extrapolated_without_the_exactness_check():
    values, _, nonlinear = extrapolate([0.2, 0.3, 0.45], 10, ".x_s")
    assert nonlinear == [] and values == pytest.approx(1.0)


def test_count_along_must_name_an_integer_size_parameter():
    from scanbench.scenarios.mppi_tuning import SCENARIO

    with pytest.raises(InputError, match="count_along='samples_typo'"):
        dataclasses.replace(SCENARIO, count_along="samples_typo")


@pytest.fixture(scope="module")
def mppi_g6():
    """The pendulum tuning scenario at smoke size with 6 generations (above 4: counted
    at 2, 3, 4 and extrapolated)."""
    from scanbench.scenarios.mppi_tuning import SCENARIO

    smoke = SCENARIO.size("smoke")
    size = Size("smoke-g6", {**smoke.params, "generations": 6})
    return dataclasses.replace(SCENARIO, sizes={**SCENARIO.sizes, size.name: size}), size


def count(scenario, size, backend_name: str) -> Counts:
    """Counts of a float32 cell as its worker takes them (x64 off, as there), x64 restored
    after: the other tests of this process expect it on (tests/conftest.py)."""
    x64 = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", False)
    try:
        backend = scenario.backend(backend_name)
        prepared = backend.prepare(scenario.make_inputs(size, 0, "float32"), size)
        call_and_wait(backend.run, prepared)  # counted warm, as in the worker
        return counts_per_call(scenario, backend, size, prepared, 0, "float32", device_info())
    finally:
        jax.config.update("jax_enable_x64", x64)


@pytest.mark.parametrize("backend", ["scanned", "sharded"])
def test_a_scanned_tuning_run_is_one_dispatch_at_any_number_of_generations(mppi_g6, backend):
    scenario, size = mppi_g6
    counts = count(scenario, size, backend)
    per_call = counts.per_call()
    assert per_call["dispatches"] == 1 and per_call["executions"] == 1
    assert counts.linear["model"]["trace.dispatches"] == [1, 0]
    assert per_call["h2d"] == 0


def test_sequential_dispatches_match_a_hand_count(mppi_g6):
    scenario, size = mppi_g6
    counts = count(scenario, size, "sequential")
    by_function = counts.breakdowns()["dispatches_by_function"]
    p, e, s, g = (size[k] for k in ("population", "episodes", "control_steps", "generations"))
    # one jitted controller call and one jitted plant step per control step, per episode,
    # per candidate, per generation (the real-world loop)
    controller = next(v for k, v in by_function.items() if "controller" in k)
    plant = next(v for k, v in by_function.items() if "plant" in k)
    assert controller == plant == p * e * s * g
    fixed, per_generation = counts.linear["model"]["trace.dispatches"]
    assert counts.per_call()["dispatches"] == fixed + per_generation * g
    assert per_generation >= 2 * p * e * s and fixed >= 0
    assert counts.linear["not_linear"] == [] and counts.linear["not_linear_details"] == []


@pytest.mark.parametrize("backend", ["scanned", "sharded"])
def test_at_default_a_scanned_tuning_run_is_one_dispatch_counted_directly(backend):
    """At `default` (G = 4, not above 4) the call is counted directly: exact, no parts."""
    from scanbench.scenarios.mppi_tuning import SCENARIO

    size = SCENARIO.size("default")
    assert size["generations"] == 4
    counts = count(SCENARIO, size, backend)
    per_call = counts.per_call()
    assert per_call["dispatches"] == 1 and per_call["executions"] == 1 and per_call["h2d"] == 0
    assert "linear" not in counts.sections and counts.scale == 1.0


def test_a_cell_prepared_for_counting_is_traced_once_after_an_untraced_call(monkeypatch):
    """Prepared afresh (a cell timed on part of its work), a backend that compiles on its
    first call is called once untraced, then traced once: its counts are a warm call's."""
    import scanbench.probes.passes

    traced = []
    count_cell = scanbench.probes.passes.count_cell
    monkeypatch.setattr(
        scanbench.probes.passes,
        "count_cell",
        lambda *a, **k: traced.append(1) or count_cell(*a, **k),
    )
    import jax.numpy as jnp

    from scanbench.api import Backend, Strategy
    from tests.support.scenario_files.steps import SCENARIO as STEPS

    calls = []

    def prepare(inputs, size):
        return jax.jit(lambda x: 2.0 * x), jnp.asarray(inputs)

    def run(prepared):
        calls.append(1)
        double, x = prepared
        return double(x)

    lazy = Backend("lazy", Strategy.SCANNED, "jax", prepare, run)
    scenario = dataclasses.replace(STEPS, backends={"lazy": lazy})
    size = scenario.size("four")
    counts = counts_per_call(scenario, lazy, size, None, 0, "float64", device_info())
    assert counts.per_call()["compiles"] == 0 and counts.per_call()["dispatches"] == 1
    assert len(calls) == 3  # untraced (it compiles), counted, one for memory
    assert len(traced) == 1
