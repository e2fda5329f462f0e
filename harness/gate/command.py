"""`scanbench gate`: the three modes over a gate file.

- default: count the cells the count rules need (counts-only workers) or read them from
  ``--results``, measure every invariant's two backends interleaved in blocks, and
  decide;
- ``--update-counts``: measure the counts of every backend at ``count_size`` and write the
  counts file (review its diff like code);
- ``--against REV``: the ``[[baseline]]`` rules, REV (in a git worktree) vs this checkout,
  interleaved; ``--aa N``: both sides this checkout, N times, to report the false-alarm rate
  (with ``--inject-slowdown F``, each time also with the candidate really slowed by F: the
  detection rate; `scanbench.gate.calibration`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import tomli_w

from ..api import InputError, Record, UnknownNameError
from ..cells import Cell, cell
from ..execution.launcher import count_cells
from ..safe_files import write_text_atomic
from ..sources import load, resolve
from .calibration import Calibration
from .decide import Verdict, check_counts, count_expectation
from .interleave import Side, compare, invariants, project_root, worktree
from .rules import BaselineRule, Gates

COUNT_HEADER = (
    "# Per-call count expectations of `scanbench gate` (written by --update-counts;\n"
    "# review its diff like code). A count above its expectation fails the gate.\n"
)


def _measure(cells: Sequence[Cell], timeout_s: float) -> list[Record]:
    """Count cells in counts-only workers, one per CPU at once (counts do not depend on
    load)."""
    records = {record.key: record for record in count_cells(list(cells), timeout_s)}
    return [records[cell.key] for cell in cells]


def counted_scenarios(gates: Gates) -> list[str]:
    """The scenarios ``--update-counts`` records: ``[settings] scenarios``, else every
    scenario the gate's rules name (names or sources, in order)."""
    if gates.settings.scenarios:
        return list(gates.settings.scenarios)
    named = [rule.scenario for rule in (*gates.counts, *gates.invariants, *gates.baselines)]
    return list(dict.fromkeys(named))


def check(gates: Gates, mode: str) -> None:
    """Every name of the gate file, checked before anything runs, whatever the mode: each
    rule's scenario, backends, size and dtype; ``count_size`` in every counted scenario;
    every ``count_exclude`` entry. A gate that would decide nothing is a usage error too
    (exit 2): in CI a typo must not turn the gate green.

    ``mode``: ``rules`` (counts and invariants), ``update-counts`` or ``against``.

    Raises:
        InputError / UnknownNameError: naming the file, the rule and the allowed values.
    """
    where = str(gates.path)
    for invariant in gates.invariants:
        for backend in (invariant.faster, invariant.slower):
            cell(invariant.scenario, backend, invariant.size, invariant.dtype)
    for baseline in gates.baselines:
        cell(baseline.scenario, baseline.backend, baseline.size, baseline.dtype)
    for rule in gates.counts:
        cell(rule.scenario, rule.backend, rule.size, rule.dtype)
    counted = counted_scenarios(gates)
    loaded = {name: load(resolve(name)) for name in counted}
    for scenario in loaded.values():
        scenario.size(gates.settings.count_size)  # UnknownNameError names the choices
    backends = {f"{s.name}/{b}" for s in loaded.values() for b in s.backends}
    for excluded in gates.settings.count_exclude:
        if excluded not in backends:
            choices = sorted(backends) or ["(no counted scenario)"]
            raise UnknownNameError("count_exclude entry", excluded, choices, where)
    if mode == "update-counts" and not counted:
        raise InputError(
            f"{where}: no scenario to count: name them in [settings] scenarios, e.g. "
            'scenarios = ["bench/scenario.py:SCENARIO"]'
        )
    if mode == "against" and not gates.baselines:
        raise InputError(f"{where} declares no [[baseline]] rules to compare")
    if mode == "rules" and not gates.counts and not gates.invariants:
        if counted and not gates.counts_path.exists():
            raise InputError(
                f"{where}: the counts file {gates.counts_path} does not exist; write it with "
                f"`scanbench gate --gates {where} --update-counts` and commit it"
            )
        raise InputError(
            f"{where}: this gate decides nothing (no [[invariant]] rules and no counts in "
            f"{gates.counts_path}); add rules, or run --update-counts, or --against REV "
            "for [[baseline]] rules"
        )


