"""What runs inside a fresh worker process: one cell, or the environment metadata.

Usage (by the runner, not by hand)::

    python -m scanbench.execution.worker cell SPEC.json OUT.json
    python -m scanbench.execution.worker environment OUT.json
    python -m scanbench.execution.worker facts OUT.json

A cell is checked against the scenario's reference before it is timed (`scanbench.checks`:
no NaN/inf where the reference has none, a finite max error, inputs left unchanged): a
backend that fails is stored as a failed record and never timed. Its last timed output is
checked again, so a backend that goes wrong on repetition fails too, saying so.

Samples in which the machine slowed down for a while (a *slow spell*, `scanbench.spells`),
or over which the runner's probes found the machine disturbed (the calibration probe's
drift, other programs' load, CPU steal: its answer when the samples end,
`scanbench.execution.quiet_link.QuietLink.timed_end`), are set aside and the call sampled
again in the same process, as many times as the runner allows (once, within the cell's
``--remeasure`` budget: `scanbench.execution.remeasure`): the prepared program is
steady, only the machine was not, and a fresh worker would compile it again (most of an
MPPI cell's time). The runner then tests the kept samples as any other
(`scanbench.execution.interference`) and stores the set-aside ones with the record.
"""

from __future__ import annotations

import sys
import time

# before the heavy imports below: their time is a stage of its own (IMPORTS_STAGE)
IMPORTS_STARTED = (time.perf_counter(), time.monotonic())

from .parent_watch import exit_with_parent

if __name__ == "__main__":  # first: a SIGTERM during the heavy imports below cleans up too
    exit_with_parent(sys.argv[1:])

import contextlib
import dataclasses
import functools
import json
import math
import os
import statistics
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import jax

from ..api import WARM, Backend, Counts, MismatchError, Record, Scenario, Size
from ..cells import Cell, scenario_of
from ..checks import InputSnapshot, check_again, check_of, checked_error, stateful_or
from ..compile_cache import measured_cold, unmeasured
from ..environment import collect, device_info
from ..probes.caches import evictor
from ..probes.compilations import compile_events, stages_of
from ..probes.memory import tree_nbytes
from ..probes.overheads import measure_all
from ..probes.passes import count_cell, counts_per_call
from ..probes.rates import measure_rates
from ..probes.usage import Meter
from ..safe_files import write_json_atomic
from ..sampling import TimingConfig
from ..sharding.distributed import (
    COORDINATOR,
    cell_device_info,
    initialize_distributed,
)
from ..spells import find_spell
from ..stages import (
    CHECK_STAGE,
    COMPILE_STAGE,
    COUNTING_STAGE,
    ESTIMATE_STAGE,
    FIRST_CALL_STAGE,
    IMPORTS_STAGE,
    INPUTS_STAGE,
    REFERENCE_STAGE,
    SAMPLING_STAGE,
)
from ..statistics import fewest_for_interval
from ..timing import call_span, repeat, time_call
from ..units import format_seconds
from ..xla_options import flags_in_effect
from .heartbeat import PROGRESS_FILE, Beacon
from .quiet_link import Pauses, QuietLink, Verdict
from .reference_cache import shared_reference
from .remeasure import sampled_again


def configure_jax(dtype: str) -> bool:
    """Enable 64-bit JAX for float64 cells (a process-wide flag: one cell per process)."""
    x64 = dtype == "float64"
    jax.config.update("jax_enable_x64", x64)
    return x64


@dataclasses.dataclass(frozen=True)
class Target:
    """What a measurement of a scenario's backend at a size is for: dtype and seed."""

    dtype: str
    seed: int = 0


def _skipped(scenario, backend, size, target: Target, base: dict[str, Any]) -> Record:
    """A skipped record, with the backend's extrapolated cost when it can estimate one."""
    reason = backend.skip_reason or "backend does not run at this size"
    message = f"skipped at size {size.name!r}: {reason}"
    extra: dict[str, Any] = {}
    if backend.estimate is not None:
        try:
            configure_jax(target.dtype)
            inputs = scenario.make_inputs(size, target.seed, target.dtype)
            extra = dict(backend.estimate(inputs, size))
            estimated = extra["estimated_s"]
            message += f"; estimated {estimated:.3g} s per run (partial run, extrapolated)"
        except Exception as error:  # the estimate is informative; the skip stands anyway
            extra = {"estimate_error": f"{type(error).__name__}: {error}"}
    return Record(status="skipped", error=message, extra=extra, **base)


