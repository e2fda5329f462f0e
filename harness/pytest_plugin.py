"""The ``scanbench`` pytest fixture: your function's counts and time in your own tests.

Installed with scanbench (a ``pytest11`` entry point), so any test can ask for it::

    def test_step_is_one_dispatch(scanbench):
        result = scanbench(step, state, inputs)
        assert result.counts["dispatches"] <= 1 and result.counts["h2d"] == 0

It measures one function as `scanbench.profile` does, through pytest-benchmark's
``benchmark`` fixture (`scanbench.pytest_bench.benchmark_backend`: the output checked to be
finite and the same after the timed rounds, every round waiting for the result), counts
one call, and puts the per-call counts in ``benchmark.extra_info`` (``--benchmark-json``
keeps them). It also adds JAX's versions, backend, devices and x64 flag to
pytest-benchmark's ``machine_info``.

The plugin loads in every pytest run of the environment it is installed in, so JAX and
the measuring modules are imported by the hook and the fixture that use them; without
pytest-benchmark (the ``pytest`` extra) it loads all the same, and only a test that asks
for the fixture fails, with the line naming the extra.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import pytest


@dataclasses.dataclass(frozen=True)
class Measured:
    """What the fixture returns: per-call counts, their breakdowns and the diagnosis."""

    counts: Mapping[str, float | None]  # dispatches, kernels, launch_equivalent, h2d, ...
    extra_info: Mapping[str, Any]  # what pytest-benchmark stores for this test
    diagnosis: tuple[Any, ...]  # scanbench.diagnosis.Finding, from the counts of one call


WARM_OPTION = "--scanbench-warm"
MARKER = "scanbench"


def pytest_addoption(parser: pytest.Parser) -> None:
    """The fixture's options, shown by ``pytest --help`` under "scanbench"."""
    group = parser.getgroup("scanbench", "scanbench: counts, compile stages and time of JAX code")
    group.addoption(
        WARM_OPTION,
        action="store_true",
        default=False,
        help="keep JAX's in-memory caches before each measured function (default: cleared, "
        "so its prepare and first call are compiled cold and split by stage)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(name=None, strategy=None): defaults for the scanbench fixture's calls in "
        "this test (the function's name in the results, its strategy: library, scanned, "
        "vmapped, sequential, ...)",
    )


@pytest.hookimpl(optionalhook=True)  # pytest-benchmark's hook: absent without it
def pytest_benchmark_update_machine_info(config, machine_info):
    """Add what decides a JAX benchmark's speed to pytest-benchmark's machine info."""
    import jax

    from .environment import device_info

    device = device_info()
    machine_info["jax"] = {
        "jax": jax.__version__,
        "jaxlib": jax.lib.__version__ if hasattr(jax.lib, "__version__") else None,
        "backend": jax.default_backend(),
        "device_kind": device.get("device_kind"),
        "device_count": jax.device_count(),
        "x64": bool(jax.config.jax_enable_x64),
    }


@pytest.fixture
def scanbench(request: pytest.FixtureRequest) -> Callable[..., Measured]:
    """``scanbench(function, *args, name=None, strategy="library", setup=None,
    check=True) -> Measured``; ``setup()`` runs untimed before every call (a function
    that keeps state), ``check=False`` times it without comparing its output. A
    ``@pytest.mark.scanbench(name=..., strategy=...)`` on the test gives the defaults;
    ``--scanbench-warm`` keeps JAX's caches (the compile is then not cold). Under
    pytest-xdist, pytest-benchmark times nothing: the counts are exact all the same, and
    ``extra_info["not_timed"]`` says why the rest is not a measurement.

    It needs pytest-benchmark (``pip install 'scanbench[pytest]'``): without it a test
    that asks for it errors with that line, and every other test runs as before."""
    from .extras import missing_reason

    missing = missing_reason("the scanbench pytest fixture", "pytest_benchmark")
    if missing:
        pytest.fail(missing, pytrace=False)
    benchmark = request.getfixturevalue("benchmark")
    from .diagnosis import Facts, diagnose
    from .notebook import _dtype, scenario_of
    from .pytest_bench import benchmark_backend
    from .trace_route import TraceRoute

    marker = request.node.get_closest_marker(MARKER)
    defaults = dict(marker.kwargs) if marker is not None else {}
    cold = not request.config.getoption(WARM_OPTION)

    def measure(
        function: Callable[..., Any],
        *args: Any,
        name: str | None = None,
        strategy: str | None = None,
        setup: Callable[[], Any] | None = None,
        check: bool = True,
    ) -> Measured:
        key = name or defaults.get("name") or getattr(function, "__name__", "function")
        strategy = strategy or defaults.get("strategy") or "library"
        scenario = scenario_of(
            {key: function}, args, key, {key: strategy}, setup=setup, check=check
        )
        info = benchmark_backend(benchmark, scenario, key, "default", dtype=_dtype(), cold=cold)
        counts = info["counts_per_call"]
        route = TraceRoute.python(key)  # a test's function: no scenario for the command
        findings = diagnose(Facts(None, counts, info.get("kernels_by_op", {}), trace_route=route))
        return Measured(counts=counts, extra_info=info, diagnosis=findings)

    return measure
