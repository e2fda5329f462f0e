"""What changed along a series: exact count steps, and change points of times.

**Counts** per call are deterministic: a count that differs from the previous commit's is
a fact at that commit (no statistics), reported with the breakdown entries that changed
(dispatches by function, kernels by HLO op kind, GPU launches by executable).

**Times** are noisy, so their change points are found by an established method and then
held to two more conditions:

1. `ruptures` PELT (Killick et al. 2012) with the ``l1`` cost (a segment costs the sum of
   absolute deviations from its median: one disturbed run is an outlier, not a level) on
   log median times, with segments of at least ``MIN_SIZE`` = 2 commits (a new level must
   be seen twice, so a step at the newest commit shows once one more commit is measured)
   and the penalty ``PENALTY_SCALE`` x the BIC penalty of a Laplace likelihood, ``b log
   n`` per change (a level and a position), where ``b`` = sigma sqrt(2 / pi) and sigma,
   the commit-to-commit noise, is estimated robustly from the series itself (the median
   absolute deviation of successive differences scaled to a normal sigma, / sqrt 2, at
   least 0.5%: steps do not inflate it). The scale comes from simulated series: BIC
   alone puts change points on many flat series at the noise a shared machine shows,
   scale 3 on almost none, and both still find a 1.3x step at its commit (the figures:
   performance log, 2026-11-25, "History: the change-point penalty";
   ``tests/history/test_history_changes.py`` checks a sample of it against bounds that allow for
   the sample's error);
2. each change must move the level (median of the segment's medians) by at least
   ``min_factor`` (5% by default, asv's regression threshold), and the intervals must
   separate: the typical point after the change has its interval beyond the level
   before, and the typical point before has its interval short of the level after. A
   change failing either is dropped (the weakest first) and the levels refitted.

Below ``MIN_POINTS`` timed commits a series gets "not enough points" instead of a guess.
Points measured while the machine was busy (``disturbed``) are drawn but left out (on a
busy shared host a series may stay short of ``MIN_POINTS``).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np
from scipy.stats import median_abs_deviation

from ..counts import COUNT_KEYS, KEYS
from ..extras import require
from .series import MIN_FACTOR, Series, Timeline

MIN_POINTS = 8
MIN_SIZE = 2  # commits per level (ruptures' l1 cost allows no fewer either)
PENALTY_SCALE = 3.0
NOISE_FLOOR = 0.005  # log units: 0.5%
TOLERANCE = 1e-9  # counts are exact; this only absorbs float scaling
COUNTED = tuple(key.name for key in COUNT_KEYS if key.measure == "count")


@dataclasses.dataclass(frozen=True)
class Fit:
    """Change points of one sequence of log times: ``breaks`` are the indices where a new
    level starts; ``noise`` and ``penalty`` are what PELT was run with."""

    breaks: tuple[int, ...]
    levels: tuple[float, ...]  # log level of each segment (len(breaks) + 1)
    noise: float
    penalty: float


def _segments(n: int, breaks: Sequence[int]) -> list[tuple[int, int]]:
    bounds = [0, *breaks, n]
    return list(itertools.pairwise(bounds))


def _separated(k: int, segments, levels, lows, highs) -> bool:
    """Whether the typical interval on each side of break ``k`` lies beyond the other
    side's level (True when the points carry no intervals)."""
    (a0, a1), (b0, b1) = segments[k], segments[k + 1]
    before, after = levels[k], levels[k + 1]
    up = after > before
    after_edge = (lows if up else highs)[b0:b1]
    before_edge = (highs if up else lows)[a0:a1]
    checks = []
    if np.isfinite(after_edge).any():
        edge = float(np.nanmedian(after_edge))
        checks.append(edge > before if up else edge < before)
    if np.isfinite(before_edge).any():
        edge = float(np.nanmedian(before_edge))
        checks.append(edge < after if up else edge > after)
    return all(checks)


def fit(
    log_times: Sequence[float],
    log_lows: Sequence[float] | None = None,
    log_highs: Sequence[float] | None = None,
    min_factor: float = MIN_FACTOR,
    penalty_scale: float = PENALTY_SCALE,
) -> Fit | None:
    """Change points of a series of log median times (and the log bounds of their
    intervals, NaN where unknown); None below `MIN_POINTS` points."""
    y = np.asarray(log_times, dtype=float)
    n = len(y)
    if n < MIN_POINTS:
        return None
    lows = np.full(n, np.nan) if log_lows is None else np.asarray(log_lows, dtype=float)
    highs = np.full(n, np.nan) if log_highs is None else np.asarray(log_highs, dtype=float)
    steps = np.diff(y)
    noise = max(float(median_abs_deviation(steps, scale="normal")) / math.sqrt(2), NOISE_FLOOR)
    penalty = penalty_scale * noise * math.sqrt(2 / math.pi) * math.log(n)
    # the `changepoints` extra: without it, one line naming it (`scanbench.extras`)
    ruptures = require("ruptures", "the history's change points of times")
    search = ruptures.Pelt(model="l1", min_size=MIN_SIZE, jump=1).fit(y.reshape(-1, 1))
    breaks = list(search.predict(pen=penalty)[:-1])
    while True:
        segments = _segments(n, breaks)
        levels = [float(np.median(y[a:b])) for a, b in segments]
        jumps = [abs(levels[k + 1] - levels[k]) for k in range(len(breaks))]
        weak = [
            k
            for k in range(len(breaks))
            if jumps[k] < math.log(min_factor) or not _separated(k, segments, levels, lows, highs)
        ]
        if not weak:
            return Fit(tuple(breaks), tuple(levels), noise, penalty)
        breaks.pop(min(weak, key=lambda k: jumps[k]))


