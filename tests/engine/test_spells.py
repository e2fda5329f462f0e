"""The slow-spell test (`scanbench.spells`): known answers on synthetic sequences, recorded
series, and a spell planted in a backend, timed by the real timing loop."""

from __future__ import annotations

import doctest
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scanbench import spells
from scanbench.execution.worker import Target, measure
from scanbench.spells import MIN_FACTOR, Settings, SlowSpell, find_spell
from tests.support.paths import REPO_ROOT
from tests.support.planted_spell import found_where_planted
from tests.support.scenario_files import spells as planted_scenario


def steady(n: int, seed: int, noise: float = 0.03) -> np.ndarray:
    """``n`` samples around 1 ms, log-normal with ``noise``."""
    return 1e-3 * np.exp(np.random.default_rng(seed).normal(0.0, noise, n))


def with_spell(samples: np.ndarray, first: int, length: int, factor: float) -> np.ndarray:
    slowed = samples.copy()
    slowed[first : first + length] *= factor
    return slowed


def test_the_docstring_examples_hold():
    assert doctest.testmod(spells).failed == 0


@pytest.mark.parametrize("n", [10, 40, 100, 1000])
def test_steady_samples_have_no_spell(n):
    assert find_spell(steady(n, seed=n), seed=0) is None


def test_noise_without_order_is_not_a_spell():
    rng = np.random.default_rng(7)
    # heavy tails: 1 in 10 calls 1-6x slower, at random
    tails = steady(200, 1) * np.where(rng.random(200) < 0.1, rng.uniform(1, 6, 200), 1.0)
    # two levels alternating (a call preempted for a time slice: 2 ms or 6 ms)
    alternating = np.where(np.arange(120) % 2 == 0, 2e-3, 6e-3) * steady(120, 2, 0.01) / 1e-3
    # two levels at random, a third of the calls slow
    mixed = np.where(rng.random(150) < 1 / 3, 3.0, 1.0) * steady(150, 3)
    for samples in (tails, alternating, mixed):
        assert find_spell(samples, seed=0) is None


@pytest.mark.parametrize(
    ("n", "first", "length", "factor"),
    [
        (40, 12, 10, 1.5),  # the calibration's spell: 1.5x over a quarter, in the middle
        (40, 0, 10, 1.5),  # at the start (a warm-up that was not enough)
        (40, 30, 10, 2.0),  # at the end
        (60, 10, 40, 2.5),  # most of the samples: the fast ones are the exception
        (100, 50, 10, 3.0),  # the shortest spell: 10% of the samples
    ],
)
def test_a_spell_is_found_with_its_extent_and_size(n, first, length, factor):
    spell = find_spell(with_spell(steady(n, seed=first), first, length, factor), seed=0)
    assert spell is not None
    assert (spell.first, spell.last, spell.samples) == (first, first + length - 1, n)
    assert spell.factor == pytest.approx(factor, rel=0.08)
    assert spell.share == pytest.approx(length / n)
    assert spell.p_value <= spells.ALPHA and spell.block == 1


def test_a_shift_below_the_size_is_not_a_spell():
    samples = with_spell(steady(100, seed=4, noise=0.01), 30, 40, 1.15)
    assert find_spell(samples, seed=0) is None
    found = find_spell(samples, seed=0, settings=Settings(min_factor=1.1))
    assert found is not None and (found.first, found.last) == (30, 69)


def test_a_spell_is_found_from_over_half_the_length_with_its_own_extent():
    """A run of at least 10 of 100 samples is scanned; its median is slow once half of it
    is, so a spell of 5 to 9 samples is found, its extent trimmed to it."""
    for length in (5, 9):
        found = find_spell(with_spell(steady(100, seed=5), 50, length, 3.0), seed=0)
        assert found is not None and (found.first, found.last) == (50, 49 + length)
        assert found.factor == pytest.approx(3.0, rel=0.05)
    assert find_spell(with_spell(steady(100, seed=5), 50, 4, 3.0), seed=0) is None
    assert find_spell(with_spell(steady(40, seed=6), 20, 2, 3.0), seed=0) is None


def test_too_few_samples_are_not_tested():
    assert find_spell(with_spell(steady(9, seed=8), 0, 4, 5.0), seed=0) is None
    assert find_spell([], seed=0) is None
    assert find_spell([1e-3] * 50, seed=0) is None  # all equal: no order to test
    assert find_spell([1e-3, float("nan")] * 20, seed=0) is None


