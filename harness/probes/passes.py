"""The counting passes of a cell: trace, transfers, compilations, static HLO (never while
timing).

The counting runs apart from the timing pass (the profiler and the transfer guard each
add a cost to every dispatch), as ONE call under the transfer guard, the profiler
(dispatches, kernels) and the compilation listeners together: none of them changes what
the others count (the guard logs transfers to fd 2, the profiler records events, the
``jax.monitoring`` listeners cost nothing), and a costly call (an eager loop that compiles
on every call) is not repeated for each probe. Then the static HLO estimate. A probe that
fails stores its error next to the counts instead of a number; the timing stays valid.
"""

from __future__ import annotations

import functools
import gc
import os
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any

import jax

from ..api import Backend, Scenario, Size
from ..compile_cache import unmeasured
from ..counts import Counts
from ..stages import COUNTING_STAGE, MEMORY_STAGE, PREPARING_STAGE
from ..timing import call_and_wait
from .aliasing import donation_facts
from .compilations import count_compilations
from .conversions import counting as counting_conversions
from .conversions import summarize as summarize_conversions
from .extrapolation import POINTS, linear_counts
from .gpu import command_buffers_enabled, count_gpu_events
from .hlo import estimate, summarize
from .host_calls import profile_call
from .lines import count_lines
from .memory import call_peak, freed_memory_visible, static_plan, tree_nbytes
from .operations import operations_of
from .spans import measure_spans
from .trace import count_events, recording
from .transfers import count_transfers

OPERATIONS = ("flops", "transcendentals", "bytes_accessed")  # per call, static counts
HOST_CODE = ("numpy", "scipy", "numba", "python")  # engines whose Python lines are counted


def static_counts(backend: Backend, prepared: Any) -> dict[str, Any]:
    """Static HLO estimate per call: sum over the backend's executables x calls per run."""

    if backend.executables is None:
        return {"available": False, "reason": "backend exposes no compiled executables"}
    executables = {}
    kernels = launch = unknown = donated = donation_copies = 0
    operations: dict[str, float | None] = dict.fromkeys(OPERATIONS, 0.0)
    operations_errors = []
    custom_calls = 0
    for name, (compiled, calls) in backend.executables(prepared).items():
        text = compiled.as_text()
        result = estimate(text)
        donation = donation_facts(text)
        executables[name] = {
            "calls_per_run": calls,
            **result.to_json(),
            "donation": donation.to_json(),
        }
        donated += donation.donated * calls
        donation_copies += donation.copies * calls
        try:
            executables[name]["memory"] = static_plan(compiled)
        except Exception as error:  # the HLO counts stand without the plan
            executables[name]["memory"] = {"available": False, "reason": f"{error}"}
        counted = operations_of(compiled)  # XLA's cost analysis x loop trip counts
        executables[name]["operations"] = counted.to_json()
        if counted.error is not None:
            operations_errors.append(f"{name}: {counted.error}")
        custom_calls += counted.custom_calls
        for key, value in operations.items():
            each = getattr(counted, key)
            operations[key] = None if value is None or each is None else value + each * calls
        kernels += result.kernels * calls
        launch += result.launch_equivalent * calls
        unknown += result.unknown_trip_count_loops
    return {
        "available": True,
        "kernels": kernels,
        "launch_equivalent": launch,
        "unknown_trip_count_loops": unknown,
        **operations,
        "custom_calls": custom_calls,  # opaque to XLA's cost analysis: flops a lower bound
        **({"operations_error": "; ".join(operations_errors)} if operations_errors else {}),
        "donated": donated,
        "donation_copies": donation_copies,
        "executables": executables,
    }


