"""A whole run: ``run(plan) -> Run``. Cells in workers (`scanbench.execution.launcher`), each
finished cell journaled durably, the results file rewritten (atomically) after every
cell, interruptible and resumable.

`plan` turns what the user named into cells and timing settings, loading each scenario
once (its facts - source, throughput unit, baseline - are stored with the run, so reports
never load a scenario); `run` checks the outputs before anything runs (a results file
is never overwritten without ``force``, the folder must be writable), collects the
environment and runs the plan; `resume` reopens an interrupted run from its journal (or
results file) after checking that the code and environment are those it was started
with. Both raise `Stopped` (with what was saved) on SIGINT/SIGTERM.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..api import WARM, InputError, Record, StoreError
from ..results import Run, ScenarioFacts, load_run, write_run
from ..sources import file_source, imported_from, load
from ..timing import TimingConfig
from .cells import Cell, select
from .interrupts import Interrupted, signals_raise
from .journal import Journal, journal_path, read_journal
from .launcher import Measure, collect_environment, emit, measuring, run_cells
from .overlap import Machine, cells_at_once
from .reference_cache import run_cache

# environment keys that must match for a run to be resumed (else --force)
RESUME_MUST_MATCH = (
    "git_commit",
    "scanbench_commit",
    "versions",
    "platform",
    "device_kind",
    "device_count",
    "cpu_model",
    "hostname",
    "xla_flags",
)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a run measures and how, as stored in its invocation (so it can be resumed)."""

    cells: tuple[Cell, ...]
    timing: TimingConfig
    timeout_s: float
    probes: bool
    count_parts: bool = False  # see scanbench.execution.worker.run_cell
    overlap: bool = (
        False  # two cells at once where the machine allows (scanbench.execution.overlap)
    )

    def to_json(self) -> dict[str, Any]:
        return {
            "cells": [dataclasses.asdict(cell) for cell in self.cells],
            "timing": dataclasses.asdict(self.timing),
            "timeout_s": self.timeout_s,
            "probes": self.probes,
            "count_parts": self.count_parts,
            "overlap": self.overlap,
        }

    @classmethod
    def from_invocation(cls, invocation: Mapping[str, Any], source: Path) -> Plan:
        try:
            return cls(
                tuple(_cell(cell) for cell in invocation["cells"]),
                TimingConfig(**invocation["timing"]),
                float(invocation["timeout_s"]),
                bool(invocation["probes"]),
                bool(invocation.get("count_parts", False)),
                bool(invocation.get("overlap", False)),  # runs stored before it: alone
            )
        except (KeyError, TypeError, ValueError) as error:
            raise StoreError(
                f"{source}: cannot resume: its invocation does not list its cells ({error}); "
                "it was written by an older scanbench"
            ) from None


def _cell(stored: Mapping[str, Any]) -> Cell:
    """A stored cell; one stored before sources named its scenario file instead."""
    stored = dict(stored)
    scenario_file = stored.pop("scenario_file", None)
    if scenario_file and not stored.get("source"):
        stored["source"] = file_source(scenario_file)
    return Cell(**stored)


def check_outputs(out: Path, others: Sequence[str | None], force: bool) -> None:
    """Refuse, before any cell runs: an existing results file (without ``force``), the
    same path for two outputs, a folder that cannot be written."""
    paths = [Path(out), *(Path(p) for p in others if p)]
    resolved = [os.path.realpath(p) for p in paths]
    if len(set(resolved)) != len(resolved):
        raise InputError(
            "--out, --md and --html must be different files; got "
            + ", ".join(str(p) for p in paths)
        )
    if out.is_dir():
        raise InputError(f"--out {str(out)!r} is a directory; give a file path")
    if out.exists() and not force:
        raise InputError(
            f"--out {str(out)!r} exists; give another path, --force to overwrite it, or "
            f"`scanbench run --resume {out}` to continue it"
        )
    for path in paths:
        folder = path.parent if str(path.parent) else Path(".")
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as error:
            raise InputError(f"cannot write to {str(folder)!r}: {error.strerror}") from None


