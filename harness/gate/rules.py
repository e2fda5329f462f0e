"""The gate file: declarative regression rules in TOML, parsed into frozen dataclasses.

``bench/gates.toml`` (hand-written, reviewed like code)::

    [settings]
    counts_file = "counts.toml"  # count expectations, written by `scanbench gate --update-counts`
    count_size = "smoke"         # the size counts are taken at
    scenarios = ["tridiagonal"]  # whose counts --update-counts records (default: the rules')
    count_exclude = ["mppi_tuning/sequential-eager"]
    confidence = 0.99            # confidence of every time decision (exact intervals)
    blocks = 20                  # interleaved blocks per invariant and --against cell ...
    samples_per_block = 5        # ... of at least this many calls per side
    block_time_s = 0.1           # ... and enough calls to fill this many seconds
    delta = 0.10                 # --against: allowed slowdown (10%) unless a rule says
    floor_s = 10e-6              # --against: differences below 10 us never fail
    seed = 0
    pin_workers = true           # --against/--aa: both sides' workers on the same one CPU
    worker_pairs = 2             # ... k workers per side, blocks shared round robin

    [[invariant]]                # interleaved in one job: `slower` takes >= factor x
                                 # `faster` (or, with `within = N` instead: at most N x)
    scenario = "tridiagonal"
    size = "smoke"
    faster = "scanned-time-major"
    slower = "scanned-issue"
    factor = 2.0
    worker_pairs = 1             # optional, default [settings] worker_pairs (also blocks)

    [[baseline]]                 # --against REV: this cell may not slow down
    scenario = "tridiagonal"
    backend = "numba-serial"
    size = "smoke"
    delta = 0.05                 # optional, default [settings] delta
    worker_pairs = 4             # optional, default [settings] worker_pairs (also blocks)

The counts file holds one ``[[count]]`` table per cell with its per-call totals and the
per-function / per-op breakdowns that name the culprit when a total grows.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..api import InputError, UnknownNameError
from ..counts import BREAKDOWNS, GATED
from ..statistics import median_bound_indices


def fewest_blocks(confidence: float) -> int:
    """The fewest blocks whose per-block ratios bound their median on both sides at
    ``confidence`` (8 at 99%): with fewer, no outcome but *inconclusive* is possible."""
    count = 1
    while median_bound_indices(count, confidence)[0] < 0:
        count += 1
    return count


def _enough_blocks(blocks: int, confidence: float, where: str) -> None:
    fewest = fewest_blocks(confidence)
    if blocks < fewest:
        raise InputError(
            f"{where} = {blocks}: too few blocks to bound a median ratio at confidence "
            f"{confidence:g}; give at least {fewest}"
        )


@dataclasses.dataclass(frozen=True)
class Settings:
    """The ``[settings]`` table of a gate file (every key optional; these are the defaults).

    Attributes:
        counts_file: the counts file, beside the gate file.
        count_size: the size the count rules are recorded and checked at.
        scenarios: the scenarios whose counts ``--update-counts`` records (names or
            sources, e.g. ``"bench/scenario.py:SCENARIO"``, relative to the directory
            scanbench runs in); default: every scenario the rules name.
        count_exclude: ``scenario/backend`` left out of ``--update-counts``.
        confidence: the confidence of every time decision (exact order-statistic
            intervals of the median per-block ratio).
        blocks: interleaved blocks per invariant and baseline comparison (at least
            `fewest_blocks` for the confidence: 8 at 99%).
        samples_per_block: at least this many calls per side and block ...
        block_time_s: ... and enough calls to fill this many seconds.
        delta: allowed slowdown of a ``[[baseline]]`` rule unless the rule says.
        floor_s: differences below this never fail.
        seed: seeds the block order and the bootstrap.
        pin_workers: both sides' workers on the same one CPU.
        worker_pairs: workers per side, blocks shared round robin.
    """

    counts_file: str = "counts.toml"
    count_size: str = "smoke"
    scenarios: tuple[str, ...] = ()
    count_exclude: tuple[str, ...] = ()
    confidence: float = 0.99
    blocks: int = 20
    samples_per_block: int = 5
    block_time_s: float = 0.1
    delta: float = 0.10
    floor_s: float = 10e-6
    seed: int = 0
    pin_workers: bool = True
    worker_pairs: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "count_exclude", tuple(self.count_exclude))
        object.__setattr__(self, "scenarios", tuple(self.scenarios))
        for key in ("blocks", "samples_per_block", "delta", "worker_pairs"):
            _positive(getattr(self, key), f"[settings] {key}")
        for key in ("confidence", "floor_s", "block_time_s"):
            if not math.isfinite(getattr(self, key)):
                raise InputError(f"[settings] {key} must be finite, got {getattr(self, key)}")
        if self.block_time_s < 0:
            raise InputError(f"[settings] block_time_s must be >= 0, got {self.block_time_s}")
        if self.floor_s < 0:
            raise InputError(f"[settings] floor_s must be >= 0, got {self.floor_s}")
        if not 0.5 < self.confidence < 1:
            raise InputError(f"[settings] confidence must be in (0.5, 1), got {self.confidence}")
        _enough_blocks(self.blocks, self.confidence, "[settings] blocks")

    @classmethod
    def types(cls) -> dict[str, type]:
        """The TOML type of every key (a tuple is a TOML array)."""
        return {
            field.name: list if isinstance(field.default, tuple) else type(field.default)
            for field in dataclasses.fields(cls)
        }


@dataclasses.dataclass(frozen=True)
class CountRule:
    """Per-call counts of one cell may not exceed these (exact: counts are deterministic)."""

    scenario: str
    backend: str
    size: str
    dtype: str
    limits: Mapping[str, float]
    dispatches_by_function: Mapping[str, float] = dataclasses.field(default_factory=dict)
    kernels_by_op: Mapping[str, float] = dataclasses.field(default_factory=dict)
    launch_by_executable: Mapping[str, float] = dataclasses.field(default_factory=dict)
    conversions_by_function: Mapping[str, float] = dataclasses.field(default_factory=dict)
    waits_by_function: Mapping[str, float] = dataclasses.field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.scenario}/{self.backend}/{self.size}/{self.dtype}"


@dataclasses.dataclass(frozen=True)
class Invariant:
    """Measured interleaved in one job, ``slower`` takes at least ``factor`` x the time
    of ``faster`` (``within``: at most that many times; exactly one of the two is set)."""

    scenario: str
    size: str
    faster: str
    slower: str
    factor: float | None = None
    within: float | None = None
    dtype: str | None = None
    why: str = ""
    worker_pairs: int | None = None  # None: [settings] worker_pairs
    blocks: int | None = None  # None: [settings] blocks
    name: str | None = None  # the scenario's name when ``scenario`` is a source (the label)

    def settings(self, settings: Settings) -> Settings:
        """The gate's settings with this rule's own worker pairs and blocks."""
        own = {"worker_pairs": self.worker_pairs, "blocks": self.blocks}
        return dataclasses.replace(settings, **{k: v for k, v in own.items() if v is not None})

    def cells(self) -> dict[str, BaselineRule]:
        """The two cells as the interleaved measurement takes them: ``faster`` in the
        baseline's place, ``slower`` in the candidate's (ratios slower / faster)."""
        return {
            side: BaselineRule(self.scenario, backend, self.size, 0.0, 0.0, self.dtype)
            for side, backend in (("baseline", self.faster), ("candidate", self.slower))
        }

    @property
    def label(self) -> str:
        where = f"{self.name or self.scenario}/{self.size}"
        if self.within is not None:
            return f"{where}: {self.slower} within {self.within:g}x of {self.faster}"
        return f"{where}: {self.faster} >= {self.factor:g}x faster than {self.slower}"


@dataclasses.dataclass(frozen=True)
class BaselineRule:
    """Against a baseline revision, this cell may not slow down by more than ``delta``."""

    scenario: str
    backend: str
    size: str
    delta: float
    floor_s: float
    dtype: str | None = None
    worker_pairs: int | None = None  # None: [settings] worker_pairs
    blocks: int | None = None  # None: [settings] blocks
    name: str | None = None  # the scenario's name when ``scenario`` is a source (the label)

    @property
    def label(self) -> str:
        return f"{self.name or self.scenario}/{self.backend}/{self.size}"

    def settings(self, settings: Settings) -> Settings:
        """The gate's settings with this rule's own worker pairs and blocks."""
        own = {"worker_pairs": self.worker_pairs, "blocks": self.blocks}
        return dataclasses.replace(settings, **{k: v for k, v in own.items() if v is not None})


@dataclasses.dataclass(frozen=True)
class Gates:
    """Everything a gate file declares (settings, rules) plus the counts file's rules."""

    path: Path
    settings: Settings
    counts: tuple[CountRule, ...]
    invariants: tuple[Invariant, ...]
    baselines: tuple[BaselineRule, ...]

    @property
    def counts_path(self) -> Path:
        return self.path.parent / self.settings.counts_file


