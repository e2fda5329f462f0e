"""THE timing loop: every path that times a backend calls into this module.

The cell worker (`repeat`), the gate's baseline worker (`scanbench.gate.serve`: `sample`),
the pytest-benchmark tests (`call_and_wait` is the callable they time) and the profile
command all time a call as *call, then wait for the whole output pytree*
(``jax.block_until_ready``), so a backend that returns futures is still timed to the
moment its result is ready. Backends built by `scanbench.factories` also wait inside
``run``; this loop does not rely on it.

The clock and the "wait for the result" function are parameters so that the logic is
tested with a fake clock (as pyperf does) instead of wall-clock asserts. This module
imports nothing of scanbench but `scanbench.api`, `scanbench.sampling` (its settings) and
`scanbench.statistics` (NumPy and ``scipy.special`` only), so `scanbench.gate.serve` can
load the candidate's copy by path inside a baseline checkout.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .sampling import TimingConfig
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
    output, start, end = call_span(run, prepared, clock, block, before)
    return output, end - start


def call_span(
    run: Callable[[Any], Any],
    prepared: Any,
    clock: Clock = time.perf_counter,
    block: Callable[[Any], Any] = block_until_ready,
    before: Callable[[], None] | None = None,
) -> tuple[Any, float, float]:
    """`time_call`, returning (output, start, end) on ``clock``: the exact bounds of the
    timed region, for leaving out what happened within it and nothing outside it."""
    if before is not None:
        before()
    start = clock()
    output = call_and_wait(run, prepared, block)
    return output, start, clock()


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
