"""Timing logic with a fake clock: counts, stopping rules, statistics."""

from __future__ import annotations

import numpy as np
import pytest

from scanbench.api import InputError
from scanbench.statistics import summarize
from scanbench.timing import Stop, TimingConfig, relative_width, repeat, time_call


class FakeClock:
    """A clock that only moves when a fake call says how long it took."""

    def __init__(self) -> None:
        self.now = 100.0
        self.calls = 0

    def __call__(self) -> float:
        return self.now


def fake_run(clock: FakeClock, durations):
    """A run function whose n-th call takes durations[n] seconds of fake time."""
    schedule = iter(durations)

    def run(prepared):
        clock.calls += 1
        clock.now += next(schedule)
        return prepared

    return run


def no_wait(value):
    return value


def test_time_call_measures_one_call():
    clock = FakeClock()
    output, seconds = time_call(fake_run(clock, [0.25]), "x", clock, no_wait)
    assert output == "x" and seconds == 0.25


def test_repeat_stops_when_the_interval_is_narrow_enough():
    clock = FakeClock()
    config = TimingConfig(warmup=2, min_count=3, target_width=0.02, max_time_s=100.0)
    timed = repeat(fake_run(clock, [1.0] * 100), "out", config, clock, no_wait)
    # identical samples: the interval has zero width once there are enough for one (6)
    assert timed.samples == (1.0,) * 6 and timed.stop is Stop.CONVERGED
    assert timed.rel_width == 0.0
    assert clock.calls == 2 + 6  # warm-up calls are made but not timed
    assert timed.output == "out" and timed.warmup_calls == 2


def test_repeat_continues_until_min_time():
    clock = FakeClock()
    config = TimingConfig(warmup=0, min_time_s=1.0, min_count=3, target_width=1.0)
    timed = repeat(fake_run(clock, [0.125] * 100), None, config, clock, no_wait)
    assert timed.samples == (0.125,) * 8  # 8 x 0.125 s reaches 1.0 s (exact in binary)


def test_repeat_respects_max_count():
    clock = FakeClock()
    config = TimingConfig(warmup=0, min_time_s=10.0, min_count=1, max_count=7)
    timed = repeat(fake_run(clock, [1e-6] * 100), None, config, clock, no_wait)
    assert len(timed.samples) == 7 and timed.stop is Stop.MAX_COUNT


def test_repeat_stops_at_the_budget_when_the_median_stays_uncertain():
    clock = FakeClock()
    noisy = list(np.random.default_rng(0).uniform(0.05, 0.15, 1000))
    config = TimingConfig(warmup=0, min_time_s=0.0, max_time_s=2.0, target_width=0.001)
    timed = repeat(fake_run(clock, noisy), None, config, clock, no_wait)
    assert timed.stop is Stop.BUDGET
    assert 2.0 <= sum(timed.samples) < 2.0 + 0.15
    assert timed.rel_width is not None and timed.rel_width > 0.001


def test_repeat_converges_faster_on_quiet_samples_than_on_noisy_ones():
    rng = np.random.default_rng(1)
    config = TimingConfig(warmup=0, min_time_s=0.0, max_time_s=1000.0, target_width=0.02)
    counts = []
    for spread in (0.001, 0.05):
        clock = FakeClock()
        durations = list(rng.normal(0.01, 0.01 * spread, 100_000))
        timed = repeat(fake_run(clock, durations), None, config, clock, no_wait)
        assert timed.stop is Stop.CONVERGED and timed.rel_width <= 0.02
        counts.append(len(timed.samples))
    assert counts[0] < counts[1]


def test_a_single_call_over_the_budget_is_one_sample():
    clock = FakeClock()
    config = TimingConfig(warmup=1, min_count=3, max_time_s=5.0)
    timed = repeat(fake_run(clock, [7.0] * 10), None, config, clock, no_wait)
    assert timed.samples == (7.0,) and timed.stop is Stop.SINGLE_CALL
    assert timed.rel_width is None  # "n=1, no interval"
    assert timed.sampling(config)["stop"] == "single call over budget"


def test_a_slow_first_call_skips_the_warm_up_and_takes_one_sample():
    clock = FakeClock()
    config = TimingConfig(warmup=1, max_time_s=5.0, warm_threshold_s=1.0)
    timed = repeat(fake_run(clock, [6.0] * 10), None, config, clock, no_wait, first_call_s=6.0)
    assert clock.calls == 1 and timed.samples == (6.0,)
    assert timed.warmup_skipped and timed.warmup_calls == 0


def test_a_first_call_slowed_by_compilation_alone_does_not_stop_sampling():
    """First call 6 s (a compile), then 10 ms calls: no warm-up, and sampled as usual."""
    clock = FakeClock()
    config = TimingConfig(warmup=1, min_count=3, max_time_s=5.0, target_width=1.0)
    timed = repeat(fake_run(clock, [0.01] * 10), None, config, clock, no_wait, first_call_s=6.0)
    assert timed.warmup_skipped and timed.stop is not Stop.SINGLE_CALL
    assert len(timed.samples) >= 3 and timed.rel_width is not None


def test_a_first_call_over_a_second_skips_only_the_warm_up():
    clock = FakeClock()
    config = TimingConfig(warmup=1, min_count=3, max_time_s=100.0, target_width=1.0)
    timed = repeat(fake_run(clock, [2.0] * 10), None, config, clock, no_wait, first_call_s=2.0)
    assert timed.warmup_skipped and clock.calls == len(timed.samples) >= 3


