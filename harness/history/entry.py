"""A history entry: what the history keeps of one run, as frozen data and its JSON.

An entry is keyed by the run's commit (sha, date, subject, parents, remote), branch,
machine fingerprint (a name, the hostname unless the user named the machine, CPU model and
count, platform, device kind and count) and environment (jax, jaxlib, XLA flags, x64), and
holds, per cell, what a trend needs: the median time and its interval, the sample count,
whether the machine was busy, and the counts per call with their breakdowns (dispatches by
function, kernels by HLO op kind, launches by executable). The samples stay in the results
file. `Entry.from_json` checks every field it reads and names the first that is wrong.

Example:
    >>> Setup("0.10.2", "0.10.2", "", False).label
    'jax 0.10.2'
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

from ..api import StoreError, param_suffix

HISTORY_VERSION = 1
SHA = re.compile(r"^[0-9a-f]{7,64}$")


@dataclasses.dataclass(frozen=True)
class Commit:
    """The commit a run measured: sha, author date (ISO 8601, None when the run recorded
    only the sha), subject, parents, and the remote URL (credentials removed)."""

    sha: str
    date: str | None = None
    subject: str = ""
    parents: tuple[str, ...] = ()
    remote: str | None = None

    @property
    def short(self) -> str:
        return self.sha[:7]


@dataclasses.dataclass(frozen=True)
class Machine:
    """The machine fingerprint: ``name`` is the hostname unless the user named the
    machine (CI runners get a new hostname per job)."""

    name: str
    hostname: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    platform: str | None = None
    device_kind: str | None = None
    device_count: int | None = None

    @property
    def key(self) -> tuple:
        """What tells two machines apart (the hostname only through ``name``)."""
        return (
            self.name,
            self.cpu_model,
            self.cpu_count,
            self.platform,
            self.device_kind,
            self.device_count,
        )

    @property
    def label(self) -> str:
        cpus = f", {self.cpu_count} CPUs" if self.cpu_count else ""
        kind = self.device_kind or "?"
        platform = "" if (self.platform or "").lower() in kind.lower() else f"{self.platform} "
        device = f"{platform}{kind} x{self.device_count or '?'}"
        return f"{self.name} ({self.cpu_model or 'CPU ?'}{cpus}; {device})"


@dataclasses.dataclass(frozen=True)
class Setup:
    """The software environment a series keeps fixed: jax, jaxlib, XLA flags, x64."""

    jax: str | None
    jaxlib: str | None
    xla_flags: str = ""
    x64: bool | None = None

    @property
    def label(self) -> str:
        text = f"jax {self.jax}" if self.jax == self.jaxlib else f"jax {self.jax}/{self.jaxlib}"
        text += " x64" if self.x64 else ""
        return text + (f" XLA_FLAGS={self.xla_flags}" if self.xla_flags else "")


@dataclasses.dataclass(frozen=True)
class CellPoint:
    """One cell of one stored run: its time (median and interval, None when the cell
    failed) and its counts per call."""

    scenario: str
    backend: str
    size: str
    dtype: str
    status: str
    params: tuple[tuple[str, Any], ...] = ()
    devices: int | None = None
    seed: int = 0
    error: str | None = None
    median: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float | None = None
    samples: int = 0
    disturbed: bool = False
    counts: Mapping[str, float] = dataclasses.field(default_factory=dict)
    breakdowns: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)
    source: str = ""  # where the scenario was loaded from (`scanbench.sources`), if recorded
    cache: str = "warm"  # "cold": caches evicted before every sample (timed apart)

    @property
    def label(self) -> str:
        """``scenario/backend[params]/size/dtype`` (as a run's cells are labelled)."""
        label = f"{self.scenario}/{self.backend}{param_suffix(dict(self.params))}/"
        label += f"{self.size}/{self.dtype}"
        label += "" if self.devices is None else f"/{self.devices}dev"
        label += "" if self.seed == 0 else f"/seed{self.seed}"
        return label + ("" if self.cache == "warm" else f" [{self.cache}]")

    @property
    def timed(self) -> bool:
        return self.status == "ok" and self.median is not None and self.median > 0


@dataclasses.dataclass(frozen=True)
class Entry:
    """One added run, as stored."""

    run_id: str
    commit: Commit
    branch: str | None
    machine: Machine
    setup: Setup
    measured_at: str | None
    source: str  # the results file's name when it was added
    cells: tuple[CellPoint, ...]

    @property
    def filename(self) -> str:
        return f"{self.commit.sha[:12]}-{self.run_id[:16]}.json"

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        for cell in data["cells"]:
            cell["params"] = dict(cell["params"])
        return {"history_version": HISTORY_VERSION, **data}

    @classmethod
    def from_json(cls, data: Any) -> Entry:
        """Parse a stored entry; `StoreError` naming the first field that is wrong."""
        if not isinstance(data, dict):
            raise StoreError("not a JSON object")
        if "history_version" not in data:
            what = "a results file" if "schema_version" in data else "not a history entry"
            raise StoreError(f"{what} (no history_version)")
        if data["history_version"] != HISTORY_VERSION:
            raise StoreError(
                f"history_version {data['history_version']!r}; this scanbench reads "
                f"{HISTORY_VERSION}"
            )
        try:
            return _parse(data)
        except (KeyError, TypeError, ValueError) as error:
            raise StoreError(f"malformed entry ({type(error).__name__}: {error})") from None


def _check(value: Any, kind: type | tuple, field: str, optional: bool = False) -> Any:
    """``value`` if it is of ``kind`` (a bool is no number; a number is finite), else
    `StoreError` naming the field."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if value is None and optional:
        return value
    wrong_bool = isinstance(value, bool) and bool not in kinds  # a bool is no number
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(value, kinds) and not wrong_bool and (not number or _finite(value)):
        return value
    what = " or ".join(k.__name__ for k in kinds) + (" or null" if optional else "")
    raise StoreError(f"field {field!r} must be {what}, got {value!r:.60}")


def _finite(value: float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer beyond a float's range
        return False


def _numbers(value: Any, field: str) -> dict[str, float]:
    _check(value, dict, field)
    return {str(k): float(_check(v, (int, float), f"{field}.{k}")) for k, v in value.items()}


def _fields(raw: Any, where: str, table: Mapping[str, tuple[type | tuple, bool]]) -> dict:
    """``raw`` checked against ``table`` (key -> (kind, optional)): a missing key keeps
    its default, an unknown key is an error."""
    raw = dict(_check(raw, dict, where))
    unknown = sorted(raw.keys() - table.keys())
    if unknown:
        raise StoreError(f"field '{where}.{unknown[0]}' is unknown; known: {', '.join(table)}")
    for key, value in raw.items():
        kind, optional = table[key]
        _check(value, kind, f"{where}.{key}", optional)
    return raw


STR, INT, NUMBER = (str, False), (int, False), ((int, float), True)
COMMIT = {
    "sha": STR,
    "date": (str, True),
    "subject": STR,
    "parents": (list, False),
    "remote": (str, True),
}
MACHINE = {
    "name": STR,
    "hostname": (str, True),
    "cpu_model": (str, True),
    "cpu_count": (int, True),
    "platform": (str, True),
    "device_kind": (str, True),
    "device_count": (int, True),
}
SETUP = {"jax": (str, True), "jaxlib": (str, True), "xla_flags": STR, "x64": (bool, True)}
CELL = {
    "scenario": STR,
    "backend": STR,
    "size": STR,
    "dtype": STR,
    "status": STR,
    "params": (dict, False),
    "devices": (int, True),
    "seed": INT,
    "error": (str, True),
    "median": NUMBER,
    "ci_low": NUMBER,
    "ci_high": NUMBER,
    "confidence": NUMBER,
    "samples": INT,
    "disturbed": (bool, False),
    "counts": (dict, False),
    "breakdowns": (dict, False),
    "source": STR,
    "cache": STR,
}
PARAM = (str, int, float, bool)


def _parse(data: dict) -> Entry:
    commit = _fields(data["commit"], "commit", COMMIT)
    if not SHA.match(commit["sha"]):
        raise StoreError(f"field 'commit.sha' must be a hex sha, got {commit['sha']!r:.60}")
    parents = commit.get("parents", [])
    commit["parents"] = tuple(_check(p, str, f"commit.parents[{i}]") for i, p in enumerate(parents))
    machine = _fields(data["machine"], "machine", MACHINE)
    setup = _fields(data["setup"], "setup", SETUP)
    cells = []
    for index, raw in enumerate(_check(data["cells"], list, "cells")):
        where = f"cells[{index}]"
        raw = _fields(raw, where, CELL)
        params = raw.get("params", {})
        for name, value in params.items():
            _check(value, PARAM, f"{where}.params.{name}", optional=True)
        raw["params"] = tuple(sorted(params.items()))
        raw["counts"] = _numbers(raw.get("counts", {}), f"{where}.counts")
        raw["breakdowns"] = {
            name: _numbers(parts, f"{where}.breakdowns.{name}")
            for name, parts in raw.get("breakdowns", {}).items()
        }
        cells.append(CellPoint(**raw))
    return Entry(
        run_id=_check(data["run_id"], str, "run_id"),
        commit=Commit(**commit),
        branch=_check(data.get("branch"), str, "branch", optional=True),
        machine=Machine(**machine),
        setup=Setup(**setup),
        measured_at=_check(data.get("measured_at"), str, "measured_at", optional=True),
        source=_check(data.get("source", ""), str, "source"),
        cells=tuple(cells),
    )