def _ordered(cells: Sequence[Cell], records: Sequence[Record]) -> tuple[Record, ...]:
    """Records in the order of the plan's cells (a resumed run appends out of order)."""
    by_key = {record.key: record for record in records}
    known = [by_key[cell.key] for cell in cells if cell.key in by_key]
    extra = [record for record in records if record.key not in {c.key for c in cells}]
    return (*known, *extra)


@dataclasses.dataclass
class Progress:
    """A run in progress: what is saved so far (for the interrupted message)."""

    out: Path
    total: int
    saved: int = 0


def execute(
    plan: Plan,
    out: Path,
    environment: Mapping[str, Any],
    invocation: Mapping[str, Any],
    done: Sequence[Record] = (),
    progress: Progress | None = None,
    show_progress: bool | None = None,
    wrap: Callable[[Measure], Measure] | None = None,
) -> Run:
    """Run the plan's cells not in ``done``; journal and save after every cell.
    ``wrap(measure)`` may stand in front of each cell's measurement (a grown run's
    budget, `scanbench.growth.sweep`, returns a skipped record instead of measuring).

    Raises:
        Interrupted: on SIGINT/SIGTERM, after stopping the running worker; everything
            finished is in the journal and the results file.
    """
    records = list(done)
    finished_keys = {record.key for record in records}
    todo = [cell for cell in plan.cells if cell.key not in finished_keys]
    journal_file = journal_path(out)
    journal = Journal.reopen(journal_file) if journal_file.exists() else None
    if journal is None:
        journal = Journal.create(journal_file, environment, invocation)
        for record in records:  # resumed from a results file: its records first
            journal.append(record)
    progress = progress or Progress(out, len(plan.cells))
    progress.saved = len(records)

    def save(record: Record) -> None:
        journal.append(record)
        records.append(record)
        progress.saved = len(records)
        write_run(out, Run(environment, invocation, _ordered(plan.cells, records)))

    slots, why = cells_at_once(plan.overlap, environment)
    emit(why)
    machine = Machine(slots)
    with journal, signals_raise(), run_cache():  # see scanbench.execution.reference_cache
        write_run(out, Run(environment, invocation, _ordered(plan.cells, records)))
        measure = measuring(
            plan.timing, plan.timeout_s, dict(environment), plan.probes, plan.count_parts, machine
        )
        measure = measure if wrap is None else wrap(measure)
        run_cells(todo, measure, show_progress, on_record=save, machine=machine)
    journal_file.unlink(missing_ok=True)  # complete: the results file holds everything
    return Run(environment, invocation, _ordered(plan.cells, records))


def load_interrupted(path: Path) -> tuple[dict, dict, list[Record]]:
    """(environment, invocation, records) of an interrupted run: from its journal when
    there is one, else from the results file."""
    journal_file = journal_path(path)
    if journal_file.exists():
        return read_journal(journal_file)
    run = load_run(path)
    return dict(run.environment), dict(run.invocation), list(run.records)


