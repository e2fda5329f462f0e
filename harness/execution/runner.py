"""A whole run, one driver for every kind: `plan` -> `run` -> `scanbench.results.Run`,
and `resume`. Cells in workers (`scanbench.execution.launcher`), each finished cell
journaled durably, the results file rewritten (atomically) after every cell,
interruptible and resumable.

`plan` turns what the user named into an `scanbench.invocation.Invocation`: the cells and
the settings they are measured with (its `scanbench.invocation.Plan`), each scenario's
facts (source, throughput unit, baseline: stored with the run, so reports never load a
scenario), and for ``--grow`` the sweeps whose points are its cells
(`scanbench.execution.grown`). `run` checks the outputs before anything runs (a results
file is never overwritten without ``force``, the folder must be writable), collects the
environment and `execute`s the invocation: the plan's cells not measured yet, then, for a
grown run, each further stage. `resume` reopens an interrupted run from its journal (or
results file) after checking that the code and environment are those it was started
with, and executes what is left the same way. Both raise `Stopped` (with what was saved)
on SIGINT/SIGTERM.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..api import InputError, Record, StoreError
from ..cells import Cell, Selection, cells_of
from ..growth.budget import DEFAULT_BUDGET_S
from ..growth.points import GrowSpec
from ..invocation import (
    DEFAULT_TIMEOUT_S,
    REMEASURE,
    CommandLine,
    Growth,
    Invocation,
    Plan,
    ScenarioFacts,
    Stage,
)
from ..results import Run, load_run, write_run
from ..sampling import TimingConfig
from ..sources import imported_from, load
from . import grown
from .interrupts import Interrupted, signals_raise
from .journal import Journal, journal_path, read_journal, refuse_if_in_use
from .launcher import (
    collect_environment,
    emit,
    first_pass,
    measuring,
    measuring_again,
    run_cells,
    to_measure_again,
)
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


def check_outputs(out: Path, others: Sequence[str | None], force: bool) -> None:
    """Refuse, before any cell runs: an existing results file (without ``force``), an
    output another run is writing now (its journal is locked; even with ``force``), the
    journal of an interrupted run (without ``force``; with it, that journal is removed),
    the same path for two outputs, a folder that cannot be written."""
    paths = [Path(out), *(Path(p) for p in others if p)]
    resolved = [os.path.realpath(p) for p in paths]
    if len(set(resolved)) != len(resolved):
        raise InputError(
            "--out, --md and --html must be different files; got "
            + ", ".join(str(p) for p in paths)
        )
    if out.is_dir():
        raise InputError(f"--out {str(out)!r} is a directory; give a file path")
    journal = journal_path(out)
    refuse_if_in_use(journal)  # even with --force
    if out.exists() and not force:
        raise InputError(
            f"--out {str(out)!r} exists; give another path, --force to overwrite it, or "
            f"`scanbench run --resume {out}` to continue it"
        )
    if os.path.lexists(journal):
        if not force:
            raise InputError(
                f"--out {str(out)!r}: {journal.name} holds an interrupted run; "
                f"`scanbench run --resume {out}` continues it, --force starts over"
            )
        _refuse_unsaved(out)
        journal.unlink()  # --force: the interrupted run is given up
    for path in paths:
        folder = path.parent if str(path.parent) else Path(".")
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as error:
            raise InputError(f"cannot write to {str(folder)!r}: {error.strerror}") from None


def _refuse_unsaved(out: Path) -> None:
    """Refuse ``--force`` over a journal holding cells its results file lacks (a run cut
    short by a full disk or a SIGKILL between the two): they would be lost unsaid."""
    journal = journal_path(out)
    try:
        unsaved = _unsaved(out)
    except StoreError as error:
        raise InputError(
            f"--out {str(out)!r}: --force would delete {journal.name}, which cannot be read "
            f"({error}); move it away to start over"
        ) from None
    if unsaved:
        raise InputError(
            f"--out {str(out)!r}: {journal.name} holds {len(unsaved)} measured cells that "
            f"{out.name} lacks; `scanbench run --resume {out}` saves them (then --force "
            f"starts over), or delete {journal.name} to give them up"
        )


def _ordered(cells: Sequence[Cell], records: Sequence[Record]) -> tuple[Record, ...]:
    """Records in the order of the plan's cells (a resumed run appends out of order)."""
    by_key = {record.key: record for record in records}
    known = [by_key[cell.key] for cell in cells if cell.key in by_key]
    extra = [record for record in records if record.key not in {c.key for c in cells}]
    return (*known, *extra)


