"""The counting passes of a cell: trace, transfers, compilations, static HLO (never while
timing).

Each pass runs separately from the timing pass (profiling costs about 7% per dispatch; the
transfer guard adds its own cost): one call under the profiler (dispatches, kernels), one
call under the transfer guard that also collects the compilation events (the
``jax.monitoring`` listeners cost nothing, and the guard only acts on transfers), and the
static HLO estimate. A probe that fails stores its error next to the counts instead of a
number; the timing stays valid.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from harness.api import Backend, Scenario, Size


def static_counts(backend: Backend, prepared: Any) -> dict[str, Any]:
    """Static HLO estimate per call: sum over the backend's executables x calls per run."""
    from harness.probes.hlo import estimate

    if backend.executables is None:
        return {"available": False, "reason": "backend exposes no compiled executables"}
    executables = {}
    kernels = launch = unknown = 0
    for name, (compiled, calls) in backend.executables(prepared).items():
        result = estimate(compiled.as_text())
        executables[name] = {"calls_per_run": calls, **result.to_json()}
        kernels += result.kernels * calls
        launch += result.launch_equivalent * calls
        unknown += result.unknown_trip_count_loops
    return {
        "available": True,
        "kernels": kernels,
        "launch_equivalent": launch,
        "unknown_trip_count_loops": unknown,
        "executables": executables,
    }


def counts_per_call(
    scenario: Scenario,
    backend: Backend,
    size: Size,
    prepared: Any,
    seed: int,
    dtype: str,
    device: dict[str, Any],
) -> dict[str, Any]:
    """`count_cell` of one call at ``size``; for a scenario with ``count_along`` (and that
    parameter above 4), counted with it at 2, 3 and 4 and extrapolated exactly
    (`harness.linear_counts`)."""
    from harness.linear_counts import POINTS, linear_counts
    from harness.timing import call_and_wait

    along = scenario.count_along
    n = size[along] if along else None
    if along is None or not isinstance(n, int) or n <= max(POINTS):
        return {**count_cell(backend, prepared, device["platform"]), "scale": 1.0}
    points = []
    for units in POINTS:
        small = Size(f"{size.name}-{along}-{units}", {**size.params, along: units})
        small_prepared = backend.prepare(scenario.make_inputs(small, seed, dtype), small)
        call_and_wait(backend.run, small_prepared)  # warm: compile-on-first-call paths
        points.append(count_cell(backend, small_prepared, device["platform"]))
    return {**linear_counts(points, along, n), "scale": 1.0}


def count_cell(
    backend: Backend, prepared: Any, platform: str, log_dir: str | None = None
) -> dict[str, Any]:
    """Counts for one call of ``backend.run(prepared)``; see the module doc."""
    from harness.probes.compilations import count_compilations
    from harness.probes.gpu import command_buffers_enabled, count_gpu_events
    from harness.probes.trace import trace_calls
    from harness.probes.transfers import count_transfers
    from harness.timing import call_and_wait

    counts: dict[str, Any] = {"calls": 1}
    try:
        trace, events = trace_calls(backend.run, prepared, calls=1, log_dir=log_dir)
        counts["trace"] = trace.to_json()
        if platform == "gpu":
            flags = os.environ.get("XLA_FLAGS", "")
            counts["gpu"] = count_gpu_events(events, command_buffers_enabled(flags)).to_json()
    except Exception as error:  # stored next to the counts; the cell's timing stays valid
        counts["trace_error"] = f"{type(error).__name__}: {error}"
    # one call for transfers and compilations (the monitoring listeners cost nothing; the
    # transfer guard only acts on transfers): a costly call is not repeated for each
    compilations: list[Any] = []

    def call_counting_compilations() -> Any:
        outputs: list[Any] = []
        compilations.append(
            count_compilations(lambda: outputs.append(call_and_wait(backend.run, prepared)))
        )
        return outputs[0]

    try:
        counts["transfers"] = count_transfers(call_counting_compilations, platform).to_json()
    except Exception as error:
        counts["transfers_error"] = f"{type(error).__name__}: {error}"
    try:
        if not compilations:  # the transfer probe failed before the call: a call of its own
            call = functools.partial(call_and_wait, backend.run, prepared)
            compilations.append(count_compilations(call))
        counts["compilations"] = compilations[0].to_json()
    except Exception as error:
        counts["compilations_error"] = f"{type(error).__name__}: {error}"
    try:
        counts["static"] = static_counts(backend, prepared)
    except Exception as error:
        counts["static_error"] = f"{type(error).__name__}: {error}"
    return counts


GATED_COUNTS = ("dispatches", "kernels", "launch_equivalent", "h2d")


def per_call_counts(counts: dict[str, Any]) -> dict[str, float | None]:
    """The stored counts of a record scaled to one call at the record's size.

    Counts may have been taken over several calls (``calls``) or, in results stored before
    `harness.linear_counts`, on a smaller size (``scale``); None where a probe did not
    produce the number (or the count was not linear along the scenario's ``count_along``).
    Keys: dispatches, executions, kernels (trace), kernels_static, launch_equivalent
    (static), h2d, h2d_bytes, h2d_unknown, d2h, d2h_bytes, compiles and traces (inside
    the call: retracing / recompilation).
    """
    trace = counts.get("trace") or {}
    static = counts.get("static") or {}
    transfers = counts.get("transfers") or {}
    calls = (counts.get("calls") or 1) / counts.get("scale", 1.0)
    if not static.get("available"):
        static = {}

    def scaled(value):
        return None if value is None else value / calls

    return {
        "dispatches": scaled(trace.get("dispatches")),
        "executions": scaled(trace.get("executions")),
        "kernels": scaled(trace.get("kernels")),
        "kernels_static": scaled(static.get("kernels")),
        "launch_equivalent": scaled(static.get("launch_equivalent")),
        "h2d": scaled(transfers.get("h2d")),
        "h2d_bytes": scaled(transfers.get("h2d_bytes")),
        "h2d_unknown": scaled(transfers.get("h2d_unknown_size")),
        "d2h": scaled(transfers.get("d2h")),
        "d2h_bytes": scaled(transfers.get("d2h_bytes")),
        "compiles": scaled((counts.get("compilations") or {}).get("compiles")),
        "traces": scaled((counts.get("compilations") or {}).get("traces")),
    }


def per_call_breakdowns(counts: dict[str, Any]) -> dict[str, dict[str, float]]:
    """What the totals of `per_call_counts` are made of, per call: dispatches by outermost
    jitted function, kernels by HLO op (trace), GPU launch equivalent by executable (static).
    """
    trace = counts.get("trace") or {}
    static = counts.get("static") or {}
    calls = (counts.get("calls") or 1) / counts.get("scale", 1.0)
    launches = {
        name: info["launch_equivalent"] * info["calls_per_run"]
        for name, info in (static.get("executables") or {}).items()
    }
    return {
        "dispatches_by_function": {
            name: value / calls for name, value in trace.get("dispatches_by_function", {}).items()
        },
        "kernels_by_op": {
            name: value / calls for name, value in trace.get("kernels_by_op", {}).items()
        },
        "launch_by_executable": {name: value / calls for name, value in launches.items()},
    }