def differences(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """What differs between two environments among `RESUME_MUST_MATCH`."""
    return [
        f"{key} {stored.get(key)!r} -> {current.get(key)!r}"
        for key in RESUME_MUST_MATCH
        if stored.get(key) != current.get(key)
    ]


def resumable(out: Path, environment: Mapping[str, Any], invocation: dict, force: bool) -> dict:
    """The invocation to resume ``out`` with, once this environment is checked against the
    stored one (`differences`): a change is refused, or, with ``force``, recorded under
    ``resumed_with_differences``. Used by every resume (cells, grown runs)."""
    changed = differences(environment, collect_environment())
    if changed and not force:
        raise InputError(
            f"cannot resume {out}: the code or environment differs from when it started "
            f"({'; '.join(changed)}); --force resumes anyway"
        )
    return {**invocation, "resumed_with_differences": changed} if changed else invocation


def plan(
    scenarios: Sequence[str],
    backends: Sequence[str],
    sizes: Sequence[str],
    dtype: str | None,
    seed: int,
    devices: Sequence[int | None],
    timing: TimingConfig,
    timeout_s: float,
    probes: bool = True,
    count_parts: bool = False,
    params: Mapping[str, Sequence[str]] | None = None,
    overlap: bool = True,
    caches: Sequence[str] = (WARM,),
) -> tuple[Plan, dict[str, Any]]:
    """The cells of a new run (every size x selected cell x device count, every name
    checked) and the invocation stored with it, which holds the plan (for ``--resume``)
    and each scenario's facts."""
    if count_parts and not probes:
        raise InputError(
            "--count-parts stores parts of the counts, which --no-probes skips; drop one"
        )
    cells = [
        dataclasses.replace(cell, devices=count, cache=cache)
        for size in sizes
        for cell in select(scenarios, backends, size, dtype, seed, params)
        for count in devices
        for cache in caches
    ]
    chosen = Plan(tuple(cells), timing, timeout_s, probes, count_parts, overlap)
    facts = {}
    for cell in cells:
        scenario = load(cell.source)  # loaded once per process (scanbench.sources)
        facts[cell.scenario] = ScenarioFacts(
            cell.source,
            scenario.throughput_unit,
            scenario.baseline_backend,
            scenario.description,
            imported_from(cell.source),
        ).to_json()
    invocation = {
        "argv": sys.argv[1:],
        "sizes": list(sizes),
        "devices": list(devices),
        "seed": seed,
        **chosen.to_json(),
        "scenarios": facts,
    }
    return chosen, invocation


class Stopped(Interrupted):
    """SIGINT or SIGTERM stopped a run; what it finished is saved in ``out``."""

    def __init__(self, signum: int, progress: Progress) -> None:
        super().__init__(signum)
        self.progress = progress
        if progress.saved or journal_path(progress.out).exists() or progress.out.exists():
            said = (
                f"interrupted: {progress.saved} of {progress.total} cells saved in "
                f"{progress.out}; continue with `scanbench run --resume {progress.out}`"
            )
        else:  # before the first cell started: there is nothing to resume
            said = "interrupted before the first cell ran: nothing was saved"
        self.args = (said,)


def run(
    chosen: Plan,
    invocation: Mapping[str, Any],
    out: Path,
    other_outputs: Sequence[str | None] = (),
    force: bool = False,
) -> Run:
    """Check the outputs, collect the environment, run every cell of the plan.

    Raises:
        InputError: an output that may not be written (see `check_outputs`).
        Stopped: on SIGINT/SIGTERM, with what was saved.
    """
    check_outputs(out, other_outputs, force)
    progress = Progress(out, len(chosen.cells))
    try:
        with signals_raise():  # a Ctrl-C while the environment is measured: one line too
            environment = collect_environment()
        return execute(chosen, out, environment, invocation, progress=progress)
    except Interrupted as stop:
        raise Stopped(stop.signum, progress) from None


def resume(out: Path, force: bool = False) -> Run:
    """The missing cells of an interrupted run, with its stored settings.

    Raises:
        InputError: no such run, or its code or environment changed (without ``force``).
        Stopped: on SIGINT/SIGTERM, with what was saved.
    """
    if not out.exists() and not journal_path(out).exists():
        raise InputError(f"--resume {str(out)!r}: no such results file or journal")
    environment, invocation, records = load_interrupted(out)
    chosen = Plan.from_invocation(invocation, out)
    missing = len({c.key for c in chosen.cells} - {r.key for r in records})
    if not missing:
        emit(f"nothing to resume: all {len(chosen.cells)} cells are in {out}")
        return Run(environment, invocation, tuple(records))
    invocation = resumable(out, environment, invocation, force)
    progress = Progress(out, len(chosen.cells))
    emit(f"resuming {out}: {missing} of {len(chosen.cells)} cells to run")
    try:
        return execute(chosen, out, environment, invocation, records, progress)
    except Interrupted as stop:
        raise Stopped(stop.signum, progress) from None
