"""`scanbench gate`: the three modes over a gate file.

- default: run the cells the count rules and invariants need (counts in counts-only
  workers, invariant cells timed) or read them from ``--results``, and decide;
- ``--update-counts``: measure the counts of every backend at ``count_size`` and write the
  counts file (review its diff like code);
- ``--against REV``: the ``[[baseline]]`` rules, REV (in a git worktree) vs this checkout,
  interleaved; ``--aa N``: both sides this checkout, N times, to report the false-alarm rate
  (with ``--inject-slowdown F`` on the candidate side: the detection rate).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import tomli_w

from ..api import InputError, Record
from ..execution.cells import Cell, cell
from ..execution.launcher import count_cells, measuring, run_cells
from ..sources import catalogue, load
from ..store import write_text_atomic
from ..timing import TimingConfig
from .decide import (
    Calibration,
    Outcome,
    Verdict,
    check_counts,
    check_invariants,
    count_expectation,
)
from .interleave import CANDIDATE_ROOT, Side, compare, worktree
from .rules import Gates

INVARIANT_TIMING = TimingConfig(warmup=1, min_time_s=1.0, min_count=20, max_time_s=2.0)
COUNT_HEADER = (
    "# Per-call count expectations of `scanbench gate` (written by --update-counts;\n"
    "# review its diff like code). A count above its expectation fails the gate.\n"
)


def _measure(cells: dict[Cell, bool], timeout_s: float) -> list[Record]:
    """Run cells in workers: counts-only cells first, one worker per CPU at once (counts
    do not depend on load); then the cells an invariant times (``cells[cell]``), one at
    a time with nothing else running."""

    counted = count_cells([cell for cell, timed in cells.items() if not timed], timeout_s)
    timed = [cell for cell, timed in cells.items() if timed]
    records = {record.key: record for record in counted}
    if timed:
        for record in run_cells(timed, measuring(INVARIANT_TIMING, timeout_s)):
            records[record.key] = record
    return [records[cell.key] for cell in cells]


def rules_and_invariants(
    gates: Gates, records: Sequence[Record] | None, timeout_s: float
) -> list[Verdict]:
    """The count rules and invariants, on ``records`` or on cells measured now. Every
    rule's scenario, backend and size is checked first (an unknown name is a usage error,
    exit 2, not a regression)."""
    cells: dict[Cell, bool] = {}
    counts, invariants = [], []
    for rule in gates.counts:  # a rule may name a source: decided by the scenario's name
        measured = cell(rule.scenario, rule.backend, rule.size, rule.dtype)
        cells.setdefault(measured, False)
        counts.append(dataclasses.replace(rule, scenario=measured.scenario))
    for invariant in gates.invariants:
        for backend in (invariant.faster, invariant.slower):
            measured = cell(invariant.scenario, backend, invariant.size, invariant.dtype)
            cells[measured] = True
        invariants.append(dataclasses.replace(invariant, scenario=measured.scenario))
    if records is None:
        records = _measure(cells, timeout_s)
    settings = gates.settings
    return [
        *check_counts(counts, records),
        *check_invariants(invariants, records, settings.confidence, settings.seed),
    ]


def update_counts(gates: Gates, timeout_s: float) -> Path:
    """Measure every backend's counts at ``count_size`` and write the counts file."""
    excluded = set(gates.settings.count_exclude)
    cells = {}
    for name, source in catalogue().items():
        scenario = load(source)
        for backend in scenario.backends.values():
            size = gates.settings.count_size
            if f"{name}/{backend.name}" not in excluded and backend.runs_at(size):
                cells[Cell(name, backend.name, size, scenario.dtypes[0], 0, source)] = False
    records = _measure(cells, timeout_s)
    failed = [f"{r.scenario}/{r.backend}: {r.error}" for r in records if r.status != "ok"]
    if failed:
        raise InputError("cannot record counts of failed cells: " + "; ".join(failed))
    tables = [count_expectation(record) for record in records]
    path = gates.counts_path
    write_text_atomic(path, COUNT_HEADER + tomli_w.dumps({"count": tables}))
    return path


def against(gates: Gates, revision: str, timeout_s: float) -> list[Verdict]:
    """The ``[[baseline]]`` rules: ``revision`` (a worktree) vs this checkout."""
    if not gates.baselines:
        raise InputError(f"{gates.path} declares no [[baseline]] rules to compare")
    with worktree(revision) as path:
        sides = {"baseline": Side(path), "candidate": Side(CANDIDATE_ROOT)}
        return compare(gates.baselines, sides, gates.settings, timeout_s)


def calibrate(
    gates: Gates,
    repetitions: int,
    slowdown: float,
    timeout_s: float,
) -> Calibration:
    """`--aa`: this checkout on both sides, ``repetitions`` times."""
    if not gates.baselines:
        raise InputError(f"{gates.path} declares no [[baseline]] rules to calibrate")
    sides = {"baseline": Side(CANDIDATE_ROOT), "candidate": Side(CANDIDATE_ROOT, slowdown)}
    runs = tuple(
        tuple(compare(gates.baselines, sides, gates.settings, timeout_s, rep))
        for rep in range(repetitions)
    )
    failing = sum(any(v.outcome == Outcome.FAIL for v in verdicts) for verdicts in runs)
    return Calibration(repetitions, slowdown, failing, runs)
