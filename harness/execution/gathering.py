"""Gathering: the shards of a run merged into one results file (``scanbench gather``).

Each shard file (`scanbench.execution.shards`) is read and checked; the gather refuses,
in one line each, anything that would make the merged run a lie: a file that is not a
shard, shards of different runs (run id, shard count, cell list or unit differ), a
shard given twice, a shard missing, a shard that has not finished all its cells, a shard
holding two records of one cell or a record of no cell of its own, shards that measured
different versions of a scenario, and shards whose cells overlap or leave a cell out
(split with different costs). The merged run holds every record in the whole
run's cell order, each marked with the shard (the machine) that measured it, and every
shard's environment (`scanbench.gathered`); its invocation lists the whole run's cells
and, under ``gathered``, the shards: their files, hosts, cells, expected and measured
seconds.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..api import InputError, Record, StoreError
from ..cells import Cell
from ..gathered import SHARD, SHARDS, kind_label
from ..invocation import Gathered, GatheredShard, ShardFacts
from ..results import Run, load_run, write_run
from .journal import journal_path
from .shards import balance, cells_hash, record_cost


@dataclasses.dataclass(frozen=True)
class Shard:
    """One shard's results file, read."""

    path: Path
    run: Run
    facts: ShardFacts

    @property
    def name(self) -> str:
        return f"shard {self.facts.index}/{self.facts.count}"

    @property
    def measured_s(self) -> float:
        """The seconds its cells took (worker start-up included)."""
        return round(sum(record_cost(r) or 0.0 for r in self.run.records), 3)