def counts_per_call(
    scenario: Scenario,
    backend: Backend,
    size: Size,
    prepared: Any | None,
    seed: int,
    dtype: str,
    device: dict[str, Any],
    parts: bool = False,
    input_bytes: int | None = None,
    stage: Callable[[str], None] = lambda name: None,
) -> Counts:
    """Exact counts of one call at ``size``, and its memory (`memory_counts`).

    For a scenario with ``count_along`` whose value n is above 4 (or, with ``parts``, at
    least 2), counted with it at 2, 3 and 4 and extrapolated by the checked linear model
    (`scanbench.probes.extrapolation`): exact totals plus each count's fixed and per-unit parts.
    Otherwise counted directly on one call at ``size`` (exact; no parts), using
    ``prepared`` (a warm call at ``size``, its inputs ``input_bytes``) or, when None,
    preparing it here. A call prepared here is called once untraced (a path compiled on
    first use), then counted: one traced call, not two (the sequential MPPI loops at
    `default`, timed on part of their work, are prepared here at the full size, where a
    traced call costs as much as many untraced ones: performance log, 2026-11-23,
    "Cheaper counting"; a backend that compiles on every call, like the eager loop, shows
    those compilations either way). Memory is measured at
    ``size`` only, on a call of its own after the counted one (`scanbench.probes.memory`:
    that call's frees, made after `release_freed_memory`, return the allocator's free
    memory to the OS first).

    ``stage(name)`` is told what runs next (`scanbench.execution.heartbeat.Beacon.stage`): only the
    counted call times anything (its trace's device-busy share, its compilations), so
    only it is ``"counting"``, a quiet stage (`scanbench.execution.overlap`); preparing here and the
    plain call before it are `PREPARING_STAGE`, the memory call `MEMORY_STAGE`: a peak of this
    process's memory, which another process cannot change.
    """

    platform = device["platform"]
    inputs_of_full_size: list[int] = []

    def fresh(at: Size) -> Any:
        stage(PREPARING_STAGE)
        inputs = scenario.make_inputs(at, seed, dtype)
        if at is size:
            inputs_of_full_size.append(tree_nbytes(inputs))
        with unmeasured():  # a second compile nobody times (scanbench.compile_cache)
            return backend.prepare(inputs, at)

    def count_warm(ready: Any, warm: bool) -> dict[str, Any]:
        """Counts of a warm call: ``ready``'s next one, after one plain (untraced) call
        when ``ready`` was just prepared (a path compiled on first use)."""
        if not warm:
            stage(PREPARING_STAGE)
            if backend.setup is not None:
                backend.setup(ready)
            with unmeasured():  # its compiles are not the counted call's
                call_and_wait(backend.run, ready)
        stage(COUNTING_STAGE)
        return count_cell(backend, ready, platform)

    def with_memory(counts: dict[str, Any], ready: Any | None) -> Counts:
        if ready is not None:
            stage(COUNTING_STAGE)  # a time by function: quiet, like the counted call
            counts = {**counts, **host_profile(backend, ready, counts)}
        if ready is None:
            shown = ", ".join(map(str, POINTS))
            counts = {**counts, "memory_error": f"not measured at this size (counted at {shown})"}
            return Counts.from_json(counts)
        stage(MEMORY_STAGE)
        try:
            inputs = inputs_of_full_size[0] if inputs_of_full_size else input_bytes
            memory = call_memory(backend, ready, platform, inputs, counts.get("static"))
            return Counts.from_json({**counts, "memory": memory})
        except Exception as error:  # stored next to the counts; the timing stays valid
            return Counts.from_json({**counts, "memory_error": f"{type(error).__name__}: {error}"})

    # process-wide allocator settings for the memory probe, undone on the way out: a
    # process that times again afterwards (pytest-benchmark tests, `compare`) would
    # otherwise map and unmap every buffer above 128 KiB, and a sub-millisecond call would
    # time several times slower
    with freed_memory_visible():
        along = scenario.count_along
        n = size[along] if along else None
        modelled = isinstance(n, int) and (n > max(POINTS) or (parts and n >= min(POINTS)))
        if along is None or not modelled:
            ready = fresh(size) if prepared is None else prepared
            counts = count_warm(ready, warm=prepared is not None)
            return with_memory({**counts, "scale": 1.0}, ready)
        points = []
        for units in POINTS:
            small = Size(f"{size.name}-{along}-{units}", {**size.params, along: units})
            given = units == n and prepared is not None
            ready = prepared if given else fresh(small)
            points.append(count_warm(ready, warm=given))
        return with_memory({**linear_counts(points, along, n), "scale": 1.0}, prepared)