def test_on_sample_reports_progress_outside_the_timed_region():
    clock = FakeClock()
    seen = []

    def on_sample(count):
        clock.now += 100.0  # slow progress reporting must not show in the samples
        seen.append(count)

    config = TimingConfig(warmup=0, min_count=3, min_time_s=0.0, target_width=1.0)
    timed = repeat(fake_run(clock, [0.5] * 20), None, config, clock, no_wait, on_sample=on_sample)
    assert set(timed.samples) == {0.5} and seen == list(range(1, len(timed.samples) + 1))


def test_relative_width_needs_enough_samples():
    assert relative_width([1.0, 1.1, 0.9], 0.95) is None
    width = relative_width([1.0, 1.1, 0.9, 1.05, 0.95, 1.0, 1.02], 0.95)
    assert width == pytest.approx(0.2)  # min and max of 7 samples bound the median at 95%


def test_repeat_waits_for_every_timed_result():
    clock = FakeClock()
    waited = []

    def wait(value):
        clock.now += 0.5  # the result becomes ready 0.5 s after dispatch
        waited.append(value)
        return value

    config = TimingConfig(warmup=1, min_time_s=0.0, min_count=3, max_count=3)
    timed = repeat(fake_run(clock, [0.25] * 10), 1, config, clock, wait)
    assert timed.samples == (0.75, 0.75, 0.75)
    assert len(waited) == 4


def test_summarize_statistics():
    samples = [5.0, 1.0, 2.0, 4.0, 3.0, 6.0, 7.0]
    stats = summarize(samples, confidence=0.95)
    assert stats["median"] == 4.0 and stats["min"] == 1.0 and stats["max"] == 7.0
    assert stats["q25"] == 2.5 and stats["q75"] == 5.5 and stats["iqr"] == 3.0
    assert stats["mean"] == 4.0
    assert stats["stddev"] == pytest.approx(np.std(samples, ddof=1))
    # the distribution-free interval of 7 samples at 95%: the smallest and largest
    assert (stats["ci_low"], stats["ci_high"]) == (1.0, 7.0)
    assert stats["count"] == 7


def test_the_stored_interval_is_the_one_the_stop_rule_measured():
    """One interval per figure: the record's ``ci_low`` / ``ci_high`` span exactly the
    relative width the sampling stop rule saw."""
    rng = np.random.default_rng(4)
    for count in (6, 20, 301, 5000):
        samples = rng.lognormal(-7, 0.2, count)
        stats = summarize(samples, confidence=0.95)
        width = relative_width(samples, 0.95)
        assert width == pytest.approx((stats["ci_high"] - stats["ci_low"]) / stats["median"])


def test_summarize_interval_narrows_with_more_samples():
    rng = np.random.default_rng(0)
    few = summarize(rng.normal(1.0, 0.1, 10))
    many = summarize(rng.normal(1.0, 0.1, 1000))
    assert many["ci_high"] - many["ci_low"] < few["ci_high"] - few["ci_low"]


def test_summarize_edge_cases():
    single = summarize([2.0])
    assert single["median"] == 2.0 and single["ci_low"] is None and single["stddev"] == 0.0
    five = summarize([1.0, 2.0, 3.0, 4.0, 5.0])  # too few for a 95% interval
    assert five["ci_low"] is None and five["ci_high"] is None
    constant = summarize([2.0] * 8)
    assert constant["ci_low"] == constant["ci_high"] == 2.0
    with pytest.raises(InputError, match="empty"):
        summarize([])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"warmup": -1}, "warmup"),
        ({"min_time_s": -1.0}, "min_time"),
        ({"min_count": 0}, "min_count"),
        ({"min_count": 10, "max_count": 5}, "max_count"),
        ({"confidence": 1.5}, "confidence"),
        ({"max_time_s": 0.0}, "max_time"),
        ({"target_width": -0.1}, "target_width"),
        ({"warm_threshold_s": -1.0}, "warm_threshold"),
    ],
)
def test_timing_config_rejects_bad_values(kwargs, message):
    with pytest.raises(InputError, match=message):
        TimingConfig(**kwargs)


@pytest.mark.parametrize("confidence", [0.95, 0.99, 0.9])
@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_the_median_interval_is_the_one_scipy_quantile_test_picks(confidence, alternative):
    from scipy import stats

    from scanbench.statistics import median_bound_indices, median_interval

    rng = np.random.default_rng(0)
    alpha = 1 - confidence if alternative != "two-sided" else (1 - confidence) / 2
    for count in range(1, 1001):
        low, high = median_bound_indices(count, confidence, alternative)
        binom = stats.binom(count, 0.5)
        expected_low = int(binom.ppf(alpha)) - 1 if alternative != "less" else -1
        expected_high = int(binom.isf(alpha)) if alternative != "greater" else count
        assert (low, high) == (expected_low, expected_high), count
        if count <= 200:  # and the same interval on data (scipy: NaN where no bound)
            values = rng.lognormal(size=count)
            test = stats.quantile_test(values, q=np.median(values), p=0.5, alternative=alternative)
            ci = test.confidence_interval(confidence)
            got = median_interval(values, confidence, alternative)
            for want, have in zip((ci.low, ci.high), got, strict=True):
                assert have == want or (not np.isfinite(want) and not np.isfinite(have))
            if alternative == "two-sided":
                width = relative_width(values, confidence)
                if np.isfinite(ci.low) and np.isfinite(ci.high):
                    assert width == pytest.approx((ci.high - ci.low) / np.median(values))
                else:
                    assert width is None
