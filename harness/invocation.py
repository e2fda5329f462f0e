"""How a run was asked for: the ``invocation`` of its results file, a typed record read
(`Invocation.from_json`) and written (`Invocation.to_json`) here and nowhere else.

Its JSON object is flat; each group of keys is present when it applies:

    key                                     record
    schema_version                          INVOCATION_VERSION
    argv, sizes, devices, seed              CommandLine: ``scanbench run``'s options
    api, isolation, tolerance, timing       NotebookCall: ``scanbench.compare``'s arguments
    cells, timing, timeout_s, probes,       Plan: what the runner measures and how, what
      count_parts, overlap                  ``--resume`` continues
    growth                                  Growth: a grown run's sweeps, stage and analysis
    shard                                   ShardFacts: which shard of which run this is
    gathered                                Gathered: the shards a gathered run came from
    scenarios                               ScenarioFacts, per scenario name
    resumed_with_differences                what had changed when ``--force`` resumed it

An invocation without ``schema_version`` was written before this record: the same keys,
or in older files still ``throughput_units`` and ``baselines`` instead of ``scenarios``, a
cell's ``scenario_file`` instead of its ``source``, and no ``count_parts`` or ``overlap``
(both off); it is read as they say and written back in today's keys.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import Any

from .api import HarnessError, StoreError
from .cells import Cell
from .errors import SchemaVersionError
from .growth.points import Sweep
from .sampling import TimingConfig
from .sources import file_source

REMEASURE = 2  # samplings of a cell after its first, at most, in all (execution.remeasure)

INVOCATION_VERSION = 1
READABLE_VERSIONS = (0, INVOCATION_VERSION)  # 0: written before the version was stored
DEFAULT_TIMEOUT_S = 1800.0  # seconds before a cell's worker is killed (--timeout)


@dataclasses.dataclass(frozen=True)
class ScenarioFacts:
    """What reports need to know of a scenario, stored with the run so that no report
    ever loads a scenario."""

    source: str
    throughput_unit: str | None
    baseline: str | None  # the backend speedups are reported against
    description: str = ""
    # where each top-level module the scenario imports came from (scanbench.sources)
    imports: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a run measures and how: its cells, in order, and the settings every cell is
    measured with. The runner executes it; ``--resume`` runs the cells it has no record of.
    """

    cells: tuple[Cell, ...]
    timing: TimingConfig = dataclasses.field(default_factory=TimingConfig)
    timeout_s: float = DEFAULT_TIMEOUT_S
    probes: bool = True
    count_parts: bool = False  # see scanbench.execution.worker.run_cell
    overlap: bool = True  # two cells at once where the machine allows (execution.overlap)
    remeasure: int = REMEASURE  # a disturbed cell measured again (execution.remeasure)

    def to_json(self) -> dict[str, Any]:
        return {
            "cells": [dataclasses.asdict(cell) for cell in self.cells],
            "timing": dataclasses.asdict(self.timing),
            "timeout_s": self.timeout_s,
            "probes": self.probes,
            "count_parts": self.count_parts,
            "overlap": self.overlap,
            "remeasure": self.remeasure,
        }


class Stage(enum.StrEnum):
    """How far a grown run has come (``--resume`` continues from there)."""

    SWEEP = "sweep"  # the points of the sweeps
    CONFIRM = "confirm"  # the points added at the predicted crossovers
    DONE = "done"  # the analysis is stored


@dataclasses.dataclass(frozen=True)
class Growth:
    """A grown run (``--grow``, or ``compare(..., grow=...)``): its sweeps and budget, the
    stage reached, and the analysis the reports render
    (`scanbench.growth.analysis.SweepAnalysis.to_json`) or why there is none."""

    sweeps: tuple[Sweep, ...]
    budget_s: float
    stage: Stage = Stage.SWEEP
    analysis: tuple[Mapping[str, Any], ...] = ()
    error: str | None = None  # why there is no analysis (the records are all stored)

    def to_json(self) -> dict[str, Any]:
        return {
            "budget_s": self.budget_s,
            "stage": str(self.stage),
            "sweeps": [sweep.to_json() for sweep in self.sweeps],
            "analysis": [dict(item) for item in self.analysis],
            "error": self.error,
        }


