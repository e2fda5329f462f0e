"""The intervals every figure is given: exact order-statistic intervals of a median (their
coverage, checked by simulation), and the bootstrap of a ratio of two independent medians
(resamples enough for its confidence, memory bounded)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from scanbench.api import InputError
from scanbench.statistics import (
    bootstrap_resamples,
    fewest_for_interval,
    median_bound_indices,
    median_interval,
    ratio_interval,
)


@pytest.mark.parametrize(("alternative", "confidence"), [("greater", 0.99), ("two-sided", 0.95)])
def test_the_median_interval_covers_at_least_its_confidence(alternative, confidence):
    """40 skewed values (lognormal, median 1), 4,000 times: the exact interval misses the
    true median no more often than 1 - confidence allows (binomial tolerance, 3 sigma)."""
    rng = np.random.default_rng(11)
    trials = 4000
    draws = rng.lognormal(0.0, 0.5, size=(trials, 40))
    misses = 0
    for values in draws:
        low, high = median_interval(values, confidence, alternative)
        misses += not low <= 1.0 <= high
    allowed = (1 - confidence) * trials
    assert misses <= allowed + 3 * np.sqrt(allowed)


@pytest.mark.parametrize(("confidence", "fewest"), [(0.95, 6), (0.99, 8), (0.5, 3)])
def test_the_fewest_values_for_an_interval_are_those_that_give_both_bounds(confidence, fewest):
    """2 x 0.5**6 = 3.1% <= 5% but 2 x 0.5**5 = 6.3% > 5%: six values at 95%."""
    assert fewest_for_interval(confidence) == fewest
    assert np.isfinite(median_interval(np.arange(fewest, dtype=float), confidence)).all()
    assert not np.isfinite(median_interval(np.arange(fewest - 1, dtype=float), confidence)).all()


def test_bounds_need_enough_values():
    assert median_bound_indices(6, 0.99, "greater")[0] == -1  # 0.5**6 > 1%: no bound
    assert median_bound_indices(7, 0.99, "greater") == (0, 7)
    assert median_interval([1.0, 2.0, 3.0], 0.95) == (-np.inf, np.inf)
    with pytest.raises(InputError, match="alternative must be one of"):
        median_interval([1.0, 2.0], 0.95, "above")
    with pytest.raises(InputError, match="confidence must be in"):
        median_interval([1.0, 2.0], 1.5)


def test_bootstrap_resamples_leave_fifty_in_each_tail():
    assert bootstrap_resamples(0.95) == 1999
    assert bootstrap_resamples(0.99) == 9999
    assert bootstrap_resamples(0.5) == 1999  # never fewer than the floor


def test_the_bootstrap_of_a_ratio_is_seeded_and_memory_bounded():
    """100,000 samples a side (the sample-count guard of a very fast cell): resampled in
    batches, on a capped subsample, in tens of MB, not the ~3 GB of a 2,000 x 100,000
    matrix a side."""
    rng = np.random.default_rng(5)
    slow = rng.lognormal(np.log(2e-3), 0.1, 100_000)
    fast = rng.lognormal(np.log(1e-3), 0.1, 100_000)
    tracemalloc.start()
    point, low, high = ratio_interval(slow, fast, 0.95, seed=3)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 200e6, f"peak {peak / 1e6:.0f} MB"
    assert low < point < high and low < 2.0 < high
    assert ratio_interval(slow, fast, 0.95, seed=3) == (point, low, high)