def run_cell(
    cell: Cell,
    timing: TimingConfig,
    probes: bool = True,
    counts_only: bool = False,
    beacon: Beacon | None = None,
    count_parts: bool = False,
    summarize: bool = True,
    started: float | None = None,
    resample: int = 0,
) -> Record:
    """Load the cell's scenario from its source, then `measure` it.

    Args:
        probes: run the counting passes (trace, transfers, static HLO) after timing.
        counts_only: check and count, but take no timing samples (used for the extra GPU
            profiling pass with command buffers on).
        beacon: where the cell's phase is written for the runner's heartbeat.
        count_parts: count along the scenario's ``count_along`` at 2, 3 and 4 even when
            the size has 4 or fewer, to store each count's fixed and per-unit parts.
        summarize: compute ``stats`` here; the cell worker leaves them to the runner
            (`scanbench.execution.launcher.with_stats`), sparing every worker the slow
            import of ``scipy.stats``.
            started: when the cell's wall time starts (``time.perf_counter``; default: now).
    """
    beacon = beacon or Beacon(None)
    started = time.perf_counter() if started is None else started
    beacon.stage("start JAX")
    configure_jax(cell.dtype)  # before the scenario's code runs: it may make arrays
    measured_cold()  # compile times are reported: never from a persistent cache
    beacon.stage("load scenario", "loading the scenario")
    scenario = scenario_of(cell)
    backend = scenario.backend(cell.backend).with_params(dict(cell.params))
    return measure(
        scenario,
        backend,
        scenario.size(cell.size),
        Target(cell.dtype, cell.seed),
        timing,
        devices=cell.devices,
        params=dict(cell.params),
        cache=cell.cache,
        probes=probes,
        counts_only=counts_only,
        beacon=beacon,
        count_parts=count_parts,
        summarize=summarize,
        started=started,
        resample=resample,
    )


