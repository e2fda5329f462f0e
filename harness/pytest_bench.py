"""A scenario's backend as a pytest-benchmark test, timed by scanbench's timing loop.

pytest-benchmark times the callable it is given; here that callable is
`scanbench.timing.call_and_wait`, so every round waits for the whole output (a JAX backend
is timed to the moment its result is ready, not to the return of its dispatch). The
output is checked strictly (`scanbench.checks`) before and after timing, then one call is
counted and the per-call counts go to ``extra_info``, with the prepare and the first
call's seconds and their split by JAX's stages (``compile_stages``: trace, lower, XLA
compile, the rest), compiled cold (JAX's in-memory caches cleared first).

Example (in a test module)::

    def test_scanned(benchmark):
        benchmark_backend(benchmark, SCENARIO, "scanned", "smoke")
"""

from __future__ import annotations

import functools
import os
import time
import warnings
from typing import Any

import jax
import pytest

from .api import MismatchError, Scenario
from .checks import InputSnapshot, check_again, check_of, checked_error, stateful_or
from .environment import device_info
from .probes.compilations import compile_events, stages_of
from .probes.passes import counts_per_call
from .timing import call_and_wait
from .xla_options import flags_in_effect

NOT_TIMED = (
    "pytest-benchmark is disabled (--benchmark-disable, or pytest-xdist: timing beside "
    "other workers is not timing): the counts are exact, the times and the compile stages "
    "are not measurements; run the benchmarks with -p no:xdist (or -n 0)"
)


def benchmark_backend(
    benchmark: Any,
    scenario: Scenario,
    backend_name: str,
    size_name: str = "smoke",
    dtype: str | None = None,
    seed: int = 0,
    cold: bool = True,
) -> dict[str, Any]:
    """Check, time (with pytest-benchmark's ``benchmark`` fixture) and count one backend;
    ``cold``: JAX's in-memory caches cleared before its prepare.

    Returns the ``extra_info`` it stored. Skips the test (``pytest.skip``) when the
    backend does not run at ``size_name``. Where pytest-benchmark is disabled (its
    ``--benchmark-disable``, or pytest-xdist: timing beside other workers is not timing)
    the backend is still checked and counted, and ``not_timed`` says why.
    """
    dtype = dtype or scenario.dtypes[0]
    if dtype == "float64":  # process-wide; float32 cells stay float32 with it on
        jax.config.update("jax_enable_x64", True)
    backend = scenario.backend(backend_name)
    size = scenario.size(size_name)
    if not backend.runs_at(size.name):
        pytest.skip(f"{backend_name} does not run at {size.name}: {backend.skip_reason}")
    inputs = scenario.make_inputs(size, seed, dtype)
    expected = scenario.reference(inputs)
    snapshot = InputSnapshot.of(inputs)
    if cold:
        jax.clear_caches()  # compiled cold, as in a run's fresh worker (pytest-jax-bench too)
    with compile_events() as events:
        start = time.monotonic()
        prepared = backend.prepare(inputs, size)
        prepared_at = time.monotonic()
        if backend.setup is not None:
            backend.setup(prepared)
        first = call_and_wait(backend.run, prepared)
        done = time.monotonic()
    stages = {
        "prepare": stages_of([e for e in events if e[3] <= prepared_at], prepared_at - start),
        "first_call": stages_of([e for e in events if e[3] > prepared_at], done - prepared_at),
    }
    snapshot.verify(inputs, "during prepare or the first call")
    check = check_of(scenario, backend, prepared)
    if backend.checked:
        try:
            checked_error(check, backend.to_reference(first), expected, dtype)
        except MismatchError as error:  # the same inputs again: a function with state?
            raise stateful_or(error, lambda: again(prepared), first) from None
    calls = [1]

    def again(ready: Any) -> Any:
        if backend.setup is not None:
            backend.setup(ready)
        return call_and_wait(backend.run, ready)

    def timed() -> Any:
        calls[0] += 1
        return call_and_wait(backend.run, prepared)

    if backend.setup is None:
        output = benchmark(timed)
    else:  # pytest-benchmark's own way: the setup runs untimed before every round
        setup = functools.partial(backend.setup, prepared)
        output = benchmark.pedantic(timed, setup=setup, rounds=10, warmup_rounds=1)
    snapshot.verify(inputs, f"during the first {calls[0]} calls")
    if backend.checked:
        check_again(check, backend.to_reference(output), expected, dtype, calls[0])
    counts = counts_per_call(scenario, backend, size, prepared, seed, dtype, device_info())
    info = {
        "scenario": scenario.name,
        "backend": backend.name,
        "strategy": str(backend.strategy),
        "size": size.name,
        "dtype": dtype,
        "work": dict(scenario.work(size, dtype)),
        "prepare_s": prepared_at - start,
        "first_call_s": done - prepared_at,
        "compile_stages": {phase: found.to_json() for phase, found in stages.items()},
        "compiled_cold": cold,
        "counts_per_call": counts.per_call(),
        "kernels_by_op": counts.breakdowns()["kernels_by_op"],
        "probe_errors": dict(counts.errors),
        "xla_flags": list(backend.xla_flags),
        # a test process starts JAX once, without the flags a backend declares for its worker
        "xla_flags_applied": flags_in_effect(backend.xla_flags, os.environ.get("XLA_FLAGS", "")),
    }
    if getattr(benchmark, "disabled", False):
        info["not_timed"] = NOT_TIMED
    if not info["xla_flags_applied"]:
        warnings.warn(
            f"{scenario.name}/{backend.name} declares the XLA flags {' '.join(backend.xla_flags)}, "
            "which this test process did not start with: timed without them (set XLA_FLAGS "
            "for the pytest run, or measure it with `scanbench run`)",
            stacklevel=2,
        )
    benchmark.extra_info.update(info)
    return info
