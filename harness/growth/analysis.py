"""A sweep's records, analysed: per backend its points, fit and counts; per pair of
backends their crossings or their ratio's trend; and what it means at the user's size.

Only the sweep's own points are fitted; a point measured to confirm a crossover (an
*added* point) is shown and checked against the prediction but never fitted, so the
prediction it checks is the one that was made before it was measured. A point measured on
part of the swept axis itself (`scanbench.api.Backend.reducible_to` along the axis) is a
scaled copy of a smaller one and is not fitted either; one measured on part of another
axis is fitted, marked as scaled.

The analysis is stored with the run (`scanbench.invocation.Growth.analysis`, `to_json`) and
the reports render it; numbers only, text is the reports' (`scanbench.reports.growth_section`).
"""

from __future__ import annotations

import dataclasses
import itertools
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from ..api import Record, cache_suffix, param_suffix
from .budget import PREDICTED
from .count_lines import CountLine, PricedLine, count_lines, priced_line
from .crossover import Crossover, Trend, confirm, crossings, trend
from .fit import Draws, Fit, fit_costs
from .points import Sweep

NOT_RIVALS = ("roofline",)  # strategies fitted and drawn but never paired (a limit)


@dataclasses.dataclass(frozen=True)
class Point:
    """One backend at one point of the sweep, as measured (or why not)."""

    units: int
    size: str
    status: str
    median_s: float | None = None
    low_s: float | None = None
    high_s: float | None = None
    samples_s: tuple[float, ...] = ()  # scaled like the median; not stored
    added: bool = False  # measured to confirm a crossover, not one of the sweep's points
    scaled: str = ""  # "2 of 4 generations": measured on part of the work and scaled
    fitted: bool = False
    disturbed: bool = False  # measured while the machine was busy (Record.disturbed)
    note: str = ""  # why it was skipped or failed, or why it is not fitted
    predicted_s: float | None = None  # the budget's prediction, for a point it skipped

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        del out["samples_s"]
        return out


@dataclasses.dataclass(frozen=True)
class Line:
    """One backend (with its parameters, cache mode and device count) along the sweep."""

    label: str
    backend: str
    strategy: str
    params: Mapping[str, Any]
    cache: str
    devices: int | None
    points: tuple[Point, ...]
    fit: Fit | None
    counts: tuple[CountLine, ...] = ()
    priced: PricedLine | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "backend": self.backend,
            "strategy": self.strategy,
            "params": dict(self.params),
            "cache": self.cache,
            "devices": self.devices,
            "points": [point.to_json() for point in self.points],
            "fit": None
            if self.fit is None
            else {**dataclasses.asdict(self.fit), "rough": self.fit.rough},
            "counts": [line.to_json() for line in self.counts],
            "priced": None if self.priced is None else self.priced.to_json(),
        }


@dataclasses.dataclass(frozen=True)
class OwnSize:
    """The base size's own point: which backend is fastest there (measured when it was,
    else by the fits) and whether it lies within the measured points."""

    units: int
    size: str
    fastest: str | None
    times_s: Mapping[str, float]
    measured: bool
    inside: bool

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "times_s": dict(self.times_s)}


@dataclasses.dataclass(frozen=True)
class SweepAnalysis:
    sweep: Sweep
    lines: tuple[Line, ...]
    crossovers: tuple[Crossover, ...]
    trends: tuple[Trend, ...]
    own: OwnSize | None

    def to_json(self) -> dict[str, Any]:
        return {
            "sweep": self.sweep.to_json(),
            "lines": [line.to_json() for line in self.lines],
            "crossovers": [crossover.to_json() for crossover in self.crossovers],
            "trends": [item.to_json() for item in self.trends],
            "own": None if self.own is None else self.own.to_json(),
        }

    def confirmations_missing(self) -> list[tuple[Line, int]]:
        """(line, units) of every crossover's confirmation point not measured yet."""
        by_label = {line.label: line for line in self.lines}
        missing = []
        for crossover in self.crossovers:
            if crossover.confirmation is not None or not crossover.measurable:
                continue
            for label in (crossover.below, crossover.above):
                line = by_label[label]
                if not any(p.units == crossover.confirm_at for p in line.points):
                    missing.append((line, crossover.confirm_at))
        return _unique(missing)


def _unique(pairs: list[tuple[Line, int]]) -> list[tuple[Line, int]]:
    seen, out = set(), []
    for line, units in pairs:
        if (line.label, units) not in seen:
            seen.add((line.label, units))
            out.append((line, units))
    return out


def label_of(record: Record) -> str:
    """A line's label: the backend, its --param values, cache mode and device count."""
    label = record.backend + param_suffix(dict(record.params)) + cache_suffix(record.cache)
    return label if record.devices is None else f"{label} x{record.devices}dev"


def _point(record: Record, units: int, sweep: Sweep) -> Point:
    added = units not in sweep.values
    if record.status != "ok" or "median" not in record.stats:
        first = (record.error or "").splitlines()[0] if record.error else "not timed"
        predicted = record.extra.get(PREDICTED)
        return Point(units, record.size, str(record.status), added=added, note=first,
                     predicted_s=predicted)  # fmt: skip
    scaled = dict(record.sampling.get("scaled") or {})
    factor = float(scaled.get("factor", 1.0))
    along_axis = scaled.get("along") == sweep.param
    stats = record.stats
    return Point(
        units,
        record.size,
        "ok",
        median_s=stats["median"],
        low_s=stats.get("ci_low"),
        high_s=stats.get("ci_high"),
        samples_s=tuple(value * factor for value in record.samples_s),
        added=added,
        scaled=f"{scaled['measured']} of {scaled['full']} {scaled['along']}" if scaled else "",
        fitted=not added and not along_axis and stats["median"] > 0,
        disturbed=record.disturbed,
        note="measured on part of the swept axis: not fitted" if along_axis else "",
    )