def measure(
    scenario: Scenario,
    backend: Backend,
    size: Size,
    target: Target,
    timing: TimingConfig,
    *,
    devices: int | None = None,
    params: dict[str, Any] | None = None,
    probes: bool = True,
    counts_only: bool = False,
    beacon: Beacon | None = None,
    count_parts: bool = False,
    summarize: bool = True,
    started: float | None = None,
    configure_x64: bool = True,
    cache: str = WARM,
    resample: int = 0,
) -> Record:
    """Prepare, check, time, then count one backend of a scenario at a size, in this
    process; any exception becomes a failed record (see `run_cell` for the options).
    `scanbench.notebook` measures a user's functions through it, as the cell worker does,
    with ``configure_x64=False``: a user's process keeps its own ``jax_enable_x64``.
    ``resample``: samples with a slow spell are set aside and taken again in this process
    up to this many times (a run passes what its ``--remeasure`` budget allows)."""
    beacon = beacon or Beacon(None)
    started = time.perf_counter() if started is None else started
    base: dict[str, Any] = {
        "params": dict(params or {}),
        "scenario": scenario.name,
        "backend": backend.name,
        "strategy": str(backend.strategy),
        "engine": backend.engine,
        "size": size.name,
        "dtype": target.dtype,
        "seed": target.seed,
        "devices": devices,
        "size_params": dict(size.params),
        "work": dict(scenario.work(size, target.dtype)),
        "checked": backend.checked,
        "parallel": backend.parallel or backend.strategy == "sharded",
        "chains": backend.chains,
        "cache": cache,
        "xla_flags": tuple(backend.xla_flags),
        "xla_flags_applied": flags_in_effect(backend.xla_flags, os.environ.get("XLA_FLAGS", "")),
    }
    if not backend.runs_at(size.name):
        beacon.stage(ESTIMATE_STAGE, "skipped at this size: estimating its cost")
        skipped = _skipped(scenario, backend, size, target, base)
        beacon.stop()
        extra = {**skipped.extra, "phases_s": beacon.stages}
        return dataclasses.replace(skipped, wall_s=time.perf_counter() - started, extra=extra)
    try:
        beacon.stage("start JAX")

        first_call_known = True
        if initialize_distributed():  # every process must make the same calls: by count
            timing = dataclasses.replace(
                timing, min_time_s=0.0, max_count=timing.min_count, max_time_s=math.inf
            )
            first_call_known = False
        if configure_x64:
            base["x64"] = configure_jax(target.dtype)
        else:
            base["x64"] = bool(jax.config.jax_enable_x64)
        base["device"] = {**device_info(), **cell_device_info()}
        measured = _measure(
            scenario,
            backend,
            size,
            target,
            timing,
            counts_only,
            first_call_known,
            beacon,
            cache,
            resample,
        )
        counts = Counts()
        if probes or counts_only:
            beacon.stage(COUNTING_STAGE, "counting (trace, transfers, HLO, memory)")
            device = base["device"]
            counts = _counts(
                scenario, backend, size, target, measured, device, count_parts, beacon.stage
            )
    except Exception as error:  # a failed cell is stored with its error; the run goes on
        beacon.stop()
        return Record(
            status="failed",
            error=f"{type(error).__name__}: {error}",
            wall_s=time.perf_counter() - started,
            extra={"traceback": traceback.format_exc(limit=8), "phases_s": beacon.stages},
            **base,
        )
    beacon.stop()
    stats: dict[str, Any] = {}
    if measured.samples and summarize:
        from ..statistics import summarize_scaled

        stats = summarize_scaled(measured.samples, timing.confidence, measured.factor)
    return Record(
        status="ok",
        prepare_s=measured.prepare_s,
        first_call_s=measured.first_call_s,
        samples_s=measured.samples,
        stats=stats,
        max_error=measured.max_error,
        wall_s=time.perf_counter() - started,
        counts=counts,
        sampling=measured.sampling,
        extra={
            "phases_s": beacon.stages,
            **({"output": dict(measured.described)} if measured.described else {}),
            # prepare_s and first_call_s are then no compile times (a counts-only cell)
            **({"compile_cache": True} if measured.compiled_from_cache else {}),
            **({"compile_stages": measured.compile_stages} if measured.compile_stages else {}),
        },
        **base,
    )


@dataclasses.dataclass(frozen=True)
class _Measured:
    """What the check-and-time phase of a cell found (at the full or a reduced size)."""

    size: Size  # the size actually measured
    prepared: Any
    prepare_s: float
    first_call_s: float
    samples: tuple[float, ...]
    max_error: float | None  # None: the backend is timed unchecked (Backend.checked)
    described: Any
    sampling: dict[str, Any]
    factor: float = 1.0  # full work / measured work
    input_bytes: int | None = None  # of the scenario's inputs at ``size``
    compiled_from_cache: bool = False  # a counts-only cell's compiles, from the cache
    # prepare's and the first call's time by JAX's stages (probes.compilations.CompileStages)
    compile_stages: dict[str, Any] = dataclasses.field(default_factory=dict)


