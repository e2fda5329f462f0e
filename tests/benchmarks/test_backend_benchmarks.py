"""Every registered backend as a pytest-benchmark test, at `smoke` size.

    pytest tests/benchmarks --benchmark-only --benchmark-json out.json
    pytest-benchmark compare out.json other.json

`scanbench.pytest_bench.benchmark_backend` checks the backend against the scenario
reference before timing (a wrong backend fails, it is never timed), times it with the
timing loop's ``call_and_wait`` (every round waits for the result), checks the timed
output again, then counts one call in a separate pass and stores the per-call counts in
``extra_info`` (dispatches, kernels, launch equivalent, transfers, recompilations).
"""

from __future__ import annotations

import pytest

from scanbench.pytest_bench import benchmark_backend
from tests.conftest import BACKEND_PAIRS, bundled

SIZE = "smoke"


@pytest.mark.parametrize(
    ("scenario_name", "backend_name"), BACKEND_PAIRS, ids=[f"{s}/{b}" for s, b in BACKEND_PAIRS]
)
def test_backend(benchmark, scenario_name, backend_name):
    benchmark_backend(benchmark, bundled(scenario_name), backend_name, SIZE)