def _line(
    records: list[tuple[int, Record]], sweep: Sweep, confidence: float
) -> tuple[Line, Draws | None]:
    """One backend's points (the last record of each point), fit and count lines."""
    by_units = {units: record for units, record in sorted(records, key=lambda item: item[0])}
    points = tuple(_point(record, units, sweep) for units, record in sorted(by_units.items()))
    timed = [(p.units, [s for s in p.samples_s if s > 0]) for p in points if p.fitted]
    timed = [(units, samples) for units, samples in timed if samples]
    first = records[0][1]
    fit = draws = None
    if len({units for units, _ in timed}) >= 2:
        seed = zlib.crc32(label_of(first).encode())
        fit, draws = fit_costs(
            [units for units, _ in timed], [samples for _, samples in timed], confidence, seed
        )
    counted = [
        (units, by_units[units]) for units in sorted(by_units)
        if units in sweep.values and by_units[units].status == "ok" and by_units[units].counts
    ]  # fmt: skip
    xs = [units for units, _ in counted]
    line = Line(
        label=label_of(first),
        backend=first.backend,
        strategy=first.strategy,
        params=dict(first.params),
        cache=first.cache,
        devices=first.devices,
        points=points,
        fit=fit,
        counts=count_lines(xs, [record.counts.per_call() for _, record in counted]),
        priced=priced_line(xs, [dict(record.decomposition) for _, record in counted]),
    )
    return line, draws


def _pair(a: Line, b: Line, draws: Mapping[str, Draws], sweep: Sweep) -> tuple[list, Trend | None]:
    """The crossings of two lines' fits (searched one step beyond the points both fitted),
    or, when they do not cross, the trend of their ratio."""
    found: list[Crossover] = []
    if a.fit is not None and b.fit is not None:
        fitted_a = {p.units for p in a.points if p.fitted}
        fitted_b = {p.units for p in b.points if p.fitted}
        low = max(min(fitted_a), min(fitted_b))
        high = min(max(fitted_a), max(fitted_b))
        if low < high:
            searched = (max(sweep.minimum, low / sweep.step), high * sweep.step)
            found = crossings(
                (a.label, b.label),
                (a.fit, b.fit),
                (draws[a.label], draws[b.label]),
                (low, high),
                searched,
                sweep.minimum,
            )
    if found:
        return found, None
    medians = tuple(
        {p.units: p.median_s for p in line.points if p.status == "ok" and not p.added}
        for line in (a, b)
    )
    return [], trend((a.label, b.label), medians)


def _confirmed(crossover: Crossover, lines: Mapping[str, Line], confidence: float) -> Crossover:
    """The crossover with what its confirmation point measured, when both were measured."""
    at = crossover.confirm_at
    found = []
    for label in (crossover.below, crossover.above):
        point = next((p for p in lines[label].points if p.units == at), None)
        if point is None or point.status != "ok" or not point.samples_s:
            return crossover
        found.append(point)
    below, above = found
    result = confirm(crossover, below.samples_s, above.samples_s, below.added, confidence)
    return dataclasses.replace(crossover, confirmation=result)


def _own(sweep: Sweep, lines: Sequence[Line]) -> OwnSize | None:
    times = {}
    measured = True
    for line in lines:
        if line.strategy in NOT_RIVALS:
            continue
        point = next((p for p in line.points if p.units == sweep.base_value), None)
        if point is not None and point.status == "ok" and point.median_s:
            times[line.label] = point.median_s
        elif line.fit is not None:
            times[line.label] = line.fit.at(sweep.base_value)
            measured = False
    if not times:
        return None
    units = [p.units for line in lines for p in line.points if p.fitted]
    inside = bool(units) and min(units) <= sweep.base_value <= max(units)
    fastest = min(times, key=times.__getitem__)
    return OwnSize(sweep.base_value, sweep.base, fastest, times, measured, inside)


def analyse(sweep: Sweep, records: Sequence[Record], confidence: float = 0.95) -> SweepAnalysis:
    """The analysis of ``sweep`` from a run's ``records`` (any records: those of other
    scenarios, dtypes, axes or bases are left out)."""
    grouped: dict[str, list[tuple[int, Record]]] = {}
    for record in records:
        if record.scenario != sweep.scenario or record.dtype != sweep.dtype:
            continue
        units = sweep.value_of(record.size, record.size_params)
        if units is not None:
            grouped.setdefault(label_of(record), []).append((units, record))
    lines, draws = [], {}
    for label, found in grouped.items():
        line, line_draws = _line(found, sweep, confidence)
        lines.append(line)
        if line_draws is not None:
            draws[label] = line_draws
    by_label = {line.label: line for line in lines}
    crossovers, trends = [], []
    rivals = [line for line in lines if line.strategy not in NOT_RIVALS]
    for a, b in itertools.combinations(rivals, 2):
        if (a.cache, a.devices) != (b.cache, b.devices):
            continue
        found, pair_trend = _pair(a, b, draws, sweep)
        crossovers += [_confirmed(c, by_label, confidence) for c in found]
        trends += [pair_trend] if pair_trend is not None else []
    return SweepAnalysis(sweep, tuple(lines), tuple(crossovers), tuple(trends), _own(sweep, lines))