def _check_and_time(
    scenario,
    backend,
    size,
    target,
    timing,
    counts_only,
    first_call_known,
    beacon: Beacon,
    cache: str = WARM,
    resample: int = 0,
):
    """Prepare, check the first call, then sample (adaptive, `scanbench.timing.repeat`);
    samples with a slow spell (`scanbench.spells`) are set aside and the call sampled
    again, up to ``resample`` times."""
    along = scenario.count_along
    part = f" on {size[along]} {along}" if along and size is not scenario.size(size.name) else ""
    beacon.stage(INPUTS_STAGE, f"building the inputs{part}")
    inputs = scenario.make_inputs(size, target.seed, target.dtype)
    beacon.stage(REFERENCE_STAGE, f"computing the reference{part}")
    expected = shared_reference(scenario, inputs)  # once per run (reference_cache)
    snapshot = InputSnapshot.of(inputs)
    # a counts-only cell (the gate's count rules) reports no compile time: its compiles
    # may come from the persistent cache (scanbench.compile_cache); a timed cell's never
    cached = unmeasured() if counts_only else contextlib.nullcontext(False)
    beacon.stage(COMPILE_STAGE, f"preparing (compiling){part}")
    jax.clear_caches()  # cold in this process too (the notebook API, a second part)
    with cached as from_cache, compile_events() as events:
        start = time.monotonic()  # the clock of the runner's pauses (execution.overlap)
        prepared = backend.prepare(inputs, size)
        prepared_at = time.monotonic()
        prepare_s = prepared_at - start - beacon.paused_between(start, prepared_at)
        setup = None if backend.setup is None else functools.partial(backend.setup, prepared)
        beacon.stage(FIRST_CALL_STAGE, f"the first call{part}")
        output, first_call_s = first_call(backend.run, prepared, setup, beacon.paused_between)
    paused = beacon.paused_between
    stages = {  # JAX's trace, lowering and compile events of each phase, by when they ended
        "prepare": stages_of([e for e in events if e[3] <= prepared_at], prepare_s, paused),
        "first_call": stages_of([e for e in events if e[3] > prepared_at], first_call_s, paused),
    }
    beacon.stage(CHECK_STAGE, f"checking the first call{part}")
    snapshot.verify(inputs, "during prepare or the first call")
    check = check_of(scenario, backend, prepared)
    max_error = None
    if backend.checked:
        try:
            max_error = checked_error(check, backend.to_reference(output), expected, target.dtype)
        except MismatchError as error:  # the same inputs again: a function with state?
            again = functools.partial(time_call, backend.run, prepared, before=setup)
            raise stateful_or(error, lambda: again()[0], output) from None
    own_answer = scenario.describe_output is not None and backend.check is None
    described = scenario.describe_output(output) if own_answer else None
    samples: tuple[float, ...] = ()
    sampling: dict[str, Any] = {}
    if not counts_only:
        # the sampling loop's stopping rule imports it on its first interval
        # (`scanbench.timing.median_interval_indices`): 0.2-0.8 s, paid here, while the
        # other cell's worker may run, instead of in the quiet stage with it stopped
        import scipy.special  # noqa: F401

        known = first_call_s if first_call_known else None
        beacon.stage(SAMPLING_STAGE, f"sampling{part} (first call {format_seconds(first_call_s)})")
        set_aside: list[dict[str, Any]] = []
        calls = 1
        while True:
            meter = Meter()  # cores and fresh pages of the timed calls (probes.usage)

            def sampled(count: int, meter: Meter = meter) -> None:
                meter.sampled(count)
                beacon.samples(count)

            timed = repeat(
                backend.run,
                prepared,
                timing,
                first_call_s=known,
                on_sample=sampled,
                before=meter.before(_before_sample(setup, cache)),
            )
            calls += timed.warmup_calls + len(timed.samples)
            if len(set_aside) >= resample:
                break
            spell = find_spell(timed.samples, target.seed)
            verdict = beacon.timed_end()  # the runner's closing probes: was it disturbed?
            if verdict is Verdict.BUSY:  # by programs that still run: the same again
                break
            if spell is None and verdict is Verdict.STEADY:
                break
            # a slow spell, or a machine the runner found disturbed over the samples:
            # sampled again in this process, still in the quiet stage (the module doc);
            # the samples set aside are kept with the record, the runner's verdict on them
            # beside (`scanbench.execution.remeasure.resampled`)
            beacon.again()
            set_aside.append(sampled_again(timed.samples, spell).to_json())
        samples, sampling = timed.samples, timed.sampling(timing)
        if set_aside:
            sampling["set_aside"] = set_aside
        usage = meter.usage(len(samples))
        if usage is not None:
            sampling["usage"] = usage.to_json()
        # the last output checked still in the quiet stage: giving the machine back for
        # it and taking it again to count costs a probe more than the check (milliseconds)
        snapshot.verify(inputs, f"during the first {calls} calls")
        if backend.checked:
            last_error = check_again(
                check, backend.to_reference(timed.output), expected, target.dtype, calls
            )
            max_error = max(max_error, last_error)
    return _Measured(
        size,
        prepared,
        prepare_s,
        first_call_s,
        samples,
        max_error,
        described,
        sampling,
        input_bytes=tree_nbytes(inputs),
        compiled_from_cache=from_cache,
        compile_stages={phase: found.to_json() for phase, found in stages.items()},
    )