def _table(raw: Any, where: str, required: dict[str, type], optional: dict[str, type]) -> dict:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a table, got {type(raw).__name__}")
    allowed = {**required, **optional}
    for key in raw:
        if key not in allowed:
            raise UnknownNameError("key", key, sorted(allowed), where)
    for key in required:
        if key not in raw:
            raise InputError(f"{where}: missing key {key!r} (required: {', '.join(required)})")
    for key, value in raw.items():
        kind = allowed[key]
        ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            raise InputError(
                f"{where}: {key!r} must be {kind.__name__}, got {type(value).__name__} {value!r}"
            )
    return raw


def _read_toml(path: Path) -> dict:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as error:
        raise InputError(f"{path}: cannot read gate file ({error.strerror})") from None
    except tomllib.TOMLDecodeError as error:
        raise InputError(f"{path}: not valid TOML ({error})") from None
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 (byte {error.start}: {error.reason})") from None
    except RecursionError:  # tomllib recurses per nested array or inline table
        raise InputError(f"{path}: not valid TOML (nested too deep)") from None


def _positive(value: float, where: str) -> float:
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{where} must be finite and > 0, got {value}")
    return float(value)


def _own_blocks(raw: dict, settings: Settings, where: str) -> None:
    """A rule's own ``worker_pairs`` and ``blocks``: positive, and enough blocks."""
    for key in ("worker_pairs", "blocks"):
        if key in raw:
            _positive(raw[key], f"{where} {key}")
    if "blocks" in raw:
        _enough_blocks(raw["blocks"], settings.confidence, f"{where} blocks")


