"""THE timing loop: every path that times a backend calls into this module.

The cell worker (`repeat`), the gate's baseline worker (`harness/serve.py`: `sample`),
the pytest-benchmark tests (`call_and_wait` is the callable they time) and the profile
command all time a call as *call, then wait for the whole output pytree*
(``jax.block_until_ready``), so a backend that returns futures is still timed to the
moment its result is ready. Backends built by `harness.factories` also wait inside
``run``; this loop does not rely on it.

The clock and the "wait for the result" function are parameters so that the logic is
tested with a fake clock (as pyperf does) instead of wall-clock asserts. This module
imports nothing of scanbench but `harness.api`, so `harness/serve.py` can load the
candidate's copy by path inside a baseline checkout.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from harness.api import InputError

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
    output = call_and_wait(run, prepared, block)
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
        output = call_and_wait(run, prepared, block)
    samples: list[float] = []
    total = 0.0
    while len(samples) < config.max_count and (
        len(samples) < config.min_count or total < config.min_time_s
    ):
        output, seconds = time_call(run, prepared, clock, block)
        samples.append(seconds)
        total += seconds
    return tuple(samples), output


def sample(
    run: Callable[[Any], Any],
    prepared: Any,
    count: int,
    clock: Clock = time.perf_counter,
    block: Callable[[Any], Any] = block_until_ready,
) -> list[float]:
    """``count`` timed calls, each waiting for its result (a block of the gate's
    interleaved comparison)."""
    return [time_call(run, prepared, clock, block)[1] for _ in range(count)]