@dataclasses.dataclass(frozen=True)
class ShardFacts:
    """Which shard of which run a results file is (``scanbench run --shard K/N``;
    `scanbench.execution.shards`).

    ``positions`` are this shard's cells' places in the whole run's list (whose hash is
    ``cells_hash`` and length ``cells_total``); ``expected_s`` is every shard's expected
    seconds, from ``costs`` (``model``, ``results FILE`` or ``history DIR``);
    ``scenario_versions`` the SHA-256 of each scenario's source file.
    """

    run_id: str
    index: int
    count: int
    unit: str
    cells_hash: str
    cells_total: int
    positions: tuple[int, ...]
    costs: str
    expected_s: tuple[float, ...]
    scenario_versions: Mapping[str, str]

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["positions"] = list(self.positions)
        data["expected_s"] = list(self.expected_s)
        data["scenario_versions"] = dict(self.scenario_versions)
        return data


@dataclasses.dataclass(frozen=True)
class GatheredShard:
    """One shard of a gathered run: its file, host, cells, expected and measured seconds."""

    index: int
    file: str
    hostname: str | None
    cells: int
    expected_s: float
    measured_s: float


@dataclasses.dataclass(frozen=True)
class Gathered:
    """A run gathered from its shards (``scanbench gather``;
    `scanbench.execution.gathering`)."""

    run_id: str
    count: int
    unit: str
    cells_hash: str
    costs: str
    shards: tuple[GatheredShard, ...]

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["shards"] = [dataclasses.asdict(shard) for shard in self.shards]
        return data


@dataclasses.dataclass(frozen=True)
class CommandLine:
    """A run asked for by ``scanbench run``: its arguments and what they named."""

    argv: tuple[str, ...]
    sizes: tuple[str, ...] = ()
    devices: tuple[int | None, ...] = ()
    seed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "argv": list(self.argv),
            "sizes": list(self.sizes),
            "devices": list(self.devices),
            "seed": self.seed,
        }


@dataclasses.dataclass(frozen=True)
class NotebookCall:
    """A run made by the notebook API (`scanbench.notebook.compare`): not resumable."""

    api: str
    isolation: str
    tolerance: str
    timing: TimingConfig

    def to_json(self) -> dict[str, Any]:
        return {
            "api": self.api,
            "isolation": self.isolation,
            "tolerance": self.tolerance,
            "timing": dataclasses.asdict(self.timing),
        }


@dataclasses.dataclass(frozen=True)
class Invocation:
    """How a run was asked for (see the module doc for its JSON keys).

    Attributes:
        scenarios: per scenario name, what the reports need to know of it.
        plan: the cells and settings the runner measures; None for a run it cannot resume
            (made by the notebook API, or stored before plans were).
        growth: a grown run's sweeps, stage and analysis.
        shard: which shard of which run this is (``run --shard K/N``).
        gathered: the shards a gathered run came from (``scanbench gather``).
        origin: the command line or the notebook call that asked for it.
        resumed_with_differences: what had changed in the code or environment when it
            was resumed with ``--force``.
    """

    scenarios: Mapping[str, ScenarioFacts] = dataclasses.field(default_factory=dict)
    plan: Plan | None = None
    growth: Growth | None = None
    origin: CommandLine | NotebookCall | None = None
    resumed_with_differences: tuple[str, ...] = ()
    shard: ShardFacts | None = None
    gathered: Gathered | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"schema_version": INVOCATION_VERSION}
        data.update(self.origin.to_json() if self.origin else {})
        data.update(self.plan.to_json() if self.plan else {})
        data["scenarios"] = {name: facts.to_json() for name, facts in self.scenarios.items()}
        if self.growth is not None:
            data["growth"] = self.growth.to_json()
        if self.resumed_with_differences:
            data["resumed_with_differences"] = list(self.resumed_with_differences)
        if self.shard is not None:
            data["shard"] = self.shard.to_json()
        if self.gathered is not None:
            data["gathered"] = self.gathered.to_json()
        return data

    @classmethod
    def from_json(cls, data: Any) -> Invocation:
        """The invocation a results file or journal stores, of any readable version.

        Raises:
            StoreError: naming the first field that is missing or of the wrong type.
            SchemaVersionError: an invocation of a version this scanbench cannot read.
        """
        if not isinstance(data, Mapping):
            raise StoreError(f"field 'invocation' must be an object, got {data!r:.80}")
        version = data.get("schema_version", 0)
        if version not in READABLE_VERSIONS:
            raise SchemaVersionError(
                f"invocation schema version {version!r}, this scanbench reads versions "
                f"{', '.join(map(str, READABLE_VERSIONS))}; re-run the benchmark with this version"
            )
        try:
            origin: CommandLine | NotebookCall | None = None
            if "argv" in data:
                origin = _command_line(data)
            elif "api" in data:
                origin = _notebook_call(data)
            growth = data.get("growth")
            return cls(
                _scenarios(data),
                _plan(data) if "cells" in data else None,
                None if growth is None else _field(data, "growth", _growth),
                origin,
                _field(data, "resumed_with_differences", _strings, ()),
                _field(data, "shard", _shard, None),
                _field(data, "gathered", _gathered, None),
            )
        except _Wrong as wrong:
            raise StoreError(f"field 'invocation.{wrong.path}' {wrong.why}") from None


