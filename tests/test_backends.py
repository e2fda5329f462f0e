"""Every registered backend matches its scenario's reference at smoke size."""

from __future__ import annotations

import jax
import pytest

from tests.conftest import scenario_case


def run_backend(scenario, backend, dtype):
    _, size, inputs, expected = scenario_case(scenario.name, dtype)
    if not backend.runs_at(size.name):
        pytest.skip(f"{backend.name} does not run at {size.name}: {backend.skip_reason}")
    prepared = backend.prepare(inputs, size)
    output = backend.to_reference(jax.block_until_ready(backend.run(prepared)))
    return output, expected


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_backend_matches_reference(scenario_backend, dtype):
    scenario, backend = scenario_backend
    if dtype not in scenario.dtypes:
        pytest.skip(f"{scenario.name} does not support {dtype}")
    output, expected = run_backend(scenario, backend, dtype)
    error = scenario.check(output, expected, dtype)
    assert error >= 0.0


def test_backend_is_repeatable(scenario_backend):
    """Two calls on the same prepared inputs give the same answer (no state leaks)."""
    scenario, backend = scenario_backend
    dtype = scenario.dtypes[0]
    _, size, inputs, expected = scenario_case(scenario.name, dtype)
    if not backend.runs_at(size.name):
        pytest.skip(f"{backend.name} does not run at {size.name}")
    prepared = backend.prepare(inputs, size)
    first = backend.to_reference(jax.block_until_ready(backend.run(prepared)))
    second = backend.to_reference(jax.block_until_ready(backend.run(prepared)))
    scenario.check(first, expected, dtype)
    scenario.check(second, expected, dtype)
