"""Steady-state timing: warm-up, calibrated repeats, every sample kept, robust statistics.

The clock and the "wait for the result" function are parameters so that the logic is
tested with a fake clock (as pyperf does) instead of wall-clock asserts.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from harness.api import InputError

Clock = Callable[[], float]


def block_until_ready(output: Any) -> Any:
    """Wait until every JAX array in ``output`` is computed (NumPy leaves pass through)."""
    import jax

    return jax.block_until_ready(output)


@dataclasses.dataclass(frozen=True)
class TimingConfig:
    """How long and how often to repeat a call.

    Attributes:
        warmup: untimed calls after the first (checked) call.
        min_time_s: keep repeating until the samples add up to at least this.
        min_count: and until there are at least this many samples.
        max_count: never take more samples than this (a guard for very fast calls).
        confidence: level of the bootstrap interval of the median.
    """

    warmup: int = 1
    min_time_s: float = 1.0
    min_count: int = 5
    max_count: int = 100_000
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if self.warmup < 0:
            raise InputError(f"warmup must be >= 0, got {self.warmup}")
        if self.min_time_s < 0:
            raise InputError(f"min_time must be >= 0 seconds, got {self.min_time_s}")
        if self.min_count < 1:
            raise InputError(f"min_count must be >= 1, got {self.min_count}")
        if self.max_count < self.min_count:
            raise InputError(
                f"max_count ({self.max_count}) must be >= min_count ({self.min_count})"
            )
        if not 0 < self.confidence < 1:
            raise InputError(f"confidence must be in (0, 1), got {self.confidence}")


def time_call(
    run: Callable[[Any], Any],
    prepared: Any,
    clock: Clock = time.perf_counter,
    block: Callable[[Any], Any] = block_until_ready,
) -> tuple[Any, float]:
    """Call ``run(prepared)`` once, wait for the result, return (output, seconds)."""
    start = clock()
    output = block(run(prepared))
    return output, clock() - start


def repeat(
    run: Callable[[Any], Any],
    prepared: Any,
    config: TimingConfig,
    clock: Clock = time.perf_counter,
    block: Callable[[Any], Any] = block_until_ready,
) -> tuple[tuple[float, ...], Any]:
    """Warm up, then time calls until both ``min_time_s`` and ``min_count`` are reached.

    Each sample is one call including the wait for its result.

    Returns:
        The samples in seconds and the output of the last call (for a final check).
    """
    output = None
    for _ in range(config.warmup):
        output = block(run(prepared))
    samples: list[float] = []
    total = 0.0
    while len(samples) < config.max_count and (
        len(samples) < config.min_count or total < config.min_time_s
    ):
        output, seconds = time_call(run, prepared, clock, block)
        samples.append(seconds)
        total += seconds
    return tuple(samples), output


def median_interval(
    values: Sequence[float], confidence: float, seed: int, alternative: str = "two-sided"
) -> tuple[float, float]:
    """Bootstrap interval of the median (``scipy.stats.bootstrap``, percentile method,
    seeded); ``alternative="greater"`` gives a one-sided lower bound (high = inf). Needs
    at least 2 values; identical values give a zero-width interval."""
    values = np.asarray(values, dtype=np.float64)
    if np.ptp(values) == 0:
        median = float(values[0])
        return median, median
    result = scipy_stats.bootstrap(
        (values,),
        np.median,
        confidence_level=confidence,
        n_resamples=2000,
        method="percentile",
        alternative=alternative,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def summarize(
    samples: Sequence[float], confidence: float = 0.95, seed: int = 0
) -> dict[str, float | int | None]:
    """Median, IQR, min, mean, stddev and a bootstrap CI of the median.

    The interval uses ``scipy.stats.bootstrap`` (percentile method, seeded); it is
    ``None`` with fewer than 2 samples.
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
