"""Shared fixtures: every registered (scenario, backend) pair, cached inputs/references."""

from __future__ import annotations

import functools
import os

import jax
import pytest

from scanbench.sources import catalogue, load
from tests.support.import_root import own_import_root

# float64 cells need 64-bit JAX; float32 cells must stay float32 with it on (the check
# rejects a silently promoted result), so one process-wide setting serves both.
jax.config.update("jax_enable_x64", True)

BACKEND_PAIRS = [
    (scenario_name, backend_name)
    for scenario_name, source in catalogue().items()
    for backend_name in load(source).backends
]


def bundled(scenario_name: str):
    """A bundled scenario by its catalogue name."""
    return load(catalogue()[scenario_name])


@functools.cache
def scenario_case(scenario_name: str, dtype: str, size_name: str = "smoke", seed: int = 0):
    """(scenario, size, inputs, expected) computed once per session."""
    scenario = bundled(scenario_name)
    size = scenario.size(size_name)
    inputs = scenario.make_inputs(size, seed, dtype)
    return scenario, size, inputs, scenario.reference(inputs)


@pytest.fixture(params=BACKEND_PAIRS, ids=[f"{s}/{b}" for s, b in BACKEND_PAIRS])
def scenario_backend(request):
    """Every registered (scenario, backend) pair."""
    scenario_name, backend_name = request.param
    scenario = bundled(scenario_name)
    return scenario, scenario.backend(backend_name)


def outer_pytest_free() -> dict[str, str]:
    """The environment for a nested pytest run: without this run's pytest-xdist worker
    variables (with them, pytest-benchmark believes it runs under xdist and disables
    itself)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}


@pytest.fixture(autouse=True)
def _x64_restored():
    """A cell measured in this process sets ``jax_enable_x64`` for its dtype (a float32
    cell turns it off, `scanbench.execution.worker.configure_jax`): set back on after each
    test, so that a later float64 test in the same xdist worker computes in float64 (it
    did not, 4 tests failed, when a float32 cell ran before them)."""
    yield
    if not jax.config.jax_enable_x64:
        jax.config.update("jax_enable_x64", True)


@pytest.fixture(autouse=True)
def _import_root_restored():
    """``scanbench.cli.main`` called in this process puts its directory first on the
    import path (``PYTHONPATH``, ``SCANBENCH_IMPORT_ROOT``, ``sys.path``) for every process
    it starts: undone after each test, so a later subprocess test imports what it means to."""
    with own_import_root():
        yield