def _plan_of(invocation: Invocation, out: Path) -> Plan:
    if invocation.plan is None:
        raise StoreError(
            f"{out}: cannot resume: its invocation does not list its cells; it was written "
            "by the notebook API or by an older scanbench"
        )
    return invocation.plan


def _missing(plan: Plan, records: Sequence[Record]) -> list[Cell]:
    """The plan's cells that no record measured, in order."""
    measured = {record.key for record in records}
    return [cell for cell in plan.cells if cell.key not in measured]


def complete(invocation: Invocation, records: Sequence[Record]) -> bool:
    """Whether nothing is left to run: every cell measured, every stage done."""
    plan = invocation.plan
    growth = invocation.growth
    stages_done = growth is None or growth.stage == Stage.DONE
    return plan is not None and not _missing(plan, records) and stages_done


@dataclasses.dataclass
class Progress:
    """A run in progress: what is saved so far (for the interrupted message)."""

    out: Path
    total: int
    saved: int = 0


def _measure(
    invocation: Invocation,
    out: Path,
    environment: dict[str, Any],
    done: Sequence[Record],
    progress: Progress,
    show_progress: bool | None,
    new: bool = False,
) -> tuple[Record, ...]:
    """Measure the plan's cells not in ``done``; journal and save after every cell; the
    journal is removed once they are all measured (the results file holds everything).
    The journal is claimed exclusively (`scanbench.execution.journal`): a new one for a
    ``new`` run (never another's), else the interrupted run's, reopened."""
    plan = _plan_of(invocation, out)
    records = list(done)
    journal_file = journal_path(out)
    journal = Journal.reopen(journal_file) if journal_file.exists() and not new else None
    if journal is None:
        journal = Journal.create(journal_file, environment, invocation.to_json())
        for record in records:  # resumed from a results file: its records first
            journal.append(record)
    progress.saved = len(records)

    def save(record: Record) -> None:
        try:
            journal.append(record)
            records.append(record)  # a cell measured again: the later record replaces it
            progress.saved = len({r.key for r in records})
            write_run(out, Run(environment, invocation, _ordered(plan.cells, records)))
        except OSError as error:  # a full disk, a quota: the run stops, nothing is lost
            raise _not_saved(out, error, len(records)) from None

    slots, why = cells_at_once(plan.overlap, environment)
    emit(why)
    machine = Machine(slots)
    with journal, signals_raise(), run_cache():  # see scanbench.execution.reference_cache
        write_run(out, Run(environment, invocation, _ordered(plan.cells, records)))
        once = measuring(
            plan.timing, plan.timeout_s, environment, plan.probes, plan.count_parts, machine
        )
        measure = grown.measuring(invocation, records, first_pass(once, plan.remeasure))
        run_cells(_missing(plan, records), measure, show_progress, on_record=save, machine=machine)
        # the disturbed cells again, once every cell has had its first measurement (a
        # spell of load may have passed), with what is left of each one's budget
        again = {r.key: r for r in to_measure_again(_ordered(plan.cells, records), plan.remeasure)}
        if again:
            emit(f"measuring {len(again)} disturbed cell{'s' * (len(again) > 1)} again")
            cells = [cell for cell in plan.cells if cell.key in again]
            measure = measuring_again(again, once, plan.remeasure)
            run_cells(cells, measure, show_progress, on_record=save, machine=machine)
        journal.remove()  # complete: the results file holds everything
    return _ordered(plan.cells, records)


def _not_saved(out: Path, error: OSError, journaled: int) -> StoreError:
    """A write of the journal or the results file failed (``ENOSPC``, ``EDQUOT``, ``EIO``):
    one line saying where the cells measured so far are and how to get them back."""
    where = f"{error.filename}: " if error.filename else ""
    return StoreError(
        f"cannot save the run in {out} ({where}{error.strerror or error}); the run is "
        f"stopped: {journaled} measured cells are in {journal_path(out).name}; free the "
        f"space, then `scanbench run --resume {out}` saves them and runs the rest"
    )