def test_many_samples_are_scanned_in_blocks_and_the_extent_given_in_samples():
    samples = with_spell(steady(1000, seed=9), 300, 250, 1.5)
    spell = find_spell(samples, seed=0)
    assert spell is not None and spell.block == 10
    assert (spell.first, spell.last) == (300, 549)
    assert spell.factor == pytest.approx(1.5, rel=0.05)


def test_the_same_samples_get_the_same_verdict_and_it_is_stored_whole():
    samples = with_spell(steady(40, seed=10), 5, 12, 1.8)
    spell = find_spell(samples, seed=3)
    assert spell == find_spell(list(samples), seed=3)
    assert SlowSpell.from_json(json.loads(json.dumps(spell.to_json()))) == spell
    assert spell.to_json()["share"] == pytest.approx(0.3)
    assert spell.describe().startswith("slow spell: samples 6-17 of 40 (30%) at 1.8")


def recorded(path: str, scenario: str, backend: str) -> list[float]:
    run = json.loads((REPO_ROOT / path).read_text())
    (record,) = [r for r in run["records"] if (r["scenario"], r["backend"]) == (scenario, backend)]
    return record["samples_s"]


def test_a_recorded_spell_is_found_and_its_shuffles_are_not():
    """``sequential-jax-sync`` in the smoke run of 2026-11-25: its first 118 of 760 samples
    took 12-18 ms, the next three 9.0, 6.5 and 4.8 ms, the rest about 2 ms."""
    samples = recorded(
        "tests/support/data/results-2026-11-25/smoke.json", "tridiagonal", "sequential-jax-sync"
    )
    spell = find_spell(samples, seed=0)
    assert spell is not None and spell.first == 0 and 117 <= spell.last <= 120
    assert spell.factor > 5
    rng = np.random.default_rng(0)
    fired = sum(find_spell(rng.permutation(samples), seed=k) is not None for k in range(20))
    assert fired == 0


positive_noise = st.floats(0.0, 0.05)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(40, 100),  # with fewer, a quarter is too short to be told from chance
    place=st.floats(0, 1),
    share=st.floats(0.25, 0.75),
    factor=st.floats(2.0, 8.0),
    noise=positive_noise,
    seed=st.integers(0, 2**16),
)
def test_a_clear_spell_is_found_where_it_is(n, place, share, factor, noise, seed):
    length = max(5, round(share * n))
    first = round(place * (n - length))
    samples = with_spell(steady(n, seed, noise), first, length, factor)
    spell = find_spell(samples, seed=seed)
    assert spell is not None
    assert abs(spell.first - first) <= 1 and abs(spell.last - (first + length - 1)) <= 1
    assert spell.factor >= MIN_FACTOR


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(10, 100),
    first=st.integers(0, 50),
    factor=st.floats(1.0, 4.0),
    scale=st.floats(1e-6, 1e3),
    seed=st.integers(0, 2**16),
)
def test_the_verdict_does_not_depend_on_the_unit_and_mirrors_with_the_order(
    n, first, factor, scale, seed
):
    samples = with_spell(steady(n, seed, 0.2), min(first, n - 1), n // 3, factor)
    spell = find_spell(samples, seed=seed)
    scaled = find_spell(samples * scale, seed=seed)
    mirrored = find_spell(samples[::-1], seed=seed)
    if spell is None:
        assert scaled is None and mirrored is None
        return
    assert (scaled.first, scaled.last, scaled.p_value) == (spell.first, spell.last, spell.p_value)
    assert scaled.factor == pytest.approx(spell.factor)
    assert (mirrored.first, mirrored.last) == (n - 1 - spell.last, n - 1 - spell.first)


def test_a_spell_planted_in_a_backend_is_found_through_the_timing_loop():
    """The ``planted`` backend spins 5x as long for a quarter of its 40 samples, placed by
    the seed; the timing loop (`scanbench.timing.repeat`, in `measure`) times it."""
    scenario = planted_scenario.SCENARIO
    size = scenario.size("obvious")
    for seed in (0, 1):
        record = measure(
            scenario,
            scenario.backend("planted"),
            size,
            Target("float64", seed),
            planted_scenario.timing(size["samples"]),
            probes=False,
        )
        assert record.status == "ok" and len(record.samples_s) == size["samples"]
        first, last = planted_scenario.window(size["samples"], seed)
        spell = find_spell(record.samples_s, seed)
        assert spell is not None, record.samples_s
        assert found_where_planted(spell, record.samples_s, first, last), (spell, first, last)
