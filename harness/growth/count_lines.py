"""Counts per call along a sweep as exact lines, and the overheads they price.

Counts are deterministic, so along an axis each is either an exact line, ``count(x) =
fixed + per_unit x x`` through every point (what `scanbench.probes.extrapolation` finds
along ``count_along``, here over the sweep's points), or it is not linear and keeps its
values. The sequential loop's dispatches grow per unit, a scanned backend's stay fixed:
the counts say *why* one fit has the per-unit cost it has.

The time those counts cost is each point's decomposition (`scanbench.decomposition`:
dispatches x the dispatch cost, kernels x the launch cost, transfers by path, waits x the
wait cost, all measured in the same run), fitted the same way: its intercept is the
fixed cost the counts explain, to hold against the fitted fixed cost per call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

# the per-call counts fitted along a sweep (keys of scanbench.counts.Counts.per_call)
COUNTED = ("dispatches", "kernels", "launch_equivalent", "h2d", "host_conversions", "waits")
# the decomposition parts priced from counts x unit costs (keys "<part>_s")
PRICED = ("dispatch", "launch", "transfer", "sync")
EXACT = 1e-9  # relative tolerance of a count on its line


@dataclasses.dataclass(frozen=True)
class CountLine:
    """One count along a sweep: an exact line, or (``linear`` False) its values only."""

    name: str
    fixed: float | None
    per_unit: float | None
    values: tuple[float, ...]
    linear: bool

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "values": list(self.values)}


@dataclasses.dataclass(frozen=True)
class PricedLine:
    """The overheads the counts explain, as fixed + per unit x units (seconds), by part."""

    fixed_s: float
    per_unit_s: float
    parts: Mapping[str, tuple[float, float]]  # part -> (fixed_s, per_unit_s)

    def to_json(self) -> dict[str, Any]:
        return {
            "fixed_s": self.fixed_s,
            "per_unit_s": self.per_unit_s,
            "parts": {part: list(pair) for part, pair in self.parts.items()},
        }


def _line(units: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line (exact through two points)."""
    slope, intercept = np.polyfit(units, values, 1)
    return float(intercept), float(slope)


def _tidy(value: float) -> float:
    """A value that is an integer up to rounding noise, as that integer."""
    rounded = round(value)
    return float(rounded) if abs(value - rounded) <= EXACT * max(1.0, abs(value)) else value


def count_lines(
    units: Sequence[float], per_call: Sequence[Mapping[str, float | None]]
) -> tuple[CountLine, ...]:
    """Each `COUNTED` count measured at every point (>= 2 distinct), as a `CountLine`."""
    xs = np.asarray(units, float)
    if len(set(xs.tolist())) < 2:
        return ()
    lines = []
    for name in COUNTED:
        raw = [counts.get(name) for counts in per_call]
        if any(value is None for value in raw):
            continue
        values = np.asarray(raw, float)
        fixed, per_unit = _line(xs, values)
        fitted = fixed + per_unit * xs
        linear = bool(np.all(np.abs(fitted - values) <= EXACT * np.maximum(1.0, np.abs(values))))
        lines.append(
            CountLine(
                name,
                _tidy(fixed) if linear else None,
                _tidy(per_unit) if linear else None,
                tuple(float(v) for v in values),
                linear,
            )
        )
    return tuple(lines)


def priced_line(
    units: Sequence[float], decompositions: Sequence[Mapping[str, Any]]
) -> PricedLine | None:
    """The `PRICED` parts of each point's decomposition as lines; None unless every point
    has them (a run without unit costs, or with ``--no-probes``)."""
    xs = np.asarray(units, float)
    if len(set(xs.tolist())) < 2:
        return None
    parts = {}
    for part in PRICED:
        seconds = [d.get(f"{part}_s") for d in decompositions]
        if any(not isinstance(value, int | float) for value in seconds):
            return None
        parts[part] = _line(xs, np.asarray(seconds, float))
    return PricedLine(
        fixed_s=sum(fixed for fixed, _ in parts.values()),
        per_unit_s=sum(per_unit for _, per_unit in parts.values()),
        parts=parts,
    )
