"""Robust statistics of timing samples: summaries, and the intervals every figure is
given, each the exact one where an exact one exists.

- **The median of one set of values** (a cell's samples; the per-block ratios of an
  interleaved comparison) gets the distribution-free interval of binomial order
  statistics: the sign-test interval, the one ``scipy.stats.quantile_test`` gives. For
  independent values of any continuous distribution its coverage is at least the
  confidence asked for, exactly, with no resampling and no assumption on the shape
  (`median_interval`). The sampling stop rule (`scanbench.timing`), the stored record
  (``ci_low``, ``ci_high``) and every time decision of the gate use this one interval.
- **The ratio of the medians of two independent sets** (two cells of one run: ties in
  the reports, the growth crossover) has no exact distribution-free interval of useful
  width: a percentile bootstrap (`ratio_interval`), with enough resamples that each tail
  holds 50 of them (`bootstrap_resamples`), in batches of bounded memory, on at most
  `BOOTSTRAP_CAP` samples per side (a seeded subsample: its interval is wider, never
  narrower, than the whole set's). The two sides are resampled independently, so each
  side's resampled medians are drawn once (`bootstrap_medians`) and any pair's interval
  is the percentiles of their quotients (`ratio_interval_of`): a report of N rows draws N
  sets of medians, not one bootstrap per pair it compares.

Pure functions over numbers. This module imports only NumPy and ``scipy.special``: the
timing loop imports it in every cell worker, where ``scipy.stats`` would cost about 0.9 s
of imports. The bootstrap is NumPy's (``scipy.stats.bootstrap`` resamples per call, and a
report asks for many pairs of the same sides).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from .api import InputError

ALTERNATIVES = ("two-sided", "greater", "less")
TAIL_RESAMPLES = 50  # bootstrap resamples beyond each bound of a percentile interval
MIN_RESAMPLES = 1999
BOOTSTRAP_CAP = 2000  # samples per side the bootstrap resamples (a seeded subsample beyond)
BATCH_ELEMENTS = 1 << 22  # resampled values held at once (32 MB of float64 per batch)


def _check(confidence: float, alternative: str) -> None:
    if not 0 < confidence < 1:
        raise InputError(f"confidence must be in (0, 1), got {confidence}")
    if alternative not in ALTERNATIVES:
        raise InputError(
            f"alternative must be one of {', '.join(ALTERNATIVES)}, got {alternative!r}"
        )


@functools.lru_cache(maxsize=4096)
def median_bound_indices(
    count: int, confidence: float, alternative: str = "two-sided"
) -> tuple[int, int]:
    """0-based indices into ``count`` sorted values of the distribution-free bounds of
    their median (binomial order statistics), exactly as ``scipy.stats.quantile_test(x,
    p=0.5, alternative=...).confidence_interval(confidence)`` picks them (tested equal for
    1 to 1000 values). A low index below 0, or a high one at or above ``count``, means
    no bound: too few values for one at this confidence (a two-sided 95% interval needs 6,
    a one-sided 99% bound 7).

    ``alternative``: ``"two-sided"`` (each bound misses with probability at most
    (1 - confidence) / 2), ``"greater"`` (a lower bound only, missing with probability at
    most 1 - confidence) or ``"less"`` (an upper bound only).

    Why it holds: the number of values below the median is Binomial(count, 1/2), so the
    k-th smallest value exceeds the median with probability P(B <= k - 1)."""
    _check(confidence, alternative)
    from scipy.special import bdtr, bdtrc  # the binomial CDF and SF: no scipy.stats import

    alpha = 1.0 - confidence if alternative != "two-sided" else (1.0 - confidence) / 2.0
    k = np.arange(count + 1)
    low = int(np.searchsorted(bdtr(k, count, 0.5), alpha, side="left"))  # binom.ppf(alpha)
    beyond = bdtrc(k, count, 0.5) <= alpha  # binom.isf(alpha): first k with SF <= alpha
    high = int(np.argmax(beyond)) if beyond.any() else count + 1
    if alternative == "greater":
        high = count
    elif alternative == "less":
        low = 0
    return low - 1, high


def fewest_for_interval(confidence: float) -> int:
    """The fewest values whose median has a two-sided distribution-free interval at
    ``confidence`` (`median_bound_indices`): 6 at 95%, 8 at 99%."""
    count = 1
    while True:
        low, high = median_bound_indices(count, confidence)
        if low >= 0 and high < count:
            return count
        count += 1


def median_interval(
    values: Sequence[float], confidence: float, alternative: str = "two-sided"
) -> tuple[float, float]:
    """The distribution-free interval of the median of ``values`` (order statistics, see
    `median_bound_indices`): ``(low, high)``, with ``-inf`` / ``inf`` for a bound that
    too few values cannot give (and for the side ``alternative`` leaves open)."""
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    low, high = median_bound_indices(len(ordered), confidence, alternative)
    lower = float(ordered[low]) if 0 <= low < len(ordered) else -math.inf
    upper = float(ordered[high]) if 0 <= high < len(ordered) else math.inf
    return lower, upper


def bootstrap_resamples(confidence: float) -> int:
    """Resamples for a percentile bootstrap interval at ``confidence``: enough that
    `TAIL_RESAMPLES` lie beyond each bound (B + 1 a multiple of the tail's share, as
    Davison and Hinkley advise), and at least `MIN_RESAMPLES`: 1,999 at 95%, 9,999 at 99%.
    Fewer leave a bound to a handful of resamples (2,000 at 99% put 10 in each tail)."""
    _check(confidence, "two-sided")
    tail = (1.0 - confidence) / 2.0
    return max(MIN_RESAMPLES, math.ceil(TAIL_RESAMPLES / tail - 1e-9) - 1)


def _capped(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """At most `BOOTSTRAP_CAP` of ``values``: a seeded subsample without replacement."""
    if len(values) <= BOOTSTRAP_CAP:
        return values
    return rng.choice(values, size=BOOTSTRAP_CAP, replace=False)


def bootstrap_medians(values: Sequence[float], confidence: float, seed: int) -> np.ndarray:
    """The medians of `bootstrap_resamples` resamples (with replacement) of ``values``,
    capped at `BOOTSTRAP_CAP` (a seeded subsample), drawn in batches of at most
    `BATCH_ELEMENTS` values; empty with fewer than 2 values."""
    data = np.asarray(values, float)
    if len(data) < 2:
        return np.empty(0)
    rng = np.random.default_rng(seed)
    data = _capped(data, rng)
    resamples, size = bootstrap_resamples(confidence), len(data)
    batch = max(1, BATCH_ELEMENTS // size)
    medians = np.empty(resamples)
    for start in range(0, resamples, batch):
        stop = min(resamples, start + batch)
        medians[start:stop] = np.median(data[rng.integers(0, size, (stop - start, size))], axis=1)
    return medians


def ratio_interval_of(
    point: float, top: np.ndarray, bottom: np.ndarray, confidence: float
) -> tuple[float, float, float]:
    """``point`` and the two-sided percentile interval of ``top / bottom``, two sides'
    `bootstrap_medians` drawn independently; NaN bounds where a side has none."""
    if len(top) == 0 or len(bottom) == 0:
        return point, float("nan"), float("nan")
    tail = (1.0 - confidence) / 2.0
    low, high = np.percentile(top / bottom, [100.0 * tail, 100.0 * (1.0 - tail)])
    return point, float(low), float(high)


def ratio_interval(
    numerator: Sequence[float], denominator: Sequence[float], confidence: float, seed: int
) -> tuple[float, float, float]:
    """median(numerator) / median(denominator) and its two-sided percentile bootstrap
    interval: the two independent samples resampled independently (`bootstrap_medians`,
    seeds ``seed`` and ``seed + 1``); NaN bounds with fewer than 2 samples on a side.

    The bootstrap is kept here because no exact distribution-free interval of a ratio of
    two independent medians exists short of a conservative product of the two exact
    intervals, about 1.6x wider."""
    top, bottom = np.asarray(numerator, float), np.asarray(denominator, float)
    point = float(np.median(top) / np.median(bottom))
    if len(top) < 2 or len(bottom) < 2:
        return point, float("nan"), float("nan")
    if np.ptp(top) == 0 and np.ptp(bottom) == 0:
        return point, point, point
    return ratio_interval_of(
        point,
        bootstrap_medians(top, confidence, seed),
        bootstrap_medians(bottom, confidence, seed + 1),
        confidence,
    )


UNSCALED_STATS = ("count", "confidence")


def summarize_scaled(
    samples: Sequence[float], confidence: float, factor: float = 1.0
) -> dict[str, float | int | None]:
    """`summarize`, with every time x ``factor`` (samples of part of the work, see
    `scanbench.execution.worker`: the statistics stand for the whole call)."""
    stats = summarize(samples, confidence)
    if factor == 1.0:
        return stats
    return {
        key: value if key in UNSCALED_STATS or value is None else value * factor
        for key, value in stats.items()
    }


def summarize(samples: Sequence[float], confidence: float = 0.95) -> dict[str, float | int | None]:
    """Median, IQR, min, mean, stddev and the distribution-free interval of the median
    (`median_interval`, two-sided: the interval the sampling stop rule measured).

    ``ci_low`` and ``ci_high`` are ``None`` when there are too few samples for an
    interval at ``confidence`` (fewer than 6 at 95%).
    """
    if len(samples) == 0:
        raise InputError("cannot summarize an empty list of samples")
    values = np.asarray(samples, dtype=np.float64)
    q25, median, q75 = np.percentile(values, [25, 50, 75])
    low, high = median_interval(values, confidence)
    bounded = math.isfinite(low) and math.isfinite(high)
    return {
        "count": len(values),
        "median": float(median),
        "q25": float(q25),
        "q75": float(q75),
        "iqr": float(q75 - q25),
        "min": float(values.min()),
        "max": float(values.max()),
        "mean": float(values.mean()),
        "stddev": float(values.std(ddof=1)) if len(values) >= 2 else 0.0,
        "ci_low": low if bounded else None,
        "ci_high": high if bounded else None,
        "confidence": confidence,
        "total": float(values.sum()),
    }
