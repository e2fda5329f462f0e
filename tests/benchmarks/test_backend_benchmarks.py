"""Every registered backend as a pytest-benchmark test, at `smoke` size.

    pytest tests/benchmarks --benchmark-only --benchmark-json out.json
    pytest-benchmark compare out.json other.json

Each test checks the backend against the scenario reference before timing (a wrong
backend fails, it is never timed), times ``backend.run`` (which waits for its result),
checks the timed output again, then counts one call in a separate pass and stores the
per-call counts in ``extra_info`` (dispatches, kernels, launch equivalent, transfers).
"""

from __future__ import annotations

import pytest

from harness.counting import counts_per_call, per_call_counts
from harness.environment import device_info
from harness.registry import SCENARIOS
from tests.conftest import BACKEND_PAIRS, scenario_case

SIZE = "smoke"


@pytest.mark.parametrize(
    ("scenario_name", "backend_name"), BACKEND_PAIRS, ids=[f"{s}/{b}" for s, b in BACKEND_PAIRS]
)
def test_backend(benchmark, scenario_name, backend_name):
    dtype = SCENARIOS[scenario_name]().dtypes[0]
    scenario, size, inputs, expected = scenario_case(scenario_name, dtype, SIZE)
    backend = scenario.backend(backend_name)
    if not backend.runs_at(SIZE):
        pytest.skip(f"{backend_name} does not run at {SIZE}: {backend.skip_reason}")
    prepared = backend.prepare(inputs, size)
    scenario.check(backend.to_reference(backend.run(prepared)), expected, dtype)
    output = benchmark(backend.run, prepared)
    scenario.check(backend.to_reference(output), expected, dtype)
    counts = counts_per_call(scenario, backend, size, prepared, 0, dtype, device_info())
    benchmark.extra_info.update(
        {
            "scenario": scenario_name,
            "backend": backend_name,
            "strategy": str(backend.strategy),
            "size": SIZE,
            "dtype": dtype,
            "work": dict(scenario.work(size, dtype)),
            "counts_per_call": per_call_counts(counts),
            "probe_errors": {k: v for k, v in counts.items() if k.endswith("_error")},
        }
    )