def _unsaved(out: Path) -> list[Record]:
    """The records of ``out``'s journal that its results file lacks: a run cut short
    between its journal line and its results file (a full disk, a SIGKILL). Empty when
    there is no journal. Raises `StoreError` when the journal cannot be read."""
    journal_file = journal_path(out)
    if not os.path.lexists(journal_file):
        return []
    journaled = read_journal(journal_file)[2]
    try:
        saved = {record.key for record in load_run(out).records}
    except StoreError:  # no results file yet, or a torn one: the journal is what counts
        saved = set()
    return [record for record in journaled if record.key not in saved]


def _save_journaled(out: Path) -> tuple[dict[str, Any], Invocation, list[Record]]:
    """Write the results file from a journal whose plan is all measured (a run cut short
    after its last journal line) and remove the journal, holding its lock meanwhile."""
    with Journal.reopen(journal_path(out)) as journal:
        environment, invocation, records = load_interrupted(out, locked=True)
        plan = _plan_of(invocation, out)
        lacked = len(_unsaved(out))
        try:
            write_run(out, Run(environment, invocation, _ordered(plan.cells, records)))
        except OSError as error:
            raise _not_saved(out, error, len(records)) from None
        journal.remove()
    emit(f"saved {lacked} cells from {journal.path.name} that {out} lacked")
    return environment, invocation, records


def execute(
    invocation: Invocation,
    out: Path,
    environment: dict[str, Any],
    done: Sequence[Record] = (),
    progress: Progress | None = None,
    show_progress: bool | None = None,
    new: bool = False,
) -> Run:
    """Run what is left of the invocation: its plan's cells not in ``done`` (journaled,
    saved after every cell), then each stage after it (`scanbench.execution.grown`: a
    grown run's confirmation cells, then its analysis), the invocation of each stage
    saved with the records.

    Raises:
        Interrupted: on SIGINT/SIGTERM, after stopping the running worker; everything
            finished is in the journal and the results file.
    """
    records = tuple(done)
    progress = progress or Progress(out, len(_plan_of(invocation, out).cells))
    while True:
        plan = _plan_of(invocation, out)
        if _missing(plan, records):
            records = _measure(invocation, out, environment, records, progress, show_progress, new)
            new = False  # a later stage's journal is this run's own
        following = grown.next_stage(invocation, records)
        if following is None:
            run = Run(environment, invocation, _ordered(plan.cells, records))
            if not out.exists():  # nothing to measure (an empty shard): still a results file
                write_run(out, run)
            return run
        invocation = following
        progress.total = len(_plan_of(invocation, out).cells)
        write_run(out, Run(environment, invocation, _ordered(invocation.plan.cells, records)))


def load_interrupted(path: Path, locked: bool = False) -> tuple[dict, Invocation, list[Record]]:
    """(environment, invocation, records) of an interrupted run: from its journal when
    there is one, else from the results file. Refused while another run writes it (unless
    this process holds its lock: ``locked``)."""
    journal_file = journal_path(path)
    if not locked:
        refuse_if_in_use(journal_file)
    if not journal_file.exists():
        run = load_run(path)
        return dict(run.environment), run.invocation, list(run.records)
    environment, invocation, records = read_journal(journal_file)
    try:
        return environment, Invocation.from_json(invocation), records
    except StoreError as error:
        raise StoreError(f"{journal_file}: {error}") from None