def first_call(
    run: Callable[[Any], Any],
    prepared: Any,
    setup: Callable[[], Any] | None,
    paused_between: Callable[[float, float], float],
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Any, float]:
    """The first call's output and seconds, the runner's pauses within the call left out:
    only within it (`scanbench.timing.call_span`), since a stop that begins just after the
    call returns, before the pauses are read, is no part of its time."""
    output, start, end = call_span(run, prepared, clock=clock, before=setup)
    return output, end - start - paused_between(start, end)


def _before_sample(setup: Callable[[], Any] | None, cache: str) -> Callable[[], None] | None:
    """What runs untimed before every sample: the backend's setup, then, for a cold
    sample, the eviction of the caches (after the setup, which may touch the data)."""
    if cache == WARM:
        return setup
    evict = evictor()

    def before() -> None:
        if setup is not None:
            setup()
        evict()

    return before


def reduced_size(scenario: Scenario, backend: Backend, size: Size) -> Size | None:
    """The smaller size a costly backend is first measured at (`Backend.reducible_to`
    units of the scenario's ``count_along``), or None when it does not apply."""
    along, units = scenario.count_along, backend.reducible_to
    if along is None or units is None or size[along] <= units:
        return None
    return Size(size.name, {**size.params, along: units}, size.description)


def _measure(
    scenario,
    backend,
    size,
    target,
    timing,
    counts_only,
    first_call_known,
    beacon: Beacon,
    cache: str = WARM,
    resample: int = 0,
) -> _Measured:
    """Check and time the target; a costly backend (`Backend.reducible_to`) is measured on
    part of the work first, and kept there, scaled, when ``min_count`` whole calls would
    not fit in the time budget: its warm reduced call (the median sample; the first call
    when it is the only one) x the work ratio x ``min_count`` > ``max_time_s`` (measuring
    it again whole would then take that long in samples alone, plus its first call and
    check). A first call slowed by compilation alone does not decide it: such a backend
    is then measured whole, exactly, and the part's measurement is dropped with the
    runner's verdicts on it (`Beacon.anew`). The cells that set this rule are in the
    performance log (2026-11-23, "Work measured in part")."""
    reduced = reduced_size(scenario, backend, size) if first_call_known else None
    if reduced is not None and not counts_only:
        # the part takes the samples an interval needs, past the budget when its calls are
        # too long for that many in it (docs/methodology.md, "work measured in part")
        fewest = max(
            timing.min_samples, min(fewest_for_interval(timing.confidence), timing.max_count)
        )
        part = _check_and_time(
            scenario,
            backend,
            reduced,
            target,
            dataclasses.replace(timing, min_samples=fewest),
            False,
            True,
            beacon,
            cache,
            resample,
        )
        along = scenario.count_along
        factor = size[along] / reduced[along]
        warm_s = statistics.median(part.samples) if part.samples else part.first_call_s
        predicted = warm_s * factor
        if predicted * max(timing.min_count, 1) > timing.max_time_s:
            sampling = {
                **part.sampling,
                "scaled": {
                    "along": along,
                    "measured": reduced[along],
                    "full": size[along],
                    "factor": factor,
                    "predicted_full_call_s": predicted,
                },
            }
            return dataclasses.replace(part, sampling=sampling, factor=factor)
        beacon.anew()  # the whole call's samples judged by the runner's probes around them
    return _check_and_time(
        scenario,
        backend,
        size,
        target,
        timing,
        counts_only,
        first_call_known,
        beacon,
        cache,
        resample,
    )


def _counts(
    scenario,
    backend,
    size,
    target,
    measured: _Measured,
    device,
    parts: bool = False,
    stage: Callable[[str], None] = lambda name: None,
) -> Counts:
    """Exact counts per call at ``size`` (`counts_per_call`: directly, or by the checked
    linear model). A target timed on part of the work (`_measure`) is still counted at the
    full size: its reduced call's counts x the work ratio would scale once-per-call work
    too (setup, the one dispatch of a scanned loop)."""
    whole = measured.factor == 1.0
    return counts_per_call(
        scenario,
        backend,
        size,
        measured.prepared if whole else None,
        target.seed,
        target.dtype,
        device,
        parts=parts,
        input_bytes=measured.input_bytes if whole else None,
        stage=stage,
    )


