"""Cells in worker processes (the parent's side of `scanbench.execution.worker`): each cell in a
fresh process with a timeout, the machine's load watched while it runs.

A crash, a timeout or a mismatch in one cell becomes a failed record with its error and
the other cells still run. Progress is shown with rich on a terminal, as plain lines
otherwise.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, as_completed, wait
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from ..api import HarnessError, Record, StoreError, Strategy
from ..cells import Cell, cell_spec, scenario_of
from ..compile_cache import numba_cold
from ..credentials import redact
from ..decomposition import decompose
from ..probes.gpu import with_command_buffers
from ..results import validate_record
from ..sampling import TimingConfig
from ..sharding.distributed import environ_for
from ..shown_text import for_terminal
from ..stages import PAUSED_STAGE
from ..statistics import summarize_scaled
from ..units import format_duration, format_seconds
from ..xla_options import merge, refusal_message, refusals
from .heartbeat import PROGRESS_FILE, heartbeat
from .interference import Interference, still_busy, with_slow_spell
from .interrupts import raise_if_interrupted
from .overlap import Machine, is_stopped, run_worker
from .processes import Finished, run_worker_process, stderr_tail
from .remeasure import IN_WORKER, REMEASURE, left_of, needs_another, remeasured, resampled


def _worker_command(*args: str, python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", "scanbench.execution.worker", *args]


def _run_worker(
    args: list[str],
    out: Path,
    timeout_s: float,
    environ: dict[str, str] | None = None,
    beat: tuple[str, Callable[[str], None]] | None = None,
    python: str | None = None,
    machine: Machine | None = None,
) -> tuple[Any, str | None, Finished]:
    """Run a worker; return (parsed output or None, error message or None, how it ended).
    Under a ``machine`` (`scanbench.execution.overlap`), it starts when admitted and its quiet
    stages are served (the interference measured over them); with ``beat = (label, emit)``, a
    heartbeat line is emitted every 30 s."""
    env = dict(environ if environ is not None else os.environ, PYTHONUNBUFFERED="1")

    def while_running(pid: int) -> contextlib.AbstractContextManager:
        if beat is None:
            return contextlib.nullcontext()
        return heartbeat(
            beat[0], out.parent / PROGRESS_FILE, beat[1], stopped=lambda: is_stopped(pid)
        )

    command = _worker_command(*args, python=python)
    if machine is None:
        finished = run_worker_process(command, env, timeout_s, while_running)
    else:
        finished = run_worker(machine, command, env, timeout_s, out.parent, while_running)
    error = finished.failure(timeout_s)
    if error is None and not out.exists():
        error = "worker exited without writing its result: " + (
            stderr_tail(finished.stderr) or "(no stderr)"
        )
    if error is not None:
        return None, error, finished
    return json.loads(out.read_text(encoding="utf-8")), None, finished


def invalid_record(data: Any) -> str | None:
    """Why a worker's record would make the results file unreadable
    (`scanbench.results.validate_record`), else None: the cell then fails with that line,
    where it happened, instead of every report of the run refusing the file."""
    try:
        validate_record(data)
    except StoreError as error:
        return f"the worker wrote an invalid record, a bug of scanbench: {error}"
    return None


def _failed_record(cell: Cell, error: str, wall_s: float) -> Record:
    """The record of a cell whose worker died: what the cell was (strategy, size
    parameters, work), so reports show it in its table, and how it died."""
    strategy = engine = "unknown"
    size_params: dict[str, Any] = {}
    work: dict[str, float] = {}
    try:
        scenario = scenario_of(cell)
        backend = scenario.backend(cell.backend)
        strategy, engine = str(backend.strategy), backend.engine
        size = scenario.size(cell.size)
        size_params, work = dict(size.params), dict(scenario.work(size, cell.dtype))
    except Exception:  # noqa: S110 (the worker's error says what went wrong; keep what is known)
        pass
    return Record(
        size_params=size_params,
        work=work,
        devices=cell.devices,
        scenario=cell.scenario,
        backend=cell.backend,
        strategy=strategy,
        engine=engine,
        size=cell.size,
        dtype=cell.dtype,
        seed=cell.seed,
        params=dict(cell.params),
        cache=cell.cache,
        status="failed",
        error=error,
        wall_s=wall_s,
    )


def worker_environ(cell: Cell, base: Mapping[str, str]) -> dict[str, str]:
    """The environment of a cell's worker: its devices (`scanbench.sharding.distributed.
    environ_for`; a sharded backend given no device count gets one XLA:CPU device per
    core, JAX's way to use every core of a CPU, while the other backends stay on one) and
    the XLA flags its backend declares (`scanbench.api.Backend.xla_flags`)."""
    try:
        backend = scenario_of(cell).backend(cell.backend).with_params(dict(cell.params))
    except Exception:  # the worker reports what is wrong with the cell
        return environ_for(cell.devices, base)
    environ = environ_for(cell.devices, base, per_core=backend.strategy == Strategy.SHARDED)
    if backend.xla_flags:
        environ["XLA_FLAGS"] = merge(environ.get("XLA_FLAGS", ""), backend.xla_flags)
    return environ


def refused_flags(cell: Cell, python: str | None, environ: Mapping[str, str]) -> str | None:
    """One line naming each XLA flag the cell's backend declares that the interpreter's
    jaxlib refuses or would silently ignore (`scanbench.xla_options.refusals`), else None:
    the cell then fails with that line instead of its worker aborting."""
    try:
        backend = scenario_of(cell).backend(cell.backend).with_params(dict(cell.params))
    except Exception:  # the worker reports what is wrong with the cell
        return None
    if not backend.xla_flags:
        return None
    check = refusals(backend.xla_flags, python, environ)
    return refusal_message(f"backend {backend.name!r}", check.refused) if check.refused else None


def run_cell_in_worker(
    cell: Cell,
    timing: TimingConfig,
    timeout_s: float,
    probes: bool = True,
    counts_only: bool = False,
    environ: dict[str, str] | None = None,
    emit: Callable[[str], None] | None = None,
    count_parts: bool = False,
    python: str | None = None,
    machine: Machine | None = None,
    resample: int = 0,
) -> Record:
    """One cell in a fresh process; never raises for a failure of the cell itself.
    ``emit`` receives a heartbeat line every 30 s while it runs; ``count_parts``: see
    `scanbench.execution.worker.run_cell`; ``python``: the interpreter (default: this one);
    ``machine``: shared with the run's other cells (`scanbench.execution.overlap`; default: its own,
    one slot). The interference is measured over the cell's quiet stages, and its samples
    are tested for a slow spell (`scanbench.execution.interference.with_slow_spell`);
    ``resample``: samples with a slow spell are taken again in the worker up to this many
    times, those set aside stored in the interference with the time they took."""
    started = time.perf_counter()
    machine = machine or Machine()
    # the runner's own work, never beside another cell's samples: loading the scenario,
    # and the XLA flags' check, a fresh interpreter that starts JAX (it ran beside the
    # samples of the cell before the first MPPI cell: "python in 11 of 11 samples")
    with machine.untimed():
        environ = worker_environ(cell, os.environ if environ is None else environ)
        refused = refused_flags(cell, python, environ)
    if refused:
        return _failed_record(cell, refused, time.perf_counter() - started)
    with tempfile.TemporaryDirectory(prefix="scanbench-cell-") as tmp:
        spec, out = Path(tmp, "spec.json"), Path(tmp, "record.json")
        if not counts_only:  # its compile times are reported (a counts-only cell's are not)
            environ = numba_cold(environ, Path(tmp, "numba-cache"))
        spec_json = cell_spec(cell, timing, probes, counts_only, count_parts, resample)
        spec.write_text(json.dumps(spec_json), encoding="utf-8")
        beat = (cell.label, emit) if emit is not None else None
        data, error, finished = _run_worker(
            ["cell", str(spec), str(out)],
            out,
            timeout_s,
            environ,
            beat,
            python,
            machine,
        )
    wall_s = time.perf_counter() - started
    interference = finished.interference or {}
    error = error or invalid_record(data)
    if error is not None:
        record = _failed_record(cell, error, wall_s)
    else:
        with machine.untimed():  # never beside another cell's samples (scanbench.execution.overlap)
            record, interference = resampled(
                with_stats(Record.from_json(data), timing.confidence),
                interference,
                finished.windows,
            )
            if record.status == "ok" and record.samples_s:
                tested = with_slow_spell(
                    Interference.from_json(interference), record.samples_s, record.seed
                )
                interference = tested.to_json()
    phases = dict(record.extra.get("phases_s", {}))
    if finished.waited_s > 0.01:
        phases["waiting to start"] = finished.waited_s
    if error is None:  # the worker's own stages; the rest of its life is start-up and exit
        # pauses the worker's stages did not see: before its first stage (imports)
        unseen = max(0.0, finished.paused_s - phases.get(PAUSED_STAGE, 0.0))
        if unseen > 0.001:
            phases[PAUSED_STAGE] = phases.get(PAUSED_STAGE, 0.0) + unseen
        accounted = (record.wall_s or 0.0) + finished.waited_s + finished.probes_s + unseen
        phases["process start-up and exit"] = max(0.0, wall_s - accounted)
    phases["interference probes"] = finished.probes_s
    extra = {**record.extra, "phases_s": phases, "cells_at_once": machine.slots}
    return dataclasses.replace(record, interference=interference, extra=extra)


def with_stats(record: Record, confidence: float) -> Record:
    """The record with its ``stats`` computed from its samples (the worker leaves them to
    the runner, see `scanbench.execution.worker.run_cell`), scaled like the samples' work when the
    cell was measured on part of it."""
    if record.status != "ok" or not record.samples_s or record.stats:
        return record
    factor = (record.sampling.get("scaled") or {}).get("factor", 1.0)
    stats = summarize_scaled(record.samples_s, confidence, factor)
    return dataclasses.replace(record, stats=stats)


def profile_in_worker(
    cell: Cell, log_dir: str, timeout_s: float, environ: dict[str, str] | None = None
) -> dict[str, Any]:
    """Trace one call of a cell in a fresh process, keeping the trace in ``log_dir``; the
    process starts as the cell's worker does (`worker_environ` of ``environ``, default
    this process's: its devices and the XLA flags its backend declares)."""
    environ = worker_environ(cell, os.environ if environ is None else environ)
    with tempfile.TemporaryDirectory(prefix="scanbench-profile-") as tmp:
        spec, out = Path(tmp, "spec.json"), Path(tmp, "counts.json")
        spec.write_text(json.dumps(cell_spec(cell, TimingConfig())), encoding="utf-8")
        command = ["profile", str(spec), log_dir, str(out)]
        data, error, _ = _run_worker(command, out, timeout_s, environ=environ)
    if error is not None:
        raise HarnessError(f"profiling {cell.label} failed: {error}")
    return data


def collect_environment(
    timeout_s: float = 300.0, measure: bool = True, unit_costs: bool = True
) -> dict[str, Any]:
    """Environment metadata, the memory bandwidths, unit costs and rates, measured in a
    fresh process; without ``measure``, the metadata only (versions, device, CPU, flags,
    commit: what a resumed run compares, about 2 s less). Without ``unit_costs``, no unit
    costs or rates (``overheads``, ``rates``): they price counts, which a run without
    probes takes none of, and they are about 3.5 s of the 5 s its environment takes."""
    with tempfile.TemporaryDirectory(prefix="scanbench-env-") as tmp:
        out = Path(tmp, "environment.json")
        mode = "facts" if not measure else "environment" if unit_costs else "machine"
        data, error, _ = _run_worker([mode, str(out)], out, timeout_s)
    if error is not None:
        raise HarnessError(f"could not collect the environment metadata: {error}")
    return data


def _describe(record: Record) -> str:
    disturbed = " (disturbed: " + "; ".join(record.interference.get("reasons", ())) + ")"
    if record.status == "ok" and "median" in record.stats:
        median = f"ok, median {format_seconds(record.stats['median'])}"
        return median + (disturbed if record.disturbed else "")
    if record.status == "ok":
        return "ok (checked and counted, not timed)"
    return f"{record.status}: {(record.error or '').splitlines()[0][:160]}"


def measure_cell(
    cell: Cell,
    timing: TimingConfig,
    timeout_s: float,
    environment: dict[str, Any] | None = None,
    probes: bool = True,
    emit: Callable[[str], None] | None = None,
    count_parts: bool = False,
    machine: Machine | None = None,
    resample: int = 0,
) -> Record:
    """A cell in a worker (under the run's ``machine``, `scanbench.execution.overlap`), plus its
    time decomposition from the run's unit costs (``resample``: see `run_cell_in_worker`).

    On a GPU, JAX cells are profiled a second time in a counts-only worker with command
    buffers kept on while profiling (``counts["gpu_command_buffers"]``).
    """
    record = run_cell_in_worker(
        cell,
        timing,
        timeout_s,
        probes,
        emit=emit,
        count_parts=count_parts,
        machine=machine,
        resample=resample,
    )
    if record.status != "ok" or not probes:
        return record
    environment = environment or {}
    counts = record.counts
    if environment.get("platform") == "gpu" and record.engine == "jax":
        extra = run_cell_in_worker(
            cell,
            timing,
            timeout_s,
            counts_only=True,
            environ=with_command_buffers(os.environ),
            machine=machine,
        )
        gpu = extra.counts.sections.get("gpu") or {"error": extra.error}
        counts = counts.with_section("gpu_command_buffers", gpu)
    return decomposed(dataclasses.replace(record, counts=counts), environment)


def decomposed(record: Record, environment: Mapping[str, Any]) -> Record:
    """The record with its time decomposition (`scanbench.decomposition`) from the unit costs
    measured in the run (``environment.overheads``); as it was when there are none."""
    costs = environment.get("overheads") or {}
    if record.status != "ok" or "median" not in record.stats or not costs:
        return record
    try:
        decomposition = decompose(record.stats["median"], record.counts, costs)
    except Exception as error:  # a cell's numbers must never stop the run: stored with it
        decomposition = {"error": f"cannot decompose: {type(error).__name__}: {error}"}
    return dataclasses.replace(record, decomposition=decomposition)


Measure = Callable[[Cell, Callable[[str], None]], Record]  # (cell, heartbeat sink) -> record


CellMeasure = Callable[[Cell, Callable[[str], None], int], Record]  # (cell, emit, resample)


def measuring(
    timing: TimingConfig,
    timeout_s: float,
    environment: dict[str, Any] | None = None,
    probes: bool = True,
    count_parts: bool = False,
    machine: Machine | None = None,
) -> CellMeasure:
    """How a run measures a cell once: `measure_cell` with these settings, every cell
    under the same ``machine`` (`scanbench.execution.overlap`), its worker sampling a
    disturbed call again up to the ``resample`` it is given. `first_pass` and
    `measuring_again` give it what each cell's budget allows."""
    machine = machine or Machine()

    def measure(cell: Cell, emit: Callable[[str], None], resample: int) -> Record:
        return measure_cell(
            cell, timing, timeout_s, environment, probes, emit, count_parts, machine, resample
        )

    return measure


def first_pass(once: CellMeasure, remeasure: int = REMEASURE) -> Measure:
    """Each cell's first measurement: sampled again in its worker `IN_WORKER` times at
    most, within its budget of ``remeasure`` samplings (`scanbench.execution.remeasure`;
    `measuring_again` spends the rest after the run's other cells)."""
    return lambda cell, emit: once(cell, emit, min(remeasure, IN_WORKER))


def to_measure_again(records: Sequence[Record], remeasure: int) -> list[Record]:
    """The timed records still disturbed with some of their budget of ``remeasure``
    samplings left (`scanbench.execution.remeasure`)."""
    return [r for r in records if needs_another(r) and left_of(r, remeasure) > 0]


def measuring_again(
    first: Mapping[tuple, Record], once: CellMeasure, remeasure: int = REMEASURE
) -> Measure:
    """How a run measures again the cells whose first measurement (``first``, by cell
    key) was disturbed: in fresh workers, with what is left of each cell's budget of
    ``remeasure`` samplings, the quietest measurement kept
    (`scanbench.execution.remeasure.remeasured`)."""

    def measure(cell: Cell, emit: Callable[[str], None]) -> Record:
        def again(left: int) -> Record:
            return once(cell, emit, min(left, IN_WORKER))

        return remeasured(again, remeasure, emit, still_busy, first=first[cell.key])

    return measure


def run_cells(
    cells: Sequence[Cell],
    measure_one: Measure,
    show_progress: bool | None = None,
    on_record: Callable[[Record], None] | None = None,
    machine: Machine | None = None,
) -> list[Record]:
    """Measure every cell (``measure_one(cell, emit)``; `measuring` builds the usual one),
    as many at once as the ``machine`` has slots (the one ``measure_one`` uses; each cell
    in a thread, `scanbench.execution.overlap` keeps their timed stages apart); return one record
    per cell, in the order of ``cells``. ``on_record(record)`` is called in this thread as
    each cell finishes (the journal): after a SIGINT or SIGTERM
    (`scanbench.execution.interrupts.Interrupted`, raised here) no cell is recorded, and the
    exception propagates once every cell's worker is stopped and its thread has ended."""
    if show_progress is None:
        show_progress = sys.stderr.isatty()
    records: dict[int, Record] = {}
    started = time.perf_counter()
    finished: list[float] = []  # runner-seen wall time of each finished cell
    say = emit
    progress = task = None
    stack = contextlib.ExitStack()
    if show_progress:
        console = Console(stderr=True)
        columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
        progress = stack.enter_context(Progress(*columns, console=console))
        task = progress.add_task("starting", total=len(cells))

        def say(line: str) -> None:  # a cell's error is text, never markup or escapes
            console.print(for_terminal(redact(line)), markup=False)

    running: dict[int, str] = {}
    lock = threading.Lock()

    def one(index: int, cell: Cell) -> Record:
        running[index] = cell.label
        if progress is not None:
            labels = for_terminal(", ".join(running.values()))  # names: text, not markup
            progress.update(task, description=escape(labels))
        else:
            say(f"[{index + 1}/{len(cells)}] {cell.label}: running")
        cell_started = time.perf_counter()
        try:
            record = measure_one(cell, say)
        finally:
            running.pop(index, None)
        raise_if_interrupted()  # a cell ended by the signal is not a result
        with lock:  # the result line here, before the next cell's "running" line
            finished.append(time.perf_counter() - cell_started)
            eta = _eta(finished, len(cells), started)
            if progress is not None:
                progress.advance(task)
                say(f"{cell.label}: {_describe(record)}{eta}")
            else:
                say(f"[{index + 1}/{len(cells)}] {cell.label}: {_describe(record)}{eta}")
        return record

    jobs = machine.slots if machine is not None else 1
    with stack, ThreadPoolExecutor(max_workers=jobs) as pool:
        pending = {pool.submit(one, i, cell): i for i, cell in enumerate(cells)}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    index = pending.pop(future)
                    record = future.result()
                    raise_if_interrupted()  # a cell ended by the signal is not a result
                    records[index] = record
                    if on_record is not None:
                        on_record(record)
        except BaseException:
            for future in pending:
                future.cancel()
            if machine is not None:  # each running worker takes a SIGTERM and exits
                machine.shutdown(terminate=True)
            raise
    return [records[i] for i in range(len(cells))]


def emit(line: str) -> None:
    """A progress line on stderr, flushed (CI logs show it as it happens); one write, so
    the lines of two cells running at once never mix."""
    sys.stderr.write(for_terminal(redact(line)) + "\n")
    sys.stderr.flush()


def _eta(walls: Sequence[float], total: int, started: float) -> str:
    """ "(cell 12.3 s; run 1 min 05 s, about 3 min 10 s left)": the estimate is the mean
    wall time of the finished cells times the cells left, so it is rough."""
    elapsed = time.perf_counter() - started
    left = total - len(walls)
    text = f" (cell {format_duration(walls[-1])}; run {format_duration(elapsed)}"
    if left:
        text += f", about {format_duration(elapsed / len(walls) * left)} left"
    return text + ")"


def count_cells(cells: Sequence[Cell], timeout_s: float, jobs: int | None = None) -> list[Record]:
    """Check and count cells (no timing) in up to ``jobs`` workers at once (default: one
    per CPU). Counts are deterministic, so a busy machine changes how long they take, not
    what they are; never use this for cells that are timed. Records come back in the
    order of ``cells``; a line per finished cell goes to stderr."""
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(cells) or 1))
    started = time.perf_counter()
    timing = TimingConfig()
    emit(f"counting {len(cells)} cells, {jobs} at a time (counts only: not timed)")
    records: dict[int, Record] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {
            pool.submit(run_cell_in_worker, cell, timing, timeout_s, True, True, emit=emit): i
            for i, cell in enumerate(cells)
        }
        try:
            for future in as_completed(futures):
                index = futures[future]
                records[index] = future.result()
                elapsed = format_duration(time.perf_counter() - started)
                emit(
                    f"[{len(records)}/{len(cells)}] {cells[index].label}: "
                    f"{_describe(records[index])} (run {elapsed})"
                )
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return [records[i] for i in range(len(cells))]
