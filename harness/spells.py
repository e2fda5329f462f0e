"""Slow spells: a change of level inside one cell's samples, tested in the order taken.

A median summarizes a steady state. A machine that slows down for a while in the middle
of a cell (a VM whose core rate switches, another program taking a core) leaves the
samples at two levels, and the median of the mixture is then neither level; nothing else
in the samples says so. This module finds such a spell.

A **slow spell** is a run of consecutive samples

1. at least `MIN_FACTOR` times slower than the others (median of the run / median of the
   rest: the *size* of the shift);
2. at least `MIN_SHARE` of the samples long, and at least `MIN_LENGTH` samples, with as
   many left outside it (the *length*);
3. not explained by chance: its standardized rank sum (the Wilcoxon statistic of the run
   against the rest) is beyond what the largest such statistic, over every run of every
   allowed length, reaches in all but `ALPHA` of `PERMUTATIONS` random orders of the
   same samples. This is a scan statistic whose null distribution is found by
   permutation, so its false-alarm rate is at most ``ALPHA`` whatever the distribution
   of the samples, provided their order carries no information.

The permutation makes the test distribution-free: heavy tails, outliers and two-level
mixtures that alternate from call to call (a Python loop's garbage collection, a call
preempted for a time slice) do not raise it, since shuffling them changes nothing; only
an *order* in which the slow samples come together does. The size threshold keeps a
small drift of a long cell (its rank sum significant, its level a few percent off) from
being called a spell.

Of the runs that qualify, the one reported is the best fit of two levels (the run's and
the rest's) to the log samples in absolute deviations, the L1 fit of an "epidemic"
change: ranks alone would stretch the run over fast neighbours of above-median rank.
Fits tied to rounding (within ``COST_TIE``) go to the larger rank sum, then the longer
run, so the samples reversed give the same spell reversed.

Above `MAX_POINTS` samples the scan runs on the medians of consecutive blocks of
``ceil(n / MAX_POINTS)`` samples (the length and the factor then count in blocks; the
extent is given in samples). Fewer than ``2 * MIN_LENGTH`` points are not tested.

Pure functions of numbers; the permutations draw from a seed the caller chooses (the
cell's), so the same samples always get the same verdict.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

MIN_FACTOR = 1.25  # the run's median / the rest's median
MIN_SHARE = 0.10  # of the points (samples, or block medians above MAX_POINTS samples)
MIN_LENGTH = 5  # points, in the run and outside it
ALPHA = 0.01  # the test's false-alarm rate on samples whose order carries no information
PERMUTATIONS = 999  # random orders drawn for the null distribution (p resolves to 0.001)
MAX_POINTS = 100  # above this many samples, scan medians of consecutive blocks
COST_TIE = 1e-9  # relative: fits whose costs differ by less are tied (floating-point sums)


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the test calls a slow spell (see the module doc); the defaults are the rule."""

    min_factor: float = MIN_FACTOR
    min_share: float = MIN_SHARE
    min_length: int = MIN_LENGTH
    alpha: float = ALPHA
    permutations: int = PERMUTATIONS
    max_points: int = MAX_POINTS


@dataclasses.dataclass(frozen=True)
class SlowSpell:
    """A slow spell found in a cell's samples.

    Attributes:
        first: index of its first sample in the samples as taken (0-based).
        last: index of its last sample (inclusive).
        samples: how many samples the cell has.
        factor: median of the spell / median of the other samples (of the block medians
            when the samples were scanned in blocks).
        p_value: how often random orders of the same samples give a run at least as
            extreme (the scan's permutation p-value, at best 1 / (permutations + 1)).
        block: samples per scanned point (1: each sample is a point).
    """

    first: int
    last: int
    samples: int
    factor: float
    p_value: float
    block: int = 1

    @property
    def length(self) -> int:
        """Samples in the spell."""
        return self.last - self.first + 1

    @property
    def share(self) -> float:
        """The spell's share of the samples."""
        return self.length / self.samples

    def describe(self) -> str:
        """``slow spell: samples 41-68 of 120 (23%) at 2.50x the others' median`` (the
        samples counted from 1)."""
        return (
            f"slow spell: samples {self.first + 1}-{self.last + 1} of {self.samples} "
            f"({self.share:.0%}) at {self.factor:.2f}x the others' median "
            f"(p = {self.p_value:.3f})"
        )

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "share": self.share}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SlowSpell:
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


