"""A grown run (``scanbench run --grow``), as the runner (`scanbench.execution.runner`)
plans, executes and resumes it: a plan whose cells are the points of sweeps, measured in
stages.

1. `plan`: the sweeps (`scanbench.growth.points`) of each selected scenario and their
   cells, point by point (each point's backends before the next point's, so that each
   backend's next point is predicted from the ones before it).
2. The sweep stage: the cells, each behind `Budgeted` (`measuring`): a point predicted
   over the budget becomes a skipped record instead of a worker.
3. `next_stage` after the sweep: the analysis of its points
   (`scanbench.growth.analysis`) predicts the crossovers; the confirmation points not
   measured yet join the plan as cells, measured the same way (the confirm stage).
4. `next_stage` after those: the analysis of everything, stored in the invocation
   (`scanbench.invocation.Growth.analysis`, what the reports render); the run is done.

Each stage follows from the invocation and the records alone, so an interrupted grown run
resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence

from ..api import InputError, Record, Status
from ..cells import Cell, Selection, cells_of
from ..growth.analysis import SweepAnalysis, analyse
from ..growth.budget import Decision, decide, part_measured, reason, skipped_record
from ..growth.points import GrowSpec, Sweep, check_specs, sweep_of
from ..invocation import Growth, Invocation, Stage
from ..sources import catalogue, load, resolve
from .launcher import Measure, emit


def plan(selection: Selection, specs: Sequence[GrowSpec]) -> tuple[list[Cell], tuple[Sweep, ...]]:
    """The cells of a grown run and its sweeps, from the selection's one base size
    (every name checked before anything runs)."""
    if not specs:
        raise InputError("--grow-budget applies to --grow; name an axis, e.g. --grow n=10..1000")
    if len(selection.sizes) != 1:
        raise InputError(
            "--grow sweeps from one base size; give --size one name, got "
            f"{','.join(selection.sizes)!r}"
        )
    check_specs(specs)
    (base,) = selection.sizes
    sweeps: list[Sweep] = []
    cells: list[Cell] = []
    sources = [resolve(name) for name in (selection.scenarios or list(catalogue()))]
    for source in dict.fromkeys(sources):
        scenario = load(source)
        dtype = selection.dtype or scenario.dtypes[0]
        mine = [sweep_of(spec, scenario, source, base, dtype) for spec in specs]
        sizes = tuple(dict.fromkeys(s.size_name(units) for s in mine for units in s.values))
        chosen = cells_of(dataclasses.replace(selection, scenarios=(source,), sizes=sizes))
        sweeps += mine
        cells += [cell for cell in chosen if cell not in cells]
    return cells, tuple(sweeps)


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


def measuring(invocation: Invocation, done: Sequence[Record], measure: Measure) -> Measure:
    """How the cells of the invocation's current stage are measured: behind the budget
    while a grown run sweeps or confirms, as ``measure`` does otherwise."""
    growth = invocation.growth
    if growth is None or growth.stage == Stage.DONE:
        return measure
    return Budgeted(growth, done, measure)


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


def next_stage(invocation: Invocation, records: Sequence[Record]) -> Invocation | None:
    """The invocation of the stage after this one, once its cells are all measured: the
    confirmation cells after the sweep, the analysis after those; None when there is no
    stage left (a run that is not grown has none)."""
    growth, plan = invocation.growth, invocation.plan
    if growth is None or plan is None or growth.stage == Stage.DONE:
        return None
    confidence = plan.timing.confidence
    if growth.stage == Stage.SWEEP:
        seed = plan.cells[0].seed if plan.cells else 0
        try:
            added = confirmation_cells(analyses(growth, records, confidence), seed)
        except Exception as error:  # the final analysis says so too; the records are saved
            emit(f"growth: no crossover measured: {type(error).__name__}: {error}")
            added = []
        measured = {record.key for record in records}
        added = [cell for cell in added if cell.key not in measured and cell not in plan.cells]
        if added:
            emit(f"measuring {len(added)} cells at the predicted crossovers")
        return dataclasses.replace(
            invocation,
            plan=dataclasses.replace(plan, cells=(*plan.cells, *added)),
            growth=dataclasses.replace(growth, stage=Stage.CONFIRM),
        )
    try:
        found = tuple(item.to_json() for item in analyses(growth, records, confidence))
        done = dataclasses.replace(growth, stage=Stage.DONE, analysis=found)
    except Exception as error:  # every record is saved; the analysis says why it is not
        why = f"the analysis failed: {type(error).__name__}: {error}"
        done = dataclasses.replace(growth, stage=Stage.DONE, error=why)
        emit(f"growth: {why}")
    return dataclasses.replace(invocation, growth=done)