def host_profile(backend: Backend, ready: Any, counts: dict[str, Any]) -> dict[str, Any]:
    """``{"host_calls": ...}``: one call's host time by function (`scanbench.probes.
    host_calls`), for host code and for JAX code that dispatches more than once per call
    (host code runs between its calls); ``{}`` for one compiled program. At the cell's
    own size, never extrapolated: a time by function is no count."""
    dispatches = (counts.get("trace") or {}).get("dispatches") or 0
    if backend.engine not in HOST_CODE and dispatches < 2:
        return {}
    try:
        if backend.setup is not None:
            backend.setup(ready)
        # the engine's call_and_wait is not the backend's code: the profile starts inside it
        profiled = profile_call(functools.partial(call_and_wait, backend.run, ready))
        return {"host_calls": profiled.to_json()}
    except Exception as error:  # stored next to the counts; the timing stays valid
        return {"host_calls_error": f"{type(error).__name__}: {error}"}


def call_memory(
    backend: Backend,
    prepared: Any,
    platform: str,
    input_bytes: int | None,
    static: dict[str, Any] | None,
) -> dict[str, Any]:
    """One call's measured peak, the minimum it must hold (inputs + its output) and the
    largest static plan of its executables (`scanbench.probes.memory`)."""

    if backend.setup is not None:  # untimed and outside the measured peak
        backend.setup(prepared)
    before = live_arrays()
    output, peak = call_peak(lambda: call_and_wait(backend.run, prepared), platform)
    output_bytes = tree_nbytes(output)
    del output
    counts = memory_counts(peak, input_bytes, output_bytes, static)
    growth = _live_growth(backend, prepared, before)
    return {**counts, "live_growth": growth} if growth is not None else counts


def live_arrays() -> tuple[int, int]:
    """(bytes, count) of the JAX arrays alive in this process, after a collection."""
    gc.collect()
    alive = jax.live_arrays()
    return sum(int(array.nbytes) for array in alive), len(alive)


def _live_growth(backend: Backend, prepared: Any, before: tuple[int, int]) -> dict[str, int] | None:
    """The JAX arrays a call leaves alive after its output is dropped (a list, a cache or
    a global that keeps device arrays across calls): measured around the memory call,
    and, when that one grew, confirmed by one more call that must grow again (a cache
    filled once is no leak). Per call: the smaller of the two. None: no growth."""
    grown = live_arrays()
    first = (grown[0] - before[0], grown[1] - before[1])
    if first[0] <= 0:
        return None
    if backend.setup is not None:
        backend.setup(prepared)
    output = call_and_wait(backend.run, prepared)
    del output
    again = live_arrays()
    second = (again[0] - grown[0], again[1] - grown[1])
    if second[0] <= 0:
        return None
    return {"bytes_per_call": min(first[0], second[0]), "arrays_per_call": min(first[1], second[1])}


def memory_counts(
    peak: Any, input_bytes: int | None, output_bytes: int, static: dict[str, Any] | None
) -> dict[str, Any]:
    """The stored memory of a cell: the measured peak, the minimum (inputs + output) and
    the largest static plan of its executables (`scanbench.probes.memory`)."""
    plans = [
        info["memory"]
        for info in ((static or {}).get("executables") or {}).values()
        if (info.get("memory") or {}).get("available")
    ]
    largest = max(plans, key=lambda plan: plan["planned_bytes"], default=None)
    minimum = None if input_bytes is None else input_bytes + output_bytes
    return {
        "measured": peak.to_json(),
        "input_bytes": input_bytes,
        "output_bytes": output_bytes,
        "minimum_bytes": minimum,
        "planned_bytes": None if largest is None else largest["planned_bytes"],
        "temp_bytes": None if largest is None else largest["temp_bytes"],
        "temporaries": [] if largest is None else largest.get("temporaries", []),
    }


