"""Every registered backend matches its scenario's reference at smoke size (a costly
backend at the part of it the harness measures it on, `Backend.reducible_to`).

(Repeatability is checked by the worker on every run: the last timed output is checked
against the reference again.)"""

from __future__ import annotations

import jax
import pytest

from scanbench.checks import check_of
from scanbench.execution.worker import reduced_size
from tests.conftest import scenario_case


def run_backend(scenario, backend, dtype):
    _, size, inputs, expected = scenario_case(scenario.name, dtype)
    if not backend.runs_at(size.name):
        pytest.skip(f"{backend.name} does not run at {size.name}: {backend.skip_reason}")
    reduced = reduced_size(scenario, backend, size)
    if reduced is not None:  # as the worker measures it when a whole call is too costly
        size, inputs = reduced, scenario.make_inputs(reduced, 0, dtype)
        expected = scenario.reference(inputs)
    prepared = backend.prepare(inputs, size)
    output = backend.to_reference(jax.block_until_ready(backend.run(prepared)))
    return output, expected, prepared


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_backend_matches_reference(scenario_backend, dtype):
    """The scenario's check, or the backend's own (a roofline kernel is checked against the
    scenario's arithmetic, `Backend.check`), exactly as the worker applies it."""
    scenario, backend = scenario_backend
    if dtype not in scenario.dtypes:
        pytest.skip(f"{scenario.name} does not support {dtype}")
    output, expected, prepared = run_backend(scenario, backend, dtype)
    error = check_of(scenario, backend, prepared)(output, expected, dtype)
    assert error >= 0.0