# -- the readers: a wrong field is named by its path ----------------------------------


def _plan(data: Mapping[str, Any]) -> Plan:
    return Plan(
        _field(data, "cells", lambda cells: tuple(_cell(cell) for cell in _list(cells))),
        _field(data, "timing", _timing),
        _field(data, "timeout_s", _positive),
        _field(data, "probes", _bool),
        _field(data, "count_parts", _bool, False),
        _field(data, "overlap", _bool, False),  # runs stored before it: one cell at a time
        _field(data, "remeasure", _count, 0),  # runs stored before it: never again
    )


def _growth(value: Any) -> Growth:
    data = _object(value)
    return Growth(
        _field(data, "sweeps", lambda v: tuple(Sweep.from_json(s) for s in _list(v))),
        _field(data, "budget_s", _positive),
        _field(data, "stage", Stage, Stage.SWEEP),
        _field(data, "analysis", lambda v: tuple(_object(a) for a in _list(v)), ()),
        _field(data, "error", _string_or_none, None),
    )


def _shard(value: Any) -> ShardFacts:
    data = _object(value)
    count = _field(data, "count", _positive_int)
    total = _field(data, "cells_total", _count)
    index = _field(data, "index", _positive_int)
    if index > count:
        raise _Wrong("index", f"must be in 1..count ({count}), got {index}")

    def positions(value: Any) -> tuple[int, ...]:
        _expect(all(_is_int(p) and 0 <= p < total for p in _list(value)), "cell positions", value)
        return tuple(value)

    def expected(value: Any) -> tuple[float, ...]:
        _expect(len(_list(value)) == count, f"{count} numbers (one per shard)", value)
        return tuple(_seconds(v) for v in value)

    return ShardFacts(
        _field(data, "run_id", _string),
        index,
        count,
        _field(data, "unit", _string),
        _field(data, "cells_hash", _string),
        total,
        _field(data, "positions", positions),
        _field(data, "costs", _string),
        _field(data, "expected_s", expected),
        _field(data, "scenario_versions", _strings_by_name),
    )


def _gathered(value: Any) -> Gathered:
    data = _object(value)

    def shard(item: Any) -> GatheredShard:
        raw = _object(item)
        return GatheredShard(
            _field(raw, "index", _positive_int),
            _field(raw, "file", _string),
            _field(raw, "hostname", _string_or_none, None),
            _field(raw, "cells", _count),
            _field(raw, "expected_s", _seconds),
            _field(raw, "measured_s", _seconds),
        )

    return Gathered(
        _field(data, "run_id", _string),
        _field(data, "count", _positive_int),
        _field(data, "unit", _string),
        _field(data, "cells_hash", _string),
        _field(data, "costs", _string),
        _field(data, "shards", lambda v: tuple(shard(item) for item in _list(v))),
    )


def _command_line(data: Mapping[str, Any]) -> CommandLine:
    return CommandLine(
        _field(data, "argv", _strings),
        _field(data, "sizes", _strings, ()),
        _field(data, "devices", _device_counts, ()),
        _field(data, "seed", _count, 0),
    )


def _notebook_call(data: Mapping[str, Any]) -> NotebookCall:
    return NotebookCall(
        _field(data, "api", _string),
        _field(data, "isolation", _string, ""),
        _field(data, "tolerance", _string, ""),
        _field(data, "timing", _timing, TimingConfig()),
    )


