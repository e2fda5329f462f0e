"""Robust statistics of timing samples: summaries, bootstrap intervals of the median and
of the ratio of two medians (``scipy.stats.bootstrap``, percentile method, seeded).

Pure functions over numbers; used by the cell worker (summaries), the gate (decisions)
and the reports (ties), so that all three agree on what an interval is.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats as scipy_stats

from .api import InputError

RESAMPLES = 2000


def median_interval(
    values: Sequence[float], confidence: float, seed: int, alternative: str = "two-sided"
) -> tuple[float, float]:
    """Bootstrap interval of the median; ``alternative="greater"`` gives a one-sided lower
    bound (high = inf). Needs at least 2 values; identical values give a zero-width
    interval."""
    values = np.asarray(values, dtype=np.float64)
    if np.ptp(values) == 0:
        median = float(values[0])
        return median, median
    result = scipy_stats.bootstrap(
        (values,),
        np.median,
        confidence_level=confidence,
        n_resamples=RESAMPLES,
        method="percentile",
        alternative=alternative,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def ratio_interval(
    numerator: Sequence[float], denominator: Sequence[float], confidence: float, seed: int
) -> tuple[float, float, float]:
    """median(numerator) / median(denominator) and its bootstrap interval (the two
    samples resampled independently); NaN bounds with fewer than 2 samples on a side."""
    top, bottom = np.asarray(numerator, float), np.asarray(denominator, float)
    point = float(np.median(top) / np.median(bottom))
    if len(top) < 2 or len(bottom) < 2:
        return point, float("nan"), float("nan")
    if np.ptp(top) == 0 and np.ptp(bottom) == 0:
        return point, point, point

    def statistic(a, b, axis):
        return np.median(a, axis=axis) / np.median(b, axis=axis)

    result = scipy_stats.bootstrap(
        (top, bottom),
        statistic,
        confidence_level=confidence,
        n_resamples=RESAMPLES,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return point, float(result.confidence_interval.low), float(result.confidence_interval.high)


UNSCALED_STATS = ("count", "confidence")


def summarize_scaled(
    samples: Sequence[float], confidence: float, seed: int, factor: float = 1.0
) -> dict[str, float | int | None]:
    """`summarize`, with every time x ``factor`` (samples of part of the work, see
    `scanbench.execution.worker`: the statistics stand for the whole call)."""
    stats = summarize(samples, confidence, seed=seed)
    if factor == 1.0:
        return stats
    return {
        key: value if key in UNSCALED_STATS or value is None else value * factor
        for key, value in stats.items()
    }


def summarize(
    samples: Sequence[float], confidence: float = 0.95, seed: int = 0
) -> dict[str, float | int | None]:
    """Median, IQR, min, mean, stddev and a bootstrap CI of the median.

    The interval is ``None`` with fewer than 2 samples.
    """
    if len(samples) == 0:
        raise InputError("cannot summarize an empty list of samples")
    values = np.asarray(samples, dtype=np.float64)
    q25, median, q75 = np.percentile(values, [25, 50, 75])
    ci_low = ci_high = None
    if len(values) >= 2:
        ci_low, ci_high = median_interval(values, confidence, seed)
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
        "ci_low": ci_low,
        "ci_high": ci_high,
        "confidence": confidence,
        "total": float(values.sum()),
    }
