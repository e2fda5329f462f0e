"""A run split over machines: ``scanbench run --shard K/N``.

The cells of a run are split into N shards, deterministically and balanced by expected
cost, so that N machines (CI matrix jobs, SLURM array tasks) each measure one shard
without talking to each other: every machine plans the same run from the same command,
computes the same split and keeps its own part. Every cell is in exactly one shard for
any N (a shard may be empty when there are fewer units than shards).

**The unit** that is split is, by default, a *table*: the cells a report compares with
each other (same scenario, size, dtype, seed, device count and cache state), so that
every ratio of a report (speedup, x fastest) and every invariant of the gate still
compares cells measured on one machine in one go. ``--shard-by cell`` splits finer, for
a better balance; ratios between cells of different shards are then left out.

**The cost** of a unit is the sum of its cells' expected seconds: from a previous results
file (each cell's measured wall time, worker start-up included) or a history directory
(the newest entry's median x samples, plus the model's fixed part), else from the model
`model_cost`. The split is LPT (longest processing time first): units in decreasing cost,
ties broken by the cell's key, each to the shard with the least expected load so far
(ties to the lowest index), which is at most 4/3 of the best possible makespan.

A shard is an ordinary run file whose invocation says which shard of which run it is
(`scanbench.invocation.ShardFacts`, under ``invocation.shard``): the run id (the same on
every machine), N, the hash of the whole run's cell list, where this shard's cells sit in
it, every shard's expected cost and a digest of each scenario's source file.
`scanbench.execution.gathering` checks these when it merges the shards.

Example:
    >>> parse_shard("2/3")
    ShardSpec(index=2, count=3)
    >>> balance([[9.0, 1.0], [5.0, 5.0]])
    (10.0, 10.0, 1.0)
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..api import InputError
from ..cells import Cell
from ..invocation import Invocation, ShardFacts
from ..sampling import TimingConfig
from ..sources import load

UNITS = ("table", "cell")  # what the split keeps together (--shard-by)
SHARD_PATTERN = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
# the model's fixed seconds per cell (worker start, JAX import, compile, check) and for
# the counting passes, at a scenario's first size; each later size adds as much again
STARTUP_S = 1.5
COUNTING_S = 1.5
MODEL = "model"  # ShardFacts.costs when no earlier measurement was given


@dataclasses.dataclass(frozen=True)
class ShardSpec:
    """Shard ``index`` (from 1) of ``count``."""

    index: int
    count: int

    @property
    def label(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def slug(self) -> str:
        """For file and artifact names: ``2-of-3``."""
        return f"{self.index}-of-{self.count}"


def parse_shard(text: str, option: str = "--shard") -> ShardSpec:
    """``K/N`` with 1 <= K <= N.

    Raises:
        InputError: naming the option, the value and the form expected.
    """
    match = SHARD_PATTERN.match(text or "")
    index, count = (int(match[1]), int(match[2])) if match else (0, 0)
    if not match or count < 1 or not 1 <= index <= count:
        raise InputError(
            f"{option} must be K/N with 1 <= K <= N (shard K of N, e.g. 2/4), got {text!r}"
        )
    return ShardSpec(index, count)


def cell_json(cell: Cell) -> dict[str, Any]:
    """A cell as stored in an invocation (``invocation.cells``)."""
    return dataclasses.asdict(cell)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def cells_hash(cells: Sequence[Cell]) -> str:
    """SHA-256 of the run's cell list, in order (the same command gives the same list)."""
    text = _canonical([cell_json(cell) for cell in cells])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def scenario_version(source: str) -> str:
    """SHA-256 of the file that defines a scenario (its module's file, or the user's
    ``path.py``); ``""`` when it cannot be read. Shards that measured different versions
    of a scenario are never gathered into one run."""
    target = source.rpartition(":")[0] or source
    if target.endswith((".py", ".pkl")):
        path = Path(target)
    else:
        try:
            spec = importlib.util.find_spec(target)
        except (ImportError, ValueError):
            return ""
        if spec is None or not spec.origin:
            return ""
        path = Path(spec.origin)
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def table_key(cell: Cell) -> tuple:
    """The cells a report compares with each other (`UNITS` ``table``)."""
    return (cell.scenario, cell.size, cell.dtype, cell.seed, cell.devices, cell.cache)


def model_cost(cell: Cell, timing: TimingConfig, probes: bool) -> float:
    """Expected seconds of a cell with no earlier measurement: the fixed part (worker
    start-up, compile, check; plus the counting passes) times one more for each size the
    scenario lists before this one, plus the whole sampling budget (``--max-time``)."""
    sizes = list(load(cell.source).sizes)
    rank = sizes.index(cell.size) if cell.size in sizes else len(sizes)
    fixed = STARTUP_S + (COUNTING_S if probes else 0.0)
    return fixed * (1 + rank) + timing.max_time_s


def record_cost(record) -> float | None:
    """A stored record's seconds, worker start-up included (its ``phases_s``), else its
    worker's wall time."""
    phases = dict(record.extra.get("phases_s") or {})
    total = sum(v for v in phases.values() if isinstance(v, int | float) and math.isfinite(v))
    if total > 0:
        return total
    return record.wall_s if record.wall_s and math.isfinite(record.wall_s) else None