class _Wrong(Exception):
    """A field that cannot be read: its path below ``invocation`` and why."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(path, why)
        self.path, self.why = path, why


_MISSING: Any = object()


def _field(data: Mapping[str, Any], key: str, read: Callable[[Any], Any], default=_MISSING):
    """``read(data[key])`` (``default`` when absent); what is wrong, named by its path."""
    if key not in data:
        if default is _MISSING:
            raise _Wrong(key, "is missing")
        return default
    try:
        return read(data[key])
    except _Wrong as inner:
        raise _Wrong(f"{key}.{inner.path}" if inner.path else key, inner.why) from None
    except (HarnessError, KeyError, TypeError, ValueError) as error:
        why = f"cannot be read ({type(error).__name__}: {error}), got {data[key]!r:.80}"
        raise _Wrong(key, why) from None


def _expect(check: bool, what: str, value: Any) -> None:
    if not check:
        raise _Wrong("", f"must be {what}, got {value!r:.80}")


def _object(value: Any) -> Mapping[str, Any]:
    _expect(isinstance(value, Mapping), "an object", value)
    return value


def _list(value: Any) -> list:
    _expect(isinstance(value, list), "a list", value)
    return value


def _bool(value: Any) -> bool:
    _expect(isinstance(value, bool), "true or false", value)
    return value


def _string(value: Any) -> str:
    _expect(isinstance(value, str), "a string", value)
    return value


def _string_or_none(value: Any) -> str | None:
    _expect(value is None or isinstance(value, str), "a string or null", value)
    return value


def _strings(value: Any) -> tuple[str, ...]:
    _expect(isinstance(value, list) and all(isinstance(v, str) for v in value), "strings", value)
    return tuple(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(value: Any) -> int:
    _expect(_is_int(value) and value >= 0, "an int >= 0", value)
    return value


def _device_counts(value: Any) -> tuple[int | None, ...]:
    counts = _list(value)
    _expect(all(v is None or (_is_int(v) and v >= 1) for v in counts), "ints >= 1", value)
    return tuple(counts)


def _positive(value: Any) -> float:
    _expect(isinstance(value, int | float) and not isinstance(value, bool), "a number", value)
    _expect(value > 0 and value != float("inf"), "a finite number > 0", value)
    return float(value)


def _timing(value: Any) -> TimingConfig:
    return TimingConfig(**_object(value))


def _cell(stored: Any) -> Cell:
    """A stored cell; one stored before sources named its scenario file instead."""
    stored = dict(_object(stored))
    scenario_file = stored.pop("scenario_file", None)
    if scenario_file and not stored.get("source"):
        stored["source"] = file_source(scenario_file)
    return Cell(**stored)


def _facts(value: Any) -> ScenarioFacts:
    facts = _object(value)
    known = {field.name for field in dataclasses.fields(ScenarioFacts)}
    _expect(set(facts) <= known, f"an object of {', '.join(sorted(known))}", value)
    _expect(isinstance(facts.get("source"), str), "an object with a string 'source'", value)
    for key in ("throughput_unit", "baseline"):
        _string_or_none(facts.get(key))
    return ScenarioFacts(**facts)


def _names_to(read: Callable[[Any], Any]) -> Callable[[Any], dict[str, Any]]:
    """A reader of ``{name: item}``, each item read by ``read``."""
    return lambda value: {name: _field(value, name, read) for name in _object(value)}


def _scenarios(data: Mapping[str, Any]) -> dict[str, ScenarioFacts]:
    """Per scenario, its facts; in files from before they were named, the throughput
    unit and baseline of ``throughput_units`` and ``baselines``."""
    if "scenarios" in data:
        return _field(data, "scenarios", _names_to(_facts))
    units = _field(data, "throughput_units", _names_to(_string), {})
    baselines = _field(data, "baselines", _names_to(_string_or_none), {})
    return {
        name: ScenarioFacts("", units.get(name), baselines.get(name))
        for name in sorted({*units, *baselines})
    }


def _positive_int(value: Any) -> int:
    _expect(_is_int(value) and value >= 1, "an int >= 1", value)
    return value


def _seconds(value: Any) -> float:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    _expect(number and 0 <= value < float("inf"), "seconds >= 0", value)
    return float(value)


def _strings_by_name(value: Any) -> dict[str, str]:
    data = _object(value)
    _expect(all(isinstance(v, str) for v in data.values()), "an object of strings", value)
    return dict(data)