def profile_cell(cell: Cell, log_dir: str) -> dict[str, Any]:
    """Check one cell, then trace one warm call into ``log_dir`` and count it."""

    configure_jax(cell.dtype)  # before the scenario's code runs: it may make arrays
    scenario = scenario_of(cell)
    backend = scenario.backend(cell.backend).with_params(dict(cell.params))
    target = Target(cell.dtype, cell.seed)
    return profile_backend(scenario, backend, scenario.size(cell.size), target, log_dir)


def profile_backend(
    scenario: Scenario, backend: Backend, size: Size, target: Target, log_dir: str
) -> dict[str, Any]:
    """Check one backend at a size, then trace one warm call into ``log_dir`` and count
    it, in this process: `profile_cell`'s worker, and `scanbench.notebook.profile`'s
    ``trace=`` without ``isolate``."""
    inputs = scenario.make_inputs(size, target.seed, target.dtype)
    expected = scenario.reference(inputs)
    prepared = backend.prepare(inputs, size)
    setup = None if backend.setup is None else functools.partial(backend.setup, prepared)
    output, _ = time_call(backend.run, prepared, before=setup)
    if backend.checked:
        check = check_of(scenario, backend, prepared)
        checked_error(check, backend.to_reference(output), expected, target.dtype)
    return count_cell(backend, prepared, device_info()["platform"], log_dir=log_dir)


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "cell":
        spec = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        beacon = Beacon(
            Path(argv[2]).parent / PROGRESS_FILE,
            link=QuietLink.from_environ(),  # two workers, timed alone (overlap.py)
            pauses=Pauses.from_environ(),
        )
        beacon.ended(IMPORTS_STAGE, IMPORTS_STARTED[1])  # this module's imports
        record = run_cell(
            Cell(**spec["cell"]),
            TimingConfig(**spec["timing"]),
            probes=spec.get("probes", True),
            counts_only=spec.get("counts_only", False),
            beacon=beacon,
            count_parts=spec.get("count_parts", False),
            summarize=False,  # the runner summarizes (it has scipy.stats loaded already)
            started=IMPORTS_STARTED[0],  # the wall time includes the imports' stage
            resample=spec.get("resample", 0),
        )
        write_json_atomic(argv[2], record.to_json())
        return 0
    if len(argv) == 4 and argv[0] == "profile":
        spec = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
        write_json_atomic(argv[3], profile_cell(Cell(**spec["cell"]), argv[2]))
        return 0
    if len(argv) == 2 and argv[0] == "facts":  # what a resumed run compares, unmeasured
        write_json_atomic(argv[1], collect(measure_bandwidth=False))
        return 0
    if len(argv) == 2 and argv[0] in ("environment", "machine"):  # machine: no unit costs
        environment = collect()
        if argv[0] == "environment":
            with unmeasured():  # the probes time warm calls: their compiles may be cached
                # arithmetic, a page fault, a call
                environment["rates"] = measure_rates(environment["platform"])
                environment["overheads"] = measure_all()
        write_json_atomic(argv[1], environment)
        return 0
    print(
        "usage: python -m scanbench.execution.worker "
        "(cell SPEC OUT | profile SPEC DIR OUT | environment OUT | machine OUT | facts OUT)",
        file=sys.stderr,
    )
    return 2


def leave(code: int) -> NoReturn:
    """Exit without the interpreter's teardown. The worker's result is already on disk
    (`write_json_atomic`: fsync, then rename); the teardown, with JAX's executables,
    thread pools and a few hundred modules loaded, is a large share of a short cell's
    process (performance log, 2026-11-23, "Workers leave with `os._exit`") and does
    nothing the parent reads. A multi-process run is left
    properly first (``jax.distributed.shutdown``, what JAX's own exit hook does), and the
    standard streams are flushed."""
    if COORDINATOR in os.environ:
        jax.distributed.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(main(sys.argv[1:]))