def count_cell(
    backend: Backend, prepared: Any, platform: str, log_dir: str | None = None
) -> dict[str, Any]:
    """Counts for one call of ``backend.run(prepared)``, in the stored layout of
    `scanbench.counts.Counts` (a dict, so that `scanbench.probes.extrapolation` can extrapolate
    several of them); see the module doc."""

    counts: dict[str, Any] = {"calls": 1}
    traced: list[Any] = []  # the trace's events, once recorded
    trace_errors: list[str] = []
    compilations: list[Any] = []
    conversions: list[Any] = []
    outputs: list[Any] = []
    traced_wall_s: list[float] = []  # the counted call's wall time under the profiler

    def set_up() -> None:
        """The backend's setup (restoring a stateful function's state), outside every
        probe, as before every timed call."""
        if backend.setup is not None:
            backend.setup(prepared)

    def call() -> None:
        with counting_conversions() as made:
            outputs.append(call_and_wait(backend.run, prepared))
        conversions.append(summarize_conversions(made))

    def counted_call() -> Any:
        """One call under the profiler and the compilation listeners (inside the transfer
        guard when that probe works); without the profiler when it cannot start."""
        try:
            with recording(log_dir) as events:
                start = time.perf_counter()
                compilations.append(count_compilations(call))
                traced_wall_s.append(time.perf_counter() - start)
            traced.append(events)
        except Exception as error:  # stored next to the counts; the timing stays valid
            trace_errors.append(f"{type(error).__name__}: {error}")
            if not outputs:  # the profiler failed before the call: call without it
                compilations.append(count_compilations(call))
        return outputs[0]

    try:
        set_up()
        counts["transfers"] = count_transfers(counted_call, platform).to_json()
    except Exception as error:
        counts["transfers_error"] = f"{type(error).__name__}: {error}"
    try:
        if not outputs:  # the transfer probe failed before the call: the call on its own
            set_up()
            counted_call()
    except Exception as error:
        trace_errors.append(f"{type(error).__name__}: {error}")
    if traced:
        try:
            counts["trace"] = count_events(traced[0]).to_json()
            counts["spans"] = measure_spans(traced[0], traced_wall_s[0]).to_json()
            if platform == "gpu":
                flags = os.environ.get("XLA_FLAGS", "")
                gpu = count_gpu_events(traced[0], command_buffers_enabled(flags))
                counts["gpu"] = gpu.to_json()
        except Exception as error:
            trace_errors.append(f"{type(error).__name__}: {error}")
    if trace_errors:
        counts["trace_error"] = trace_errors[0]
    if conversions:
        counts["conversions"] = conversions[0].to_json()
    if compilations:
        counts["compilations"] = compilations[0].to_json()
    else:
        counts["compilations_error"] = trace_errors[0] if trace_errors else "no counted call"
    try:
        counts["static"] = static_counts(backend, prepared)
    except Exception as error:
        counts["static_error"] = f"{type(error).__name__}: {error}"
    if backend.engine in HOST_CODE:  # a call of its own: tracing lines slows it down
        try:
            set_up()
            counts["python"] = count_lines(lambda: call_and_wait(backend.run, prepared)).to_json()
        except Exception as error:
            counts["python_error"] = f"{type(error).__name__}: {error}"
    return counts


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def cell_facts(backend: Backend, prepared: Any) -> dict[str, Any]:
    """What one prepared backend does per call, for `scanbench.gate.explain` (its
    ``Facts`` as JSON): one counted call (`count_cell`), each executable's HLO summary
    (`scanbench.probes.hlo.summarize`) and planned argument and temporary bytes, and this
    process's versions, XLA flags and device."""
    device = jax.devices()[0]
    counts = Counts.from_json(count_cell(backend, prepared, device.platform)).per_call()
    executables: dict[str, dict[str, Any]] = {}
    for name, (compiled, calls) in (backend.executables or (lambda p: {}))(prepared).items():
        plan = static_plan(compiled)
        executables[name] = {
            "calls_per_run": calls,
            **summarize(compiled.as_text()),
            "argument_bytes": plan.get("argument_bytes"),
            "temp_bytes": plan.get("temp_bytes"),
        }
    environment = {
        "jax": _version("jax"),
        "jaxlib": _version("jaxlib"),
        "numba": _version("numba"),
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
        "device": f"{device.platform} {device.device_kind} x{jax.device_count()}",
    }
    return {"counts": counts, "executables": executables, "environment": environment}