def expected_costs(
    cells: Sequence[Cell],
    timing: TimingConfig,
    probes: bool,
    earlier: Mapping[tuple, float] | None = None,
) -> list[float]:
    """Each cell's expected seconds (an earlier measurement, else `model_cost`),
    rounded to the millisecond so that every machine computes the same split."""
    earlier = earlier or {}
    return [round(earlier.get(cell.key, model_cost(cell, timing, probes)), 3) for cell in cells]


def assign(
    cells: Sequence[Cell], costs: Sequence[float], count: int, unit: str = "table"
) -> list[list[int]]:
    """Per shard, the positions of its cells in ``cells`` (in order): LPT over the units
    (see the module doc). Each position is in exactly one shard.

    Raises:
        InputError: an unknown unit or a count below 1.
    """
    if unit not in UNITS:
        raise InputError(f"--shard-by must be one of {', '.join(UNITS)}, got {unit!r}")
    if count < 1:
        raise InputError(f"the number of shards must be >= 1, got {count}")
    groups: dict[str, list[int]] = {}
    for position, cell in enumerate(cells):
        key = table_key(cell) if unit == "table" else cell.key
        groups.setdefault(_canonical(key), []).append(position)
    units = sorted(groups.items(), key=lambda item: (-sum(costs[i] for i in item[1]), item[0]))
    loads = [0.0] * count
    shards: list[list[int]] = [[] for _ in range(count)]
    for _, positions in units:
        target = min(range(count), key=lambda k: (loads[k], k))
        loads[target] += sum(costs[i] for i in positions)  # IEEE sums: the same everywhere
        shards[target].extend(positions)
    return [sorted(positions) for positions in shards]


def balance(loads_per_shard: Sequence[Sequence[float]]) -> tuple[float, float, float]:
    """(longest shard, mean shard, longest / mean) of per-shard cell seconds: 1.0 is a
    perfect balance, and the run's wall time is the longest shard."""
    totals = [sum(loads) for loads in loads_per_shard]
    longest = max(totals, default=0.0)
    mean = sum(totals) / len(totals) if totals else 0.0
    return longest, mean, (longest / mean if mean > 0 else 1.0)


def default_run_id(cells: Sequence[Cell], count: int, unit: str, costs: str) -> str:
    """The run id every machine derives alike from the same command: a digest of the
    cell list, N, the unit and where the costs came from. Two runs of the same command
    get the same id: give ``--run-id`` (a CI run's id, a date) to tell them apart."""
    text = _canonical([cells_hash(cells), count, unit, costs])
    return "run-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class Split:
    """A whole run's cells split into shards, with the facts each shard stores."""

    cells: tuple[Cell, ...]
    positions: tuple[tuple[int, ...], ...]  # per shard (index - 1)
    costs: tuple[float, ...]  # per cell
    costs_from: str
    run_id: str
    unit: str
    scenario_versions: Mapping[str, str]

    @property
    def count(self) -> int:
        return len(self.positions)

    @property
    def expected_s(self) -> tuple[float, ...]:
        return tuple(round(sum(self.costs[i] for i in shard), 3) for shard in self.positions)

    def cells_of(self, index: int) -> tuple[Cell, ...]:
        return tuple(self.cells[i] for i in self.positions[index - 1])

    def facts(self, index: int) -> ShardFacts:
        return ShardFacts(
            self.run_id,
            index,
            self.count,
            self.unit,
            cells_hash(self.cells),
            len(self.cells),
            self.positions[index - 1],
            self.costs_from,
            self.expected_s,
            dict(self.scenario_versions),
        )


def split(
    cells: Sequence[Cell],
    count: int,
    timing: TimingConfig,
    probes: bool,
    unit: str = "table",
    earlier: tuple[Mapping[tuple, float], str] | None = None,
    run_id: str | None = None,
) -> Split:
    """The split of a run's cells into ``count`` shards (see the module doc); ``earlier``:
    seconds measured before and where they came from (`scanbench.history.costs`).

    Raises:
        InputError: a bad unit, count, run id or costs file.
    """
    if run_id is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", run_id):
        raise InputError(
            f"--run-id must be 1-128 letters, digits, '.', '_' or '-' (starting with a letter "
            f"or digit), got {run_id!r}"
        )
    measured, costs_from = earlier if earlier is not None else (None, MODEL)
    costs = expected_costs(cells, timing, probes, measured)
    positions = assign(cells, costs, count, unit)
    versions = {cell.scenario: scenario_version(cell.source) for cell in cells}
    return Split(
        tuple(cells),
        tuple(tuple(p) for p in positions),
        tuple(costs),
        costs_from,
        run_id or default_run_id(cells, count, unit, costs_from),
        unit,
        versions,
    )


def restrict(invocation: Invocation, chosen: Split, index: int) -> Invocation:
    """The invocation of shard ``index`` of a planned run: only its cells, and its
    `ShardFacts` (a shard resumes as any run does)."""
    if invocation.plan is None:
        raise InputError("a run without a plan of cells cannot be split into shards")
    plan = dataclasses.replace(invocation.plan, cells=chosen.cells_of(index))
    return dataclasses.replace(invocation, plan=plan, shard=chosen.facts(index))
