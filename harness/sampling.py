"""How a call is sampled: `TimingConfig`, the settings of the timing loop
(`scanbench.timing`). A plain record with no heavy imports: the command line builds it,
every run stores it (`scanbench.invocation`), the loop reads it.
"""

from __future__ import annotations

import dataclasses

from .api import InputError


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
