"""Fitted costs: time per call = fixed + per_unit x units^k, from the points of a sweep.

The fit keeps an intercept: the fixed cost per call (dispatches, launches, transfers,
Python around the call) is exactly what tells a loop from ``vmap`` and ``scan``, and a
complexity fit without one (Google Benchmark #296) reads it as a flatter exponent.

- **Least squares on relative residuals**: a geometric sweep's times span decades, and
  plain least squares would fit the largest points only (where the per-unit cost shows)
  and leave the fixed cost to chance; each point is weighted by 1 / median^2, so every
  point counts by its relative error. Both coefficients are held >= 0 (a negative cost
  is no cost).
- **The exponent**: k = 1 unless the data say otherwise. With 4 or more points the fit is
  also made with k free (0.25 .. 3); it is kept when 1 lies outside the bootstrap
  interval of k, k differs from 1 by at least 0.1 *and* it cuts the RMS relative residual
  of the k = 1 fit by a third. With 3 points a free k would fit exactly: k = 1 is kept.
- **How well it fits**: the RMS of the relative residuals. A cost per unit that changes
  along the axis (a working set that leaves a cache level, a change of algorithm at some
  size) fits no single curve: above `ROUGH` the fit is said to be rough, and the
  crossovers drawn from it are checked by measurement like every other (see
  `scanbench.growth.crossover`). The fit is not made robust to a disturbed point: on 4
  to 8 points a robust loss takes the points past a cache cliff for outliers.
- **Intervals by bootstrap over each point's samples**: every resample draws each
  point's samples with replacement and takes their median, then fits again; the
  percentile interval of each coefficient over `RESAMPLES` resamples (seeded). They show
  the timing noise, not a wrong model: the RMS relative residual says how well the model
  fits at all.

Example:
    >>> fit, draws = fit_costs([1, 10, 100], [[2e-3], [2.9e-3], [12e-3]])
    >>> round(fit.fixed_s, 4), round(fit.per_unit_s, 5), fit.exponent
    (0.002, 0.0001, 1.0)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

RESAMPLES = 1000
EXPONENTS = np.union1d(np.geomspace(0.25, 3.0, 121), [1.0])  # free k's grid (steps of ~2%)
MIN_POINTS_FREE = 4
BETTER_BY = 1.5  # a free exponent must divide the RMS relative residual by this
ROUGH = 0.25  # a fit whose RMS relative residual is above this is rough
APART = 0.1  # and differ from 1 by at least this much
DRAWN_UP_TO = 1000  # samples per point resampled one by one; above: the rank (see below)


@dataclasses.dataclass(frozen=True)
class Fit:
    """A backend's fitted time per call, ``fixed_s + per_unit_s x units^exponent``.

    Attributes:
        exponent_fitted: False when k = 1 was kept (see the module doc).
        exponent_interval: the bootstrap interval of k fitted free (None with fewer than
            `MIN_POINTS_FREE` points); shown even when k = 1 is kept.
        rms: root mean square of the relative residuals (0.05: the fit is off by ~5%),
            above `ROUGH` the fit is rough.
        points: how many points it was fitted on.
    """

    fixed_s: float
    per_unit_s: float
    exponent: float
    fixed_interval: tuple[float, float]
    per_unit_interval: tuple[float, float]
    exponent_fitted: bool
    exponent_interval: tuple[float, float] | None
    rms: float
    points: int
    confidence: float

    @property
    def rough(self) -> bool:
        """The model fits the points only roughly (`ROUGH`)."""
        return self.rms > ROUGH

    def at(self, units: float) -> float:
        """The fitted time per call at ``units``."""
        return self.fixed_s + self.per_unit_s * units**self.exponent


@dataclasses.dataclass(frozen=True)
class Draws:
    """The bootstrap replicates of a `Fit` (not stored): one value per resample."""

    fixed_s: np.ndarray
    per_unit_s: np.ndarray
    exponent: np.ndarray

    def at(self, units: np.ndarray | float) -> np.ndarray:
        """(resamples, len(units)) times per call."""
        units = np.atleast_1d(np.asarray(units, float))
        return (
            self.fixed_s[:, None]
            + self.per_unit_s[:, None] * units[None, :] ** self.exponent[:, None]
        )


def _solve(times: np.ndarray, units: np.ndarray, exponents: np.ndarray):
    """Weighted (1 / t^2) least squares of t = a + b u^k, a, b >= 0, for every row of
    ``times`` (resamples x points) and every k of ``exponents``: (a, b, residual), each
    of shape (resamples, exponents)."""
    weights = 1.0 / times**2
    powers = units[None, :] ** exponents[:, None]  # (K, m)
    sw = weights.sum(axis=1)[:, None]
    st = (weights * times).sum(axis=1)[:, None]
    stt = (weights * times**2).sum(axis=1)[:, None]
    su = weights @ powers.T
    suu = weights @ (powers**2).T
    sut = (weights * times) @ powers.T
    det = sw * suu - su**2
    with np.errstate(divide="ignore", invalid="ignore"):
        a = (suu * st - su * sut) / det
        b = (sw * sut - su * st) / det
        only_b = sut / suu  # a held at 0
        only_a = np.broadcast_to(st / sw, a.shape)  # b held at 0
    a_negative, b_negative = a < 0, b < 0
    a, b = np.where(a_negative, 0.0, a), np.where(a_negative, only_b, b)
    a, b = np.where(b_negative, only_a, a), np.where(b_negative, 0.0, b)
    residual = stt - 2 * a * st - 2 * b * sut + a**2 * sw + 2 * a * b * su + b**2 * suu
    return a, b, np.maximum(residual, 0.0)


def _resampled_medians(
    samples: Sequence[np.ndarray], resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """(resamples, points): each point's samples drawn with replacement, their median.
    Above `DRAWN_UP_TO` samples the median's rank is drawn instead of the samples (the
    lower median of n values drawn from the sorted x is x_j with probability
    P(Binomial(n, j/n) >= (n+1)//2) - P(Binomial(n, (j-1)/n) >= (n+1)//2)), exact for odd n
    and off by half a rank for even n, at a cost that does not grow with the samples
    (a fast call is timed up to 100,000 times)."""
    # the binomial SF without importing scipy.stats (2 s of imports for every `scanbench run`)
    from scipy.special import bdtrc

    out = np.empty((resamples, len(samples)))
    for index, values in enumerate(samples):
        n = len(values)
        if n > DRAWN_UP_TO:
            ordered = np.sort(values)
            below = bdtrc((n + 1) // 2 - 1, n, np.arange(1, n + 1) / n)  # binom.sf
            ranks = np.minimum(np.searchsorted(below, rng.random(resamples)), n - 1)
            out[:, index] = ordered[ranks]
            continue
        drawn = rng.integers(0, n, size=(resamples, n))
        out[:, index] = np.median(values[drawn], axis=1)
    return out


def _interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def _rms(a: float, b: float, k: float, units: np.ndarray, times: np.ndarray) -> float:
    relative = (a + b * units**k - times) / times
    return float(np.sqrt(np.mean(relative**2)))


def fit_costs(
    units: Sequence[float],
    samples: Sequence[Sequence[float]],
    confidence: float = 0.95,
    seed: int = 0,
    resamples: int = RESAMPLES,
) -> tuple[Fit, Draws]:
    """The fit of the time per call against ``units`` (see the module doc).

    Args:
        units: each point's amount along the axis (at least 2 distinct values > 0).
        samples: each point's timed samples, in seconds (> 0).

    Raises:
        ValueError: fewer than 2 distinct points, or a sample <= 0.
    """
    xs = np.asarray(units, float)
    values = [np.asarray(s, float) for s in samples]
    if len(set(xs.tolist())) < 2 or len(values) != len(xs) or any(len(v) == 0 for v in values):
        raise ValueError("a fit needs samples at 2 or more distinct points")
    if any(np.any(v <= 0) for v in values) or np.any(xs <= 0):
        raise ValueError("times and units must be > 0")
    medians = np.array([np.median(v) for v in values])[None, :]
    drawn = _resampled_medians(values, resamples, np.random.default_rng(seed))
    one = np.array([1.0])
    a, b, _ = _solve(medians, xs, one)
    draws_a, draws_b, _ = _solve(drawn, xs, one)
    fixed, per_unit, exponent = float(a[0, 0]), float(b[0, 0]), 1.0
    rms = _rms(fixed, per_unit, 1.0, xs, medians[0])
    chosen = Draws(draws_a[:, 0], draws_b[:, 0], np.ones(resamples))
    free_interval, fitted = None, False
    if len(xs) >= MIN_POINTS_FREE:
        fa, fb, fr = _solve(medians, xs, EXPONENTS)
        best = int(np.argmin(fr[0]))
        ra, rb, rr = _solve(drawn, xs, EXPONENTS)
        rows, index = np.argmin(rr, axis=1), np.arange(resamples)
        free_interval = _interval(EXPONENTS[rows], confidence)
        free_rms = _rms(float(fa[0, best]), float(fb[0, best]), EXPONENTS[best], xs, medians[0])
        outside = not free_interval[0] <= 1.0 <= free_interval[1]
        apart = abs(EXPONENTS[best] - 1.0) >= APART
        if outside and apart and free_rms * BETTER_BY < rms:
            fitted = True
            fixed, per_unit = float(fa[0, best]), float(fb[0, best])
            exponent, rms = float(EXPONENTS[best]), free_rms
            chosen = Draws(ra[index, rows], rb[index, rows], EXPONENTS[rows])
    fit = Fit(
        fixed_s=fixed,
        per_unit_s=per_unit,
        exponent=exponent,
        fixed_interval=_interval(chosen.fixed_s, confidence),
        per_unit_interval=_interval(chosen.per_unit_s, confidence),
        exponent_fitted=fitted,
        exponent_interval=free_interval,
        rms=rms,
        points=len(xs),
        confidence=confidence,
    )
    return fit, chosen


def predict_call_s(units: Sequence[float], medians: Sequence[float], at: float) -> float | None:
    """The time one call is expected to take at ``at`` from the medians measured so far
    (for the budget): None with none; with one, proportional to the units above it (an
    upper bound of any fixed + per-unit line through it) and the same below; with more,
    the k = 1 fit of them."""
    if not len(units):
        return None
    if len(set(units)) < 2:
        return float(medians[0]) * max(1.0, at / float(units[0]))
    times = np.asarray(medians, float)[None, :]
    a, b, _ = _solve(times, np.asarray(units, float), np.array([1.0]))
    return float(a[0, 0] + b[0, 0] * at)