def rules_and_invariants(
    gates: Gates, records: Sequence[Record] | None, timeout_s: float
) -> list[Verdict]:
    """The count rules, on ``records`` or on cells counted now, then the invariants,
    always measured now: their two backends interleaved in blocks (a stored run holds two
    medians measured minutes apart, which is what the gate never decides on). Every
    rule's scenario, backend and size is checked first (an unknown name is a usage error,
    exit 2, not a regression)."""
    cells: dict[Cell, None] = {}
    counts = []
    for rule in gates.counts:  # a rule may name a source: decided by the scenario's name
        measured = cell(rule.scenario, rule.backend, rule.size, rule.dtype)
        cells.setdefault(measured)
        counts.append(dataclasses.replace(rule, scenario=measured.scenario))
    named = []  # measured from their sources, labelled with the scenario's name
    for invariant in gates.invariants:
        for backend in (invariant.faster, invariant.slower):
            measured = cell(invariant.scenario, backend, invariant.size, invariant.dtype)
        named.append(dataclasses.replace(invariant, name=measured.scenario))
    if records is None:
        records = _measure(list(cells), timeout_s) if cells else []
    decided = check_counts(counts, records)
    if named:
        decided += invariants(named, project_root(), gates.settings, timeout_s)
    return decided


def update_counts(gates: Gates, timeout_s: float) -> Path:
    """Measure the counts of every backend of the counted scenarios (`counted_scenarios`)
    at ``count_size`` and write the counts file."""
    excluded = set(gates.settings.count_exclude)
    cells = {}
    for name in counted_scenarios(gates):
        source = resolve(name)
        scenario = load(source)
        for backend in scenario.backends.values():
            size = gates.settings.count_size
            if f"{scenario.name}/{backend.name}" not in excluded and backend.runs_at(size):
                cells[Cell(scenario.name, backend.name, size, scenario.dtypes[0], 0, source)] = None
    records = _measure(list(cells), timeout_s)
    failed = [f"{r.scenario}/{r.backend}: {r.error}" for r in records if r.status != "ok"]
    if failed:
        raise InputError("cannot record counts of failed cells: " + "; ".join(failed))
    tables = [count_expectation(record) for record in records]
    path = gates.counts_path
    write_text_atomic(path, COUNT_HEADER + tomli_w.dumps({"count": tables}))
    return path


def against(gates: Gates, revision: str, timeout_s: float) -> list[Verdict]:
    """The ``[[baseline]]`` rules: ``revision`` of the project scanbench runs in (in a
    temporary git worktree) vs its checkout as it is, each side importing its own tree's
    code and scenario files, both timed by this installation's loop; every verdict says
    what differs between the sides (`scanbench.gate.explain`)."""
    rules = [named(rule) for rule in gates.baselines]
    repository = project_root()
    with worktree(revision, repository) as path:
        sides = {
            "baseline": Side(path, home=repository),
            "candidate": Side(repository, home=repository),
        }
        return compare(rules, sides, gates.settings, timeout_s, explain=True)


def named(rule: BaselineRule) -> BaselineRule:
    """The rule labelled with its scenario's name (a rule may name a source)."""
    measured = cell(rule.scenario, rule.backend, rule.size, rule.dtype)
    return dataclasses.replace(rule, name=measured.scenario)


def calibrate(
    gates: Gates,
    repetitions: int,
    slowdown: float,
    timeout_s: float,
) -> Calibration:
    """`--aa`: this checkout on both sides, ``repetitions`` times; with ``slowdown`` > 1,
    each repetition then measures the candidate really slowed by it (`--inject-slowdown`)."""
    if not gates.baselines:
        raise InputError(f"{gates.path} declares no [[baseline]] rules to calibrate")
    repository = project_root()
    same = {"baseline": Side(repository), "candidate": Side(repository)}
    slower = {"baseline": Side(repository), "candidate": Side(repository, slowdown)}
    rules = [named(rule) for rule in gates.baselines]
    verdicts, slowed = [], []
    for rep in range(repetitions):
        verdicts.append(tuple(compare(rules, same, gates.settings, timeout_s, 2 * rep)))
        if slowdown != 1.0:
            slowed.append(tuple(compare(rules, slower, gates.settings, timeout_s, 2 * rep + 1)))
    return Calibration(repetitions, slowdown, tuple(verdicts), tuple(slowed))
