"""A grown run (``scanbench run --grow``): every point an ordinary cell in a fresh worker,
held to the budget, then one more measurement at every predicted crossover; resumable.

1. `plan`: the sweeps (`scanbench.growth.points`) of each selected scenario and their
   cells, point by point (each point's backends before the next point's, so each
   backend's next point is predicted from the ones before it), stored in the invocation
   with the sweeps (``invocation["growth"]``).
2. `run`: the cells, by the runner (`scanbench.execution.runner.execute`: journaled,
   saved after every cell, interruptible), each behind `Budgeted`: a point predicted
   over the budget becomes a skipped record instead of a worker.
3. The analysis of the sweep's points (`scanbench.growth.analysis`) predicts the
   crossovers; the confirmation points not measured yet are added to the plan as cells
   and measured the same way.
4. The analysis of everything, stored as ``invocation["growth"]["analysis"]`` (what the
   reports render) in the results file.

An interrupted grown run resumes where it stopped (`resume`): the stage is stored with
the plan, the budget's decisions with the records they made.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..api import InputError, Record, Status
from ..execution.cells import Cell
from ..execution.interrupts import Interrupted, signals_raise
from ..execution.launcher import Measure, collect_environment, emit
from ..execution.runner import (
    Plan,
    Progress,
    Stopped,
    check_outputs,
    execute,
    load_interrupted,
    resumable,
)
from ..execution.runner import plan as plan_cells
from ..results import Run, write_run
from ..sources import catalogue, load, resolve
from ..timing import TimingConfig
from .analysis import SweepAnalysis, analyse
from .budget import Decision, decide, part_measured, reason, skipped_record
from .points import GrowSpec, Sweep, check_specs, sweep_of

GROWTH = "growth"  # the invocation's key: {"budget_s", "sweeps", "stage", "analysis"}
SWEEP, CONFIRM, DONE = "sweep", "confirm", "done"
DEFAULT_BUDGET_S = 1.0


@dataclasses.dataclass(frozen=True)
class Growth:
    """What a grown run stores in its invocation (``invocation["growth"]``)."""

    sweeps: tuple[Sweep, ...]
    budget_s: float
    stage: str = SWEEP
    analysis: tuple[Mapping[str, Any], ...] = ()
    error: str | None = None  # why there is no analysis (the records are all stored)

    def to_json(self) -> dict[str, Any]:
        return {
            "budget_s": self.budget_s,
            "stage": self.stage,
            "sweeps": [sweep.to_json() for sweep in self.sweeps],
            "analysis": [dict(item) for item in self.analysis],
            "error": self.error,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Growth:
        sweeps = tuple(Sweep.from_json(sweep) for sweep in data["sweeps"])
        return cls(sweeps, float(data["budget_s"]), data.get("stage", SWEEP))


def plan(
    scenarios: Sequence[str],
    backends: Sequence[str],
    base: str,
    specs: Sequence[GrowSpec],
    budget_s: float,
    **options: Any,
) -> tuple[Plan, dict[str, Any]]:
    """The cells of a grown run and its invocation (every name checked before anything
    runs); ``options``: `scanbench.execution.runner.plan`'s (dtype, seed, devices,
    timing, timeout_s, probes, count_parts, params, overlap, caches)."""
    check_specs(specs)
    if not specs:
        raise InputError("--grow-budget applies to --grow; name an axis with --grow")
    sweeps, cells, facts, invocation = [], [], {}, {}
    sources = [resolve(name) for name in (scenarios or list(catalogue()))]
    for source in dict.fromkeys(sources):
        scenario = load(source)
        dtype = options.get("dtype") or scenario.dtypes[0]
        mine = [sweep_of(spec, scenario, source, base, dtype) for spec in specs]
        sizes = [sweep.size_name(units) for sweep in mine for units in sweep.values]
        chosen, invocation = plan_cells(
            [source], backends, list(dict.fromkeys(sizes)), **_runner_options(options)
        )
        sweeps += mine
        cells += [cell for cell in chosen.cells if cell not in cells]
        facts.update(invocation["scenarios"])
    chosen = dataclasses.replace(chosen, cells=tuple(cells))
    growth = Growth(tuple(sweeps), budget_s)
    invocation = {
        **invocation,
        **chosen.to_json(),
        "sizes": [base],
        "scenarios": facts,
        GROWTH: growth.to_json(),
    }
    return chosen, invocation


def _runner_options(options: Mapping[str, Any]) -> dict[str, Any]:
    defaults = {"dtype": None, "seed": 0, "devices": (None,), "timing": TimingConfig()}
    defaults["timeout_s"] = 1800.0
    return {**defaults, **options}


class Budgeted:
    """A run's measurement behind the budget: a cell of a sweep whose one call is
    predicted over ``budget_s`` (from the same backend's points measured so far) is
    stored as skipped, with the prediction, instead of being measured."""

    def __init__(self, growth: Growth, done: Sequence[Record], measure: Measure) -> None:
        self.growth, self.measure = growth, measure
        self.records = list(done)
        self.lock = threading.Lock()

    def __call__(self, cell: Cell, say) -> Record:
        try:
            found = self._decision(cell)
        except Exception:  # the cell's worker reports what is wrong with the cell
            found = None
        if found is not None and not found[2].measure:
            record = self._skipped(cell, *found)
        else:
            record = self.measure(cell, say)
        with self.lock:
            self.records.append(record)
        return record

    def _same_line(self, record: Record, cell: Cell) -> bool:
        return (record.scenario, record.backend, record.dtype, record.cache, record.devices) == (
            cell.scenario, cell.backend, cell.dtype, cell.cache, cell.devices
        ) and tuple(sorted(record.params.items())) == cell.params  # fmt: skip

    def _decision(self, cell: Cell) -> tuple[Sweep, int, Decision] | None:
        scenario = load(cell.source)
        backend = scenario.backend(cell.backend).with_params(dict(cell.params))
        size = scenario.size(cell.size)
        part = part_measured(scenario, backend, size)
        with self.lock:
            records = [r for r in self.records if self._same_line(r, cell)]
        found = []
        for sweep in self.growth.sweeps:
            units = sweep.value_of(cell.size, size.params)
            if sweep.scenario != cell.scenario or sweep.dtype != cell.dtype or units is None:
                continue
            measured = [
                (value, record.stats["median"])
                for record in records
                if record.status == Status.OK and "median" in record.stats
                and (value := sweep.value_of(record.size, record.size_params)) is not None
                and value != units
            ]  # fmt: skip
            found.append((sweep, units, decide(measured, units, self.growth.budget_s, part)))
        measuring = [item for item in found if item[2].measure]
        return (measuring or found or [None])[0]

    def _skipped(self, cell: Cell, sweep: Sweep, units: int, decision: Decision) -> Record:
        scenario = load(cell.source)
        return skipped_record(
            scenario,
            scenario.backend(cell.backend).with_params(dict(cell.params)),
            scenario.size(cell.size),
            cell.dtype,
            reason(decision, sweep.axis, units, self.growth.budget_s),
            decision.predicted_s,
            seed=cell.seed,
            devices=cell.devices,
            params=dict(cell.params),
            cache=cell.cache,
        )


def analyses(growth: Growth, records: Sequence[Record], confidence: float) -> list[SweepAnalysis]:
    return [analyse(sweep, records, confidence) for sweep in growth.sweeps]


def confirmation_cells(found: Sequence[SweepAnalysis], seed: int) -> list[Cell]:
    """The cells that measure every crossover's confirmation point not measured yet."""
    cells = []
    for analysis in found:
        sweep = analysis.sweep
        for line, units in analysis.confirmations_missing():
            cell = Cell(
                sweep.scenario,
                line.backend,
                sweep.size_name(units),
                sweep.dtype,
                seed,
                sweep.source,
                line.devices,
                tuple(sorted(line.params.items())),
                line.cache,
            )
            if cell not in cells:
                cells.append(cell)
    return cells


def _stages(
    chosen: Plan,
    invocation: Mapping[str, Any],
    out: Path,
    environment: Mapping[str, Any],
    done: Sequence[Record],
    progress: Progress,
) -> Run:
    """Run what is left of a grown run's stages (see the module doc) and store the analysis."""
    growth = Growth.from_json(invocation[GROWTH])
    records: Sequence[Record] = done
    confidence = chosen.timing.confidence

    def wrap(measure: Measure) -> Measure:
        return Budgeted(growth, records, measure)

    if growth.stage == SWEEP:
        records = execute(
            chosen, out, environment, invocation, records, progress, wrap=wrap
        ).records
        seed = chosen.cells[0].seed if chosen.cells else 0
        try:
            added = confirmation_cells(analyses(growth, records, confidence), seed)
        except Exception as error:  # the final analysis says so too; the records are saved
            emit(f"growth: no crossover measured: {type(error).__name__}: {error}")
            added = []
        added = [cell for cell in added if cell.key not in {r.key for r in records}]
        if added:
            emit(f"measuring {len(added)} cells at the predicted crossovers")
        chosen = dataclasses.replace(chosen, cells=(*chosen.cells, *added))
        growth = dataclasses.replace(growth, stage=CONFIRM)
        invocation = {**invocation, **chosen.to_json(), GROWTH: growth.to_json()}
        progress.total = len(chosen.cells)
    if growth.stage == CONFIRM:
        if {cell.key for cell in chosen.cells} - {record.key for record in records}:
            records = execute(
                chosen, out, environment, invocation, records, progress, wrap=wrap
            ).records
        try:
            found = tuple(item.to_json() for item in analyses(growth, records, confidence))
            growth = dataclasses.replace(growth, stage=DONE, analysis=found)
        except Exception as error:  # every record is saved; the analysis says why it is not
            growth = dataclasses.replace(
                growth, stage=DONE, error=f"the analysis failed: {type(error).__name__}: {error}"
            )
            emit(f"growth: {growth.error}")
        invocation = {**invocation, GROWTH: growth.to_json()}
    stored = Run(environment, invocation, tuple(records))
    write_run(out, stored)
    return stored


def run(
    chosen: Plan,
    invocation: Mapping[str, Any],
    out: Path,
    other_outputs: Sequence[str | None] = (),
    force: bool = False,
) -> Run:
    """Check the outputs, collect the environment, run the grown plan (see the module doc).

    Raises:
        InputError: an output that may not be written.
        Stopped: on SIGINT/SIGTERM, with what was saved.
    """
    check_outputs(out, other_outputs, force)
    progress = Progress(out, len(chosen.cells))
    try:
        with signals_raise():
            environment = collect_environment()
        return _stages(chosen, invocation, out, environment, (), progress)
    except Interrupted as stop:
        raise Stopped(stop.signum, progress) from None


def is_grown(out: Path) -> bool:
    """Whether the interrupted or finished run at ``out`` is a grown one."""
    try:
        _, invocation, _ = load_interrupted(out)
    except Exception:  # the runner's resume says what is wrong with the file
        return False
    return GROWTH in invocation


def resume(out: Path, force: bool = False) -> Run:
    """The rest of an interrupted grown run, with its stored settings and stage.

    Raises:
        InputError: the code or environment changed since it started (without ``force``).
        Stopped: on SIGINT/SIGTERM, with what was saved.
    """
    environment, invocation, records = load_interrupted(out)
    chosen = Plan.from_invocation(invocation, out)
    if invocation[GROWTH].get("stage") == DONE:
        emit(f"nothing to resume: the grown run in {out} is complete")
        return Run(environment, invocation, tuple(records))
    invocation = resumable(out, environment, invocation, force)
    progress = Progress(out, len(chosen.cells))
    emit(f"resuming the grown run {out}")
    try:
        return _stages(chosen, invocation, out, environment, records, progress)
    except Interrupted as stop:
        raise Stopped(stop.signum, progress) from None