def _points(samples: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(points, index of each point's first sample, samples per block): the samples
    themselves up to ``max_points``, else the medians of consecutive blocks."""
    block = max(1, math.ceil(len(samples) / max_points))
    starts = np.arange(0, len(samples), block)
    if block == 1:
        return samples, starts, 1
    medians = np.array([np.median(samples[i : i + block]) for i in starts])
    return medians, starts, block


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties given their average rank."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    ranks = np.empty(len(values))
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], len(values)]
    for start, end in zip(starts, ends, strict=True):
        ranks[order[start:end]] = (start + end + 1) / 2
    return ranks


def _window_sums(ranks: np.ndarray, lengths: range) -> list[tuple[int, np.ndarray, float]]:
    """For each run length ``w`` in ``lengths``: the rank sum of the run starting at every
    position (rows), for each order of the ranks (the columns of ``ranks``: the slices
    are then contiguous), and its null mean and standard deviation: (w, sums, spread),
    the standardized sum being (sum - w * mean rank) / spread."""
    count = ranks.shape[0]
    variance = ranks[:, 0].var()
    sums = np.concatenate([np.zeros((1, ranks.shape[1])), np.cumsum(ranks, axis=0)])
    return [
        (w, sums[w:] - sums[:-w], math.sqrt(w * (count - w) / (count - 1) * variance))
        for w in lengths
    ]


@functools.lru_cache(maxsize=32)
def _null(ranks: tuple[float, ...], lengths: range, seed: int, permutations: int) -> np.ndarray:
    """The sorted largest standardized rank sum of each of ``permutations`` random orders
    of ``ranks`` (cached: ranks without ties are 1..n, the same for every cell of n
    points, and the cells of a run share its seed)."""
    rng = np.random.default_rng(seed)
    shuffled = rng.permuted(np.tile(np.asarray(ranks), (permutations, 1)), axis=1).T.copy()
    mean = float(np.mean(ranks))
    largest = np.full(permutations, -np.inf)
    for w, sums, spread in _window_sums(shuffled, lengths):
        np.maximum(largest, (sums.max(axis=0) - w * mean) / spread, out=largest)
    return np.sort(largest)


@dataclasses.dataclass(frozen=True)
class _Run:
    """A qualifying run of points: its position, size, fit and standardized rank sum."""

    cost: float  # sum of absolute log deviations from the two levels (the L1 fit)
    start: int
    length: int
    factor: float
    z: float


def _qualifying(
    points: np.ndarray, w: int, z: np.ndarray, critical: float, min_factor: float
) -> list[_Run]:
    """The runs of ``w`` points whose standardized rank sum ``z`` (by start) exceeds
    ``critical`` and whose median is at least ``min_factor`` times the other points'."""
    starts = np.flatnonzero(z > critical)
    if len(starts) == 0:
        return []
    count = len(points)
    inside = starts[:, np.newaxis] + np.arange(w)[np.newaxis, :]  # indices, one run a row
    others = np.arange(count - w)[np.newaxis, :]
    outside = others + (others >= starts[:, np.newaxis]) * w
    level_in = np.median(points[inside], axis=1)
    level_out = np.median(points[outside], axis=1)
    keep = (level_out > 0) & (level_in >= min_factor * level_out)
    logs = np.log(np.maximum(points, np.finfo(float).tiny))
    low = np.finfo(float).tiny
    cost = np.abs(logs[inside] - np.log(np.maximum(level_in, low))[:, np.newaxis]).sum(axis=1)
    cost += np.abs(logs[outside] - np.log(np.maximum(level_out, low))[:, np.newaxis]).sum(axis=1)
    return [
        _Run(
            float(cost[i]),
            int(starts[i]),
            w,
            float(level_in[i] / level_out[i]),
            float(z[starts[i]]),
        )
        for i in np.flatnonzero(keep)
    ]


def _trimmed(points: np.ndarray, start: int, end: int, factor: float) -> tuple[int, int, float]:
    """The run ``points[start:end]`` without the points at its ends that lie nearer the
    other points' level than its own (a run's median needs only half of its points slow,
    so a spell shorter than the shortest run is found inside a longer one), and the
    factor of what is left."""
    rest = float(np.median(np.concatenate([points[:start], points[end:]])))
    middle = rest * math.sqrt(factor)  # halfway between the two levels, in log
    while end - start > 1 and points[start] < middle:
        start += 1
    while end - start > 1 and points[end - 1] < middle:
        end -= 1
    rest = float(np.median(np.concatenate([points[:start], points[end:]])))
    return start, end, float(np.median(points[start:end])) / rest


def find_spell(
    samples: Sequence[float], seed: int, settings: Settings = Settings()
) -> SlowSpell | None:
    """The slow spell in ``samples`` (in the order taken), or None: none found, or too
    few samples to test (see the module doc for the rule).

    Example:
        >>> steady = [1.0, 1.1, 0.9, 1.05, 0.95] * 8
        >>> find_spell(steady, seed=0) is None
        True
        >>> spell = find_spell(steady[:15] + [1.6] * 10 + steady[:15], seed=0)
        >>> (spell.first, spell.last, round(spell.factor, 2))
        (15, 24, 1.6)
    """
    values = np.asarray(samples, dtype=float)
    if len(values) == 0 or not np.isfinite(values).all() or (values < 0).any():
        return None
    points, starts, block = _points(values, settings.max_points)
    count = len(points)
    shortest = max(settings.min_length, math.ceil(settings.min_share * count))
    beyond = math.floor(settings.alpha * (settings.permutations + 1)) - 1
    if count < 2 * shortest or beyond < 0:
        return None
    ranks = _ranks(points)
    if ranks.var() == 0:
        return None
    lengths = range(shortest, count - shortest + 1)
    observed = [
        (sums[:, 0] - w * ranks.mean()) / spread
        for w, sums, spread in _window_sums(ranks[:, np.newaxis], lengths)
    ]
    null = _null(tuple(np.sort(ranks)), lengths, seed, settings.permutations)
    critical = null[len(null) - beyond - 1]  # a z beyond it has a p-value within alpha
    runs = [
        run
        for w, z in zip(lengths, observed, strict=True)
        for run in _qualifying(points, w, z, critical, settings.min_factor)
    ]
    if not runs:
        return None
    # the cheapest fit; runs whose costs differ by rounding alone (the same sums taken in
    # another order, as in the samples reversed) are tied, and the larger z then wins
    cheapest = min(run.cost for run in runs)
    tied = [run for run in runs if run.cost <= cheapest + COST_TIE * max(1.0, cheapest)]
    best = max(tied, key=lambda run: (run.z, run.length))
    first, end, factor = _trimmed(points, best.start, best.start + best.length, best.factor)
    last = int(starts[end]) - 1 if end < count else len(values) - 1
    exceeding = int(len(null) - np.searchsorted(null, best.z, side="left"))
    p_value = (1 + exceeding) / (settings.permutations + 1)
    return SlowSpell(int(starts[first]), last, len(values), factor, p_value, block)