def shard_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The files named, a directory standing for the ``*.json`` files under it (as a CI
    job downloads one folder per artifact).

    Raises:
        InputError: a path that does not exist, or nothing to gather.
    """
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found += sorted(p for p in path.rglob("*.json") if p.is_file())
        elif path.exists():
            found.append(path)
        else:
            raise InputError(f"gather: {str(path)!r}: no such file or directory")
    if not found:
        raise InputError("gather: no shard files given (give the shards' results files)")
    return found


def read_shard(path: Path) -> Shard:
    """A shard file, with its facts.

    Raises:
        InputError: the file is not a shard, or cannot be read.
    """
    try:
        run = load_run(path)
    except StoreError as error:
        raise InputError(f"gather: {error}") from None
    facts = run.invocation.shard
    if facts is None or run.invocation.plan is None:
        raise InputError(
            f"gather: {path} is not a shard (no invocation.shard); give the files that "
            "`scanbench run --shard K/N` wrote"
        )
    return Shard(path, run, facts)


def _run_of(facts: ShardFacts) -> tuple:
    return (facts.run_id, facts.count, facts.cells_hash, facts.unit)


def check(shards: Sequence[Shard]) -> None:
    """Refuse (one line each) what may not be gathered; see the module doc.

    Raises:
        InputError: the first thing wrong.
    """
    first = shards[0]
    for shard in shards[1:]:
        if _run_of(shard.facts) != _run_of(first.facts):
            a, b = first.facts, shard.facts
            raise InputError(
                f"gather: {first.path} is shard {a.index}/{a.count} of run {a.run_id} but "
                f"{shard.path} is shard {b.index}/{b.count} of run {b.run_id}"
                + ("" if a.run_id != b.run_id else " with another cell list or split")
                + ": gather the shards of one run"
            )
    seen: dict[int, Shard] = {}
    for shard in shards:
        other = seen.get(shard.facts.index)
        if other is not None:
            raise InputError(
                f"gather: {shard.name} of run {shard.facts.run_id} given twice: "
                f"{other.path} and {shard.path}"
            )
        seen[shard.facts.index] = shard
    missing = [k for k in range(1, first.facts.count + 1) if k not in seen]
    if missing:
        have = ", ".join(f"{k}/{first.facts.count}" for k in sorted(seen))
        lost = ", ".join(f"{k}/{first.facts.count}" for k in missing)
        raise InputError(
            f"gather: run {first.facts.run_id} is missing shard {lost} (given: {have}); "
            "give every shard's results file"
        )
    for shard in shards:
        _every_record_once(shard)
    for shard in shards:
        expected = len(shard.facts.positions)
        done = {record.key for record in shard.run.records}
        if len(done) < expected or journal_path(shard.path).exists():
            raise InputError(
                f"gather: {shard.name} ({shard.path}) is incomplete: {len(done)} of "
                f"{expected} cells; continue it with `scanbench run --resume {shard.path}`"
            )
    versions: dict[str, tuple[str, Shard]] = {}
    for shard in shards:
        for name, digest in shard.facts.scenario_versions.items():
            if name in versions and versions[name][0] != digest:
                other = versions[name][1]
                raise InputError(
                    f"gather: {other.path} and {shard.path} measured scenario {name!r} at "
                    f"different versions (source digest {versions[name][0][:12]} vs "
                    f"{digest[:12]}): run every shard from the same code"
                )
            versions.setdefault(name, (digest, shard))
    owner: dict[int, Shard] = {}
    for shard in shards:
        for position in shard.facts.positions:
            if position in owner:
                raise InputError(
                    f"gather: {owner[position].path} and {shard.path} both hold cell "
                    f"{position} of run {shard.facts.run_id}: the shards were split "
                    "differently (give every shard the same --shard-costs)"
                )
            owner[position] = shard
    if len(owner) != first.facts.cells_total:
        raise InputError(
            f"gather: the shards of run {first.facts.run_id} hold {len(owner)} of its "
            f"{first.facts.cells_total} cells: they were split differently"
        )


def _every_record_once(shard: Shard) -> None:
    """Refuse a shard holding two records of one cell, or a record of no cell of its own
    (an edited or concatenated file): gather would keep one and drop the other unsaid."""
    cells = {cell.key for cell in shard.run.invocation.plan.cells}
    seen: set[tuple] = set()
    for index, record in enumerate(shard.run.records):
        label = f"{record.scenario}/{record.backend}/{record.size}/{record.dtype}"
        if record.key in seen:
            raise InputError(
                f"gather: {shard.path}: record {index} measures cell {label} again; a shard "
                "holds one record per cell: was the file edited? keep one of them"
            )
        if record.key not in cells:
            raise InputError(
                f"gather: {shard.path}: record {index} measures cell {label}, which is not "
                "one of this shard's cells: was the file edited?"
            )
        seen.add(record.key)


def _placed_cells(shard: Shard) -> list[tuple[int, Cell]]:
    """(position in the whole run, cell) of each cell of a shard."""
    cells = shard.run.invocation.plan.cells if shard.run.invocation.plan else ()
    if len(cells) != len(shard.facts.positions):
        raise InputError(
            f"gather: {shard.path}: its invocation lists {len(cells)} cells, its shard "
            f"facts {len(shard.facts.positions)}"
        )
    return list(zip(shard.facts.positions, cells, strict=True))


def gather(shards: Sequence[Shard]) -> Run:
    """One run from the shards of a run (checked first, see `check`).

    Raises:
        InputError: what `check` refuses; shards whose cells do not make the run's list.
    """
    check(shards)
    shards = sorted(shards, key=lambda shard: shard.facts.index)
    placed: list[tuple[int, Cell, Record]] = []
    for shard in shards:
        by_key = {record.key: record for record in shard.run.records}
        for position, cell in _placed_cells(shard):
            record = by_key.get(cell.key)
            if record is None:
                raise InputError(f"gather: {shard.path} has no record of cell {position}")
            extra = {**record.extra, SHARD: shard.facts.index}
            placed.append((position, cell, dataclasses.replace(record, extra=extra)))
    placed.sort(key=lambda item: item[0])
    first = shards[0]
    cells = tuple(cell for _, cell, _ in placed)
    if cells_hash(cells) != first.facts.cells_hash:
        raise InputError(
            f"gather: the shards' cells do not make run {first.facts.run_id}'s cell list "
            "(its hash differs): were the shard files edited?"
        )
    environment = {
        **first.run.environment,
        SHARDS: [
            {"index": shard.facts.index, "environment": dict(shard.run.environment)}
            for shard in shards
        ],
    }
    gathered = Gathered(
        first.facts.run_id,
        first.facts.count,
        first.facts.unit,
        first.facts.cells_hash,
        first.facts.costs,
        tuple(
            GatheredShard(
                shard.facts.index,
                shard.path.name,
                shard.run.environment.get("hostname"),
                len(shard.run.records),
                shard.facts.expected_s[shard.facts.index - 1],
                shard.measured_s,
            )
            for shard in shards
        ),
    )
    plan = dataclasses.replace(first.run.invocation.plan, cells=cells)
    invocation = dataclasses.replace(first.run.invocation, plan=plan, shard=None, gathered=gathered)
    return Run(environment, invocation, tuple(record for _, _, record in placed))


def _labels(records: Sequence[Record], limit: int = 6) -> str:
    names = [f"{r.scenario}/{r.backend}/{r.size}" for r in records]
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def describe(shards: Sequence[Shard]) -> list[str]:
    """One line per shard: its file, its machine, its cells, its seconds measured and
    expected; then the balance (longest shard over the mean)."""
    lines = []
    for shard in sorted(shards, key=lambda s: s.facts.index):
        env = shard.run.environment
        expected = shard.facts.expected_s[shard.facts.index - 1]
        lines.append(
            f"{shard.name} ({shard.path.name}): {len(shard.run.records)} cells on "
            f"{env.get('hostname', '?')} ({kind_label(env)}), {shard.measured_s:.1f} s "
            f"measured, {expected:.1f} s expected ({shard.facts.costs}): "
            f"{_labels(shard.run.records) or 'no cells'}"
        )
    measured = [[shard.measured_s] for shard in shards]
    expected = [[s] for s in shards[0].facts.expected_s]
    longest, mean, ratio = balance(measured)
    e_longest, e_mean, e_ratio = balance(expected)
    lines.append(
        f"balance: longest shard {longest:.1f} s over a mean of {mean:.1f} s = {ratio:.2f} "
        f"measured ({e_longest:.1f} / {e_mean:.1f} = {e_ratio:.2f} expected)"
    )
    return lines


def gather_into(paths: Sequence[str | os.PathLike[str]], out: Path, force: bool) -> list[str]:
    """Read, check and merge the shards named (files or folders) into ``out``; the lines
    saying what came from where (`describe`).

    Raises:
        InputError: ``out`` is a shard or exists (without ``force``); what `gather` refuses.
    """
    files = shard_files(paths)
    if out.resolve() in {path.resolve() for path in files}:
        raise InputError(f"--out {str(out)!r} is one of the shards; give another path")
    if out.exists() and not force:
        raise InputError(f"--out {str(out)!r} exists; give another path or --force")
    shards = [read_shard(path) for path in files]
    write_run(out, gather(shards))
    return describe(shards)