def load_gates(path: str | Path) -> Gates:
    """Parse and validate a gate file and its counts file (which may not exist yet).

    Raises:
        InputError / UnknownNameError: naming the file, the table, the key and the
            allowed keys or values.
    """
    path = Path(path)
    data = _read_toml(path)
    _table(data, str(path), {}, {"settings": dict, "invariant": list, "baseline": list})
    raw = _table(data.get("settings", {}), f"{path} [settings]", {}, Settings.types())
    try:
        settings = Settings(**raw)
    except InputError as error:
        raise InputError(f"{path} {error}") from None
    invariants = []
    for index, raw in enumerate(data.get("invariant", [])):
        where = f"{path} [[invariant]] #{index + 1}"
        raw = _table(
            raw,
            where,
            {"scenario": str, "size": str, "faster": str, "slower": str},
            {
                "factor": float,
                "within": float,
                "dtype": str,
                "why": str,
                "worker_pairs": int,
                "blocks": int,
            },
        )
        if ("factor" in raw) == ("within" in raw):
            raise InputError(
                f"{where}: give exactly one of 'factor' (at least) or 'within' (at most)"
            )
        for key in ("factor", "within"):
            if key in raw:
                raw[key] = _positive(raw[key], f"{where} {key}")
        _own_blocks(raw, settings, where)
        invariants.append(Invariant(**raw))
    baselines = []
    for index, raw in enumerate(data.get("baseline", [])):
        where = f"{path} [[baseline]] #{index + 1}"
        raw = _table(
            raw,
            where,
            {"scenario": str, "backend": str, "size": str},
            {"dtype": str, "delta": float, "floor_s": float, "worker_pairs": int, "blocks": int},
        )
        _own_blocks(raw, settings, where)
        delta = _positive(raw.pop("delta", settings.delta), f"{where} delta")
        floor = float(raw.pop("floor_s", settings.floor_s))
        if not math.isfinite(floor) or floor < 0:
            raise InputError(f"{where} floor_s must be >= 0, got {floor}")
        baselines.append(BaselineRule(**raw, delta=delta, floor_s=floor))
    gates = Gates(path, settings, (), tuple(invariants), tuple(baselines))
    return dataclasses.replace(gates, counts=load_count_rules(gates.counts_path))


def load_count_rules(path: Path) -> tuple[CountRule, ...]:
    """The ``[[count]]`` tables of a counts file; none if the file does not exist yet."""
    if not path.exists():
        return ()
    data = _read_toml(path)
    _table(data, str(path), {}, {"count": list})
    rules = []
    for index, raw in enumerate(data.get("count", [])):
        where = f"{path} [[count]] #{index + 1}"
        raw = _table(
            raw,
            where,
            {"scenario": str, "backend": str, "size": str, "dtype": str},
            {**{key: float for key in GATED}, **{key: dict for key in BREAKDOWNS}},
        )
        limits = {key: float(raw[key]) for key in GATED if key in raw}
        breakdowns = {key: dict(raw.get(key, {})) for key in BREAKDOWNS}
        cell = {key: raw[key] for key in ("scenario", "backend", "size", "dtype")}
        rules.append(CountRule(**cell, limits=limits, **breakdowns))
    return tuple(rules)
