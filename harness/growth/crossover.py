"""Where two backends' fitted costs cross, how sure that is, and what a measurement there
said; where they do not cross, the trend of their ratio.

- **Crossovers** are searched from one step below the smallest point to one step above
  the largest (a step: the sweep's typical ratio between neighbouring points), on the
  fitted curves; the interval is the bootstrap percentile interval of the same crossing in
  the fits' resamples (`scanbench.growth.fit.Draws`, the crossing nearest to the point
  estimate in each), with the share of resamples that cross at all in that range.
- **Confirmation**: the crossing's first whole unit at or above it (``ceil``: "from
  population >= 6") is measured, both backends, as ordinary cells (up to `BEYOND` x the
  largest point measured); the measured ratio of
  their medians, with its bootstrap interval (`scanbench.statistics.ratio_interval`),
  says whether the backend predicted faster there is (`CONFIRMED`), is not told apart
  (`TIE`, what a point next to a crossing often is) or is slower (`CONTRADICTED`).
- **Trends**: for a pair that does not cross, the ratio of their medians at the points
  both measured: its range, and its first and last values.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..statistics import ratio_interval
from .fit import Draws, Fit

CONFIRMED, TIE, CONTRADICTED = "confirmed", "tie", "contradicted"
BEYOND = 2.0  # a confirmation point above this x the largest point measured is not measured
GRID = 512  # points of the crossing search, geometric over the searched range


@dataclasses.dataclass(frozen=True)
class Confirmation:
    """The measurement at a crossover's confirmation point.

    Attributes:
        ratio: median of the backend faster below / median of the one faster above, at
            ``at`` (> 1: the one predicted faster there is).
        interval: its bootstrap interval (None with fewer than 2 samples on a side).
        added: measured by a cell added for it (False: a point of the sweep itself).
    """

    at: int
    ratio: float
    interval: tuple[float, float] | None
    verdict: str
    added: bool

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Crossover:
    """Two backends' fits cross: ``below`` is faster below ``at``, ``above`` from it on.

    Attributes:
        interval: bootstrap interval of ``at`` over the resamples that cross (None when
            fewer than half of them do).
        crossing_share: the share of resamples whose fits cross in the searched range.
        inside: ``at`` lies within the measured points (else up to one step beyond).
        confirm_at: where it is measured: the first whole unit >= ``at``.
        predicted_ratio: fit(below) / fit(above) at ``confirm_at``.
        measurable: ``confirm_at`` is at most `BEYOND` x the largest point both measured
            (one step beyond a x10 sweep is 10x the work, and its memory: such a crossing
            is named, and measured only by a sweep that reaches it).
    """

    below: str
    above: str
    at: float
    interval: tuple[float, float] | None
    crossing_share: float
    inside: bool
    confirm_at: int
    predicted_ratio: float
    measurable: bool = True
    confirmation: Confirmation | None = None

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["confirmation"] = None if self.confirmation is None else self.confirmation.to_json()
        return out


@dataclasses.dataclass(frozen=True)
class Trend:
    """Two backends that do not cross: ``ahead`` is faster at most points, by
    ``behind``'s median / ``ahead``'s (from ``ratio_low`` to ``ratio_high``; ``ratio_first``
    at ``start``, ``ratio_last`` at ``stop``)."""

    ahead: str
    behind: str
    start: int
    stop: int
    ratio_low: float
    ratio_high: float
    ratio_first: float
    ratio_last: float
    points: int
    flips: tuple[tuple[int, int], ...] = ()  # neighbouring points between which the
    # measured order changes although the fits do not cross (rough fits)

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "flips": [list(pair) for pair in self.flips]}


def _roots(grid: np.ndarray, difference: np.ndarray) -> list[int]:
    """Indices i where the difference changes sign between grid[i] and grid[i + 1]."""
    sign = np.sign(difference)
    return [int(i) for i in np.flatnonzero(sign[:-1] * sign[1:] < 0)]


def _refine(fa: Fit, fb: Fit, low: float, high: float) -> float:
    """The crossing of two fits between ``low`` and ``high`` (bisection in log units)."""
    d_low = fa.at(low) - fb.at(low)
    for _ in range(60):
        middle = math.sqrt(low * high)
        d_middle = fa.at(middle) - fb.at(middle)
        if (d_middle < 0) == (d_low < 0):
            low, d_low = middle, d_middle
        else:
            high = middle
    return math.sqrt(low * high)


def _resampled_roots(
    grid: np.ndarray, difference: np.ndarray, near: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per resample (rows of ``difference``), the crossing nearest grid index ``near``
    (interpolated in log units) and whether it crosses at all."""
    sign = np.sign(difference)
    change = sign[:, :-1] * sign[:, 1:] < 0
    distance = np.where(change, np.abs(np.arange(change.shape[1]) - near), np.inf)
    index = np.argmin(distance, axis=1)
    crosses = np.isfinite(distance[np.arange(len(index)), index])
    rows = np.arange(len(index))
    d0, d1 = difference[rows, index], difference[rows, index + 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(crosses, d0 / (d0 - d1), 0.0)
    logs = np.log(grid)
    roots = np.exp(logs[index] + (logs[index + 1] - logs[index]) * share)
    return roots, crosses


def crossings(
    names: tuple[str, str],
    fits: tuple[Fit, Fit],
    draws: tuple[Draws, Draws],
    measured: tuple[float, float],
    searched: tuple[float, float],
    minimum: int = 1,
) -> list[Crossover]:
    """Every crossing of two fits within ``searched`` (low, high units), with its
    interval; ``measured`` is the (smallest, largest) point measured."""
    (name_a, name_b), (fa, fb), (da, db) = names, fits, draws
    grid = np.geomspace(searched[0], searched[1], GRID)
    difference = np.array([fa.at(x) - fb.at(x) for x in grid])
    resampled = da.at(grid) - db.at(grid)
    found = []
    for index in _roots(grid, difference):
        at = _refine(fa, fb, float(grid[index]), float(grid[index + 1]))
        roots, crosses = _resampled_roots(grid, resampled, index)
        share = float(np.mean(crosses))
        interval = None
        if share >= 0.5:
            tail = (1 - fa.confidence) / 2 * 100
            low, high = np.percentile(roots[crosses], [tail, 100 - tail])
            interval = (float(low), float(high))
        a_slower_above = difference[index + 1] > 0
        below, above = (name_a, name_b) if a_slower_above else (name_b, name_a)
        fit_below, fit_above = (fa, fb) if a_slower_above else (fb, fa)
        confirm_at = max(minimum, math.ceil(at - 1e-9))
        found.append(
            Crossover(
                below=below,
                above=above,
                at=at,
                interval=interval,
                crossing_share=share,
                inside=measured[0] <= at <= measured[1],
                confirm_at=confirm_at,
                predicted_ratio=fit_below.at(confirm_at) / fit_above.at(confirm_at),
                measurable=confirm_at <= BEYOND * measured[1],
            )
        )
    return found


def trend(
    names: tuple[str, str],
    medians: tuple[dict[int, float], dict[int, float]],
) -> Trend | None:
    """The ratio of two backends' medians at the points both measured (None with none)."""
    common = sorted(set(medians[0]) & set(medians[1]))
    if not common:
        return None
    ratios = np.array([medians[0][x] / medians[1][x] for x in common])  # a / b
    b_ahead = float(np.median(ratios)) >= 1.0
    ahead, behind = (names[1], names[0]) if b_ahead else names
    oriented = ratios if b_ahead else 1.0 / ratios
    flips = tuple(
        (common[i], common[i + 1])
        for i in range(len(common) - 1)
        if (oriented[i] - 1.0) * (oriented[i + 1] - 1.0) < 0
    )
    return Trend(
        ahead=ahead,
        behind=behind,
        start=common[0],
        stop=common[-1],
        ratio_low=float(oriented.min()),
        ratio_high=float(oriented.max()),
        ratio_first=float(oriented[0]),
        ratio_last=float(oriented[-1]),
        points=len(common),
        flips=flips,
    )


def confirm(
    crossover: Crossover,
    below_samples: Sequence[float],
    above_samples: Sequence[float],
    added: bool,
    confidence: float = 0.95,
    seed: int = 0,
) -> Confirmation:
    """What the measurement at ``crossover.confirm_at`` says (see the module doc)."""
    ratio, low, high = ratio_interval(below_samples, above_samples, confidence, seed)
    if math.isnan(low) or math.isnan(high):
        interval = None
        verdict = CONFIRMED if ratio > 1 else CONTRADICTED if ratio < 1 else TIE
    else:
        interval = (low, high)
        verdict = CONFIRMED if low > 1 else CONTRADICTED if high < 1 else TIE
    return Confirmation(crossover.confirm_at, ratio, interval, verdict, added)