def differences(stored: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What differs between two environments among `RESUME_MUST_MATCH`."""
    return [
        f"{key} {stored.get(key)!r} -> {current.get(key)!r}"
        for key in RESUME_MUST_MATCH
        if stored.get(key) != current.get(key)
    ]


def resumable(
    out: Path, environment: dict[str, Any], invocation: Invocation, force: bool
) -> Invocation:
    """The invocation to resume ``out`` with, once this environment is checked against the
    stored one (`differences`): a change is refused, or, with ``force``, recorded under
    ``resumed_with_differences``."""
    changed = differences(environment, collect_environment(measure=False))
    if changed and not force:
        raise InputError(
            f"cannot resume {out}: the code or environment differs from when it started "
            f"({'; '.join(changed)}); --force resumes anyway"
        )
    if not changed:
        return invocation
    return dataclasses.replace(invocation, resumed_with_differences=tuple(changed))


def _facts(cells: Sequence[Cell]) -> dict[str, ScenarioFacts]:
    """Each cell's scenario's facts, by scenario name."""
    facts = {}
    for cell in cells:
        scenario = load(cell.source)  # loaded once per process (scanbench.sources)
        facts[cell.scenario] = ScenarioFacts(
            cell.source,
            scenario.throughput_unit,
            scenario.baseline_backend,
            scenario.description,
            imported_from(cell.source),
        )
    return facts


def plan(
    selection: Selection,
    timing: TimingConfig | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    probes: bool = True,
    count_parts: bool = False,
    overlap: bool = True,
    remeasure: int = REMEASURE,
    grow: Sequence[GrowSpec] = (),
    grow_budget_s: float | None = None,
    argv: Sequence[str] = (),
) -> Invocation:
    """The invocation of a new run, every name checked before anything runs: its plan
    (every size x selected cell x device count x cache mode, measured with these
    settings), each scenario's facts, and what the command line (``argv``) asked.

    With ``grow`` (or a ``grow_budget_s``), a grown run: the points of sweeps from the
    selection's one base size (`scanbench.execution.grown`), each held to the budget.
    """
    if count_parts and not probes:
        raise InputError(
            "--count-parts stores parts of the counts, which --no-probes skips; drop one"
        )
    growth = None
    if grow or grow_budget_s is not None:
        cells, sweeps = grown.plan(selection, grow)
        growth = Growth(sweeps, DEFAULT_BUDGET_S if grow_budget_s is None else grow_budget_s)
    else:
        cells = cells_of(selection)
    timing = timing or TimingConfig()
    chosen = Plan(tuple(cells), timing, timeout_s, probes, count_parts, overlap, remeasure)
    origin = CommandLine(tuple(argv), selection.sizes, selection.devices, selection.seed)
    return Invocation(_facts(cells), chosen, growth, origin)


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
    invocation: Invocation,
    out: Path,
    other_outputs: Sequence[str | None] = (),
    force: bool = False,
) -> Run:
    """Check the outputs, collect the environment, execute the invocation's plan.

    Raises:
        InputError: an output that may not be written (see `check_outputs`).
        Stopped: on SIGINT/SIGTERM, with what was saved.
    """
    check_outputs(out, other_outputs, force)
    plan = _plan_of(invocation, out)
    progress = Progress(out, len(plan.cells))
    try:
        with signals_raise():  # a Ctrl-C while the environment is measured: one line too
            environment = collect_environment(unit_costs=plan.probes)
        return execute(invocation, out, environment, progress=progress, new=True)
    except Interrupted as stop:
        raise Stopped(stop.signum, progress) from None


def resume(out: Path, force: bool = False) -> Run:
    """What is left of an interrupted run (its missing cells, a grown run's stages), with
    its stored settings.

    Raises:
        InputError: no such run, or its code or environment changed (without ``force``).
        StoreError: a run whose invocation lists no cells.
        Stopped: on SIGINT/SIGTERM, with what was saved.
    """
    if not out.exists() and not journal_path(out).exists():
        raise InputError(f"--resume {str(out)!r}: no such results file or journal")
    environment, invocation, records = load_interrupted(out)
    plan = _plan_of(invocation, out)
    if journal_path(out).exists() and not _missing(plan, records):
        # every cell of the journal's plan measured: its run was cut short after its last
        # journal line (a full disk, a SIGKILL); the results file gets what it lacks
        environment, invocation, records = _save_journaled(out)
        plan = _plan_of(invocation, out)
    if complete(invocation, records):
        what = f"all {len(plan.cells)} cells are in {out}"
        if invocation.growth is not None:
            what = f"the grown run in {out} is complete"
        emit(f"nothing to resume: {what}")
        return Run(environment, invocation, _ordered(plan.cells, records))
    invocation = resumable(out, environment, invocation, force)
    missing = len(_missing(plan, records))
    stage = f" (a grown run at its {invocation.growth.stage} stage)" if invocation.growth else ""
    emit(f"resuming {out}: {missing} of {len(plan.cells)} cells to run{stage}")
    progress = Progress(out, len(plan.cells))
    try:
        return execute(invocation, out, environment, records, progress)
    except Interrupted as stop:
        raise Stopped(stop.signum, progress) from None
