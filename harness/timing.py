"""THE timing loop: every path that times a backend calls into this module.

The cell worker (`repeat`), the gate's baseline worker (`harness/gate/serve.py`: `sample`),
the pytest-benchmark tests (`call_and_wait` is the callable they time) and the profile
command all time a call as *call, then wait for the whole output pytree*
(``jax.block_until_ready``), so a backend that returns futures is still timed to the
moment its result is ready. Backends built by `scanbench.factories` also wait inside
``run``; this loop does not rely on it.

The clock and the "wait for the result" function are parameters so that the logic is
tested with a fake clock (as pyperf does) instead of wall-clock asserts. This module
imports nothing of scanbench but `scanbench.api` and `scanbench.statistics` (NumPy and
``scipy.special`` only), so `harness/gate/serve.py` can load the candidate's copy by path
inside a baseline checkout.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .api import InputError
from .statistics import median_interval

Clock = Callable[[], float]


def block_until_ready(output: Any) -> Any:
    """Wait until every leaf of ``output`` is computed: JAX arrays, and any leaf with a
    ``block_until_ready()`` method; NumPy and Python leaves pass through."""
    import jax

    return jax.block_until_ready(output)


def call_and_wait(
    run: Callable[[Any], Any], prepared: Any, block: Callable[[Any], Any] = block_until_ready
) -> Any:
    """``run(prepared)``, returned only once its whole output is ready. This is the unit
    every timing path measures (pytest-benchmark times exactly this callable)."""
    return block(run(prepared))


@dataclasses.dataclass(frozen=True)
class TimingConfig:
    """How long and how often to repeat a call (adaptive sampling, as pyperf/criterion).

    Sampling stops once the ``confidence`` interval of the median is narrower than
    ``target_width`` (relative to the median), or when the samples add up to
    ``max_time_s`` (the per-cell budget), whichever comes first; never before
    ``min_count`` samples and ``min_time_s`` seconds, unless one call alone exceeds the
    budget (then one sample: "n=1, no interval").

    Attributes:
        warmup: untimed calls after the first (checked) call; skipped when that first call
            took more than ``warm_threshold_s`` (it already warmed everything up).
        min_time_s: the samples add up to at least this (a floor for microsecond calls).
        min_count: at least this many samples (unless one call exceeds the budget).
        min_samples: at least this many samples whatever the budget (a call of seconds
            is otherwise timed once: "n=1, no interval"; ask for more to get one).
        max_count: never take more samples than this (a guard for very fast calls).
        confidence: level of the interval of the median.
        max_time_s: the per-cell time budget for the timed samples.
        target_width: stop once (high - low) / median of the interval is at most this.
        warm_threshold_s: a first call longer than this makes the warm-up call redundant.
    """

    warmup: int = 1
    min_time_s: float = 0.1
    min_count: int = 3
    min_samples: int = 1
    max_count: int = 100_000
    confidence: float = 0.95
    max_time_s: float = 3.0
    target_width: float = 0.02
    warm_threshold_s: float = 1.0

    def __post_init__(self) -> None:
        if self.warmup < 0:
            raise InputError(f"warmup must be >= 0, got {self.warmup}")
        if self.min_time_s < 0:
            raise InputError(f"min_time must be >= 0 seconds, got {self.min_time_s}")
        if self.min_count < 1:
            raise InputError(f"min_count must be >= 1, got {self.min_count}")
        if self.min_samples < 1:
            raise InputError(f"min_samples must be >= 1, got {self.min_samples}")
        if self.max_count < max(self.min_count, self.min_samples):
            raise InputError(
                f"max_count ({self.max_count}) must be >= min_count ({self.min_count}) "
                f"and min_samples ({self.min_samples})"
            )
        if not 0 < self.confidence < 1:
            raise InputError(f"confidence must be in (0, 1), got {self.confidence}")
        if not self.max_time_s > 0:
            raise InputError(f"max_time must be > 0 seconds, got {self.max_time_s}")
        if not self.target_width >= 0:
            raise InputError(f"target_width must be >= 0, got {self.target_width}")
        if self.warm_threshold_s < 0:
            raise InputError(f"warm_threshold must be >= 0 seconds, got {self.warm_threshold_s}")


class Stop(enum.StrEnum):
    """Why sampling stopped."""

    CONVERGED = "converged"  # the interval of the median reached the target width
    BUDGET = "budget"  # the samples used the per-cell time budget
    MAX_COUNT = "max_count"  # the sample-count guard
    SINGLE_CALL = "single call over budget"  # one call exceeds the budget: n=1


@dataclasses.dataclass(frozen=True)
class Timed:
    """The samples of `repeat` and how they were taken (stored with the record)."""

    samples: tuple[float, ...]
    output: Any
    stop: Stop
    rel_width: float | None  # achieved (high - low) / median; None: no interval (n too small)
    warmup_calls: int
    warmup_skipped: bool  # the first call took longer than warm_threshold_s

    def sampling(self, config: TimingConfig) -> dict[str, Any]:
        """What the record stores about the sampling (JSON)."""
        return {
            "stop": str(self.stop),
            "rel_width": self.rel_width,
            "target_width": config.target_width,
            "max_time_s": config.max_time_s,
            "confidence": config.confidence,
            "warmup_calls": self.warmup_calls,
            "warmup_skipped": self.warmup_skipped,
        }


def time_call(
    run: Callable[[Any], Any],
    prepared: Any,
    clock: Clock = time.perf_counter,
    block: Callable[[Any], Any] = block_until_ready,
    before: Callable[[], None] | None = None,
) -> tuple[Any, float]:
    """Call ``run(prepared)`` once, wait for the result, return (output, seconds).
    ``before()`` runs first, outside the timed region (a stateful function's setup,
    the eviction of the caches for a cold sample)."""
    if before is not None:
        before()
    start = clock()
    output = call_and_wait(run, prepared, block)
    return output, clock() - start


def relative_width(samples: Sequence[float], confidence: float) -> float | None:
    """(high - low) / median of the distribution-free interval of the median
    (`scanbench.statistics.median_interval`: binomial order statistics, as
    ``scipy.stats.quantile_test``); None when there are too few samples for an interval at
    this confidence (fewer than 6 at 95%). The record stores this same interval
    (`scanbench.statistics.summarize`), so the stop rule and the stored figure agree."""
    values = np.asarray(samples, dtype=np.float64)
    if len(values) < 2:
        return None
    median = float(np.median(values))
    low, high = median_interval(values, confidence)
    if median <= 0 or not (np.isfinite(low) and np.isfinite(high)):
        return None
    return (high - low) / median


def repeat(
    run: Callable[[Any], Any],
    prepared: Any,
    config: TimingConfig,
    clock: Clock = time.perf_counter,
    block: Callable[[Any], Any] = block_until_ready,
    first_call_s: float | None = None,
    on_sample: Callable[[int], None] | None = None,
    before: Callable[[], None] | None = None,
) -> Timed:
    """Warm up, then time calls until the median is known to ``target_width`` or the
    budget is spent (see `TimingConfig`).

    Each sample is one call including the wait for its result. ``first_call_s`` is the
    duration of the (checked, untimed) first call when known: above
    ``warm_threshold_s`` no warm-up call is made. A first timed call at or above
    ``max_time_s`` is the only sample; a slow *first* call does not decide that, since
    compilation may be all that made it slow (a Numba backend compiling on its first call
    with a cold cache: 4.4 s, then 4 ms calls). ``on_sample(count)`` is called after each
    sample, outside the timed region (progress); ``before()`` before every call, warm-up
    calls included, outside the timed region (see `time_call`). At least ``min_samples``
    samples are taken whatever the budget.

    Returns:
        The samples in seconds, the output of the last call (for a final check) and why
        sampling stopped.
    """
    skip_warmup = first_call_s is not None and first_call_s > config.warm_threshold_s
    warmups = 0 if skip_warmup else config.warmup
    output = None
    for _ in range(warmups):
        if before is not None:
            before()
        output = call_and_wait(run, prepared, block)
    samples: list[float] = []
    total = 0.0
    next_check = max(config.min_count, 2)
    width: float | None = None
    while True:
        output, seconds = time_call(run, prepared, clock, block, before)
        samples.append(seconds)
        total += seconds
        count = len(samples)
        if on_sample is not None:
            on_sample(count)
        if count >= config.max_count:
            stop = Stop.MAX_COUNT
            break
        if count < config.min_samples:  # asked for: taken whatever the budget
            continue
        if count == 1 and seconds >= config.max_time_s:
            stop = Stop.SINGLE_CALL
            break
        if count < config.min_count or total < config.min_time_s:
            continue
        if count >= next_check:  # geometric checkpoints: the interval costs O(n log n)
            width = relative_width(samples, config.confidence)
            next_check = count + max(1, count // 10)
            if width is not None and width <= config.target_width:
                stop = Stop.CONVERGED
                break
        if total >= config.max_time_s:
            stop = Stop.BUDGET
            break
    if stop is not Stop.CONVERGED:
        width = relative_width(samples, config.confidence)
    return Timed(tuple(samples), output, stop, width, warmups, skip_warmup)


def sample(
    run: Callable[[Any], Any],
    prepared: Any,
    count: int,
    clock: Clock = time.perf_counter,
    block: Callable[[Any], Any] = block_until_ready,
    before: Callable[[], None] | None = None,
) -> list[float]:
    """``count`` timed calls, each waiting for its result (a block of the gate's
    interleaved comparison); ``before()`` untimed before each (see `time_call`)."""
    return [time_call(run, prepared, clock, block, before)[1] for _ in range(count)]