@dataclasses.dataclass(frozen=True)
class TimeChange:
    """A change point: the level moved from ``before_s`` to ``after_s`` at the commit at
    ``position`` (the previous timed point at ``previous``)."""

    position: int
    previous: int
    before_s: float
    after_s: float

    @property
    def factor(self) -> float:
        return self.after_s / self.before_s


@dataclasses.dataclass(frozen=True)
class CountChange:
    """A per-call count that differs from the previous commit's, and the breakdown
    entries that changed (name, before, after; largest change first)."""

    position: int
    previous: int
    key: str
    before: float
    after: float
    parts: tuple[tuple[str, float, float], ...] = ()


@dataclasses.dataclass(frozen=True)
class TimeFit:
    """The times of one series: ``fit`` None when there were fewer than `MIN_POINTS`
    timed points; ``segments`` are (first position, last position, level in s)."""

    points: int
    left_out: int  # disturbed points, drawn but not fitted
    fit: Fit | None
    changes: tuple[TimeChange, ...] = ()
    segments: tuple[tuple[int, int, float], ...] = ()


@dataclasses.dataclass(frozen=True)
class SeriesChanges:
    series: Series
    times: TimeFit
    counts: tuple[CountChange, ...]


def _log(value: float | None) -> float:
    return math.log(value) if value is not None and value > 0 else math.nan


def time_fit(series: Series, min_factor: float = MIN_FACTOR) -> TimeFit:
    """`fit` over the series' timed, undisturbed points, mapped back to commits."""
    timed = [p for p in series.points if p.cell.timed]
    used = [p for p in timed if not p.cell.disturbed]
    found = fit(
        [_log(p.cell.median) for p in used],
        [_log(p.cell.ci_low) for p in used],
        [_log(p.cell.ci_high) for p in used],
        min_factor,
    )
    if found is None:
        return TimeFit(len(used), len(timed) - len(used), None)
    changes = tuple(
        TimeChange(
            used[k].position,
            used[k - 1].position,
            math.exp(found.levels[index]),
            math.exp(found.levels[index + 1]),
        )
        for index, k in enumerate(found.breaks)
    )
    segments = tuple(
        (used[a].position, used[b - 1].position, math.exp(level))
        for (a, b), level in zip(_segments(len(used), found.breaks), found.levels, strict=True)
    )
    return TimeFit(len(used), len(timed) - len(used), found, changes, segments)


def _differs(a: float, b: float) -> bool:
    return abs(a - b) > TOLERANCE * max(1.0, abs(a), abs(b))


def _parts(before: Mapping[str, float], after: Mapping[str, float]) -> tuple:
    names = sorted(set(before) | set(after))
    changed = [
        (name, before.get(name, 0.0), after.get(name, 0.0))
        for name in names
        if _differs(before.get(name, 0.0), after.get(name, 0.0))
    ]
    return tuple(sorted(changed, key=lambda part: -abs(part[2] - part[1])))


def count_changes(series: Series) -> tuple[CountChange, ...]:
    """Every per-call count (`COUNTED`) that differs from the previous commit measured
    with that count, in commit order."""
    found = []
    for key in COUNTED:
        previous = None
        for point in series.points:
            value = point.cell.counts.get(key) if point.cell.status == "ok" else None
            if value is None:
                continue
            if previous is not None and _differs(previous[1], value):
                breakdown = KEYS[key].breakdown
                parts = ()
                if breakdown is not None:
                    parts = _parts(
                        previous[0].cell.breakdowns.get(breakdown, {}),
                        point.cell.breakdowns.get(breakdown, {}),
                    )
                found.append(
                    CountChange(
                        point.position, previous[0].position, key, previous[1], value, parts
                    )
                )
            previous = (point, value)
    return tuple(sorted(found, key=lambda change: (change.position, COUNTED.index(change.key))))


def detect(
    timeline: Timeline, min_factor: float = MIN_FACTOR
) -> Mapping[str, tuple[SeriesChanges, ...]]:
    """Per cell, per series: its time fit and its count changes."""
    return {
        cell: tuple(
            SeriesChanges(series, time_fit(series, min_factor), count_changes(series))
            for series in all_series
        )
        for cell, all_series in timeline.cells.items()
    }
