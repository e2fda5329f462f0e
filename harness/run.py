"""A whole run: cells in workers, each finished cell journaled durably, the results file
rewritten (atomically) after every cell, interruptible and resumable.

`start` checks the outputs before anything runs (a results file is never overwritten
without ``force``, the folder must be writable), collects the environment and claims the
results path; `execute` runs the cells still missing; `resume` reopens an interrupted
run from its journal (or results file) after checking that the code and environment are
those it was started with.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.api import InputError, Record, StoreError
from harness.interrupts import signals_raise
from harness.journal import Journal, journal_path, read_journal
from harness.runner import measure_cell, run_cells
from harness.selection import Cell
from harness.sources import file_source
from harness.store import Run, load_run, write_run
from harness.timing import TimingConfig

# environment keys that must match for a run to be resumed (else --force)
RESUME_MUST_MATCH = (
    "git_commit",
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
    count_parts: bool = False  # see harness.worker.run_cell

    def to_json(self) -> dict[str, Any]:
        return {
            "cells": [dataclasses.asdict(cell) for cell in self.cells],
            "timing": dataclasses.asdict(self.timing),
            "timeout_s": self.timeout_s,
            "probes": self.probes,
            "count_parts": self.count_parts,
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
) -> Run:
    """Run the plan's cells not in ``done``; journal and save after every cell.

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

    with journal, signals_raise():
        write_run(out, Run(environment, invocation, _ordered(plan.cells, records)))
        run_cells(
            todo,
            plan.timing,
            plan.timeout_s,
            show_progress,
            dict(environment),
            plan.probes,
            run_one=functools.partial(measure_cell, count_parts=plan.count_parts),
            on_record=save,
        )
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
