"""Timing logic with a fake clock: counts, stopping rules, statistics."""

from __future__ import annotations

import numpy as np
import pytest

from harness.api import InputError
from harness.statistics import summarize
from harness.timing import TimingConfig, repeat, time_call


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


def test_repeat_stops_at_min_count_when_min_time_is_reached():
    clock = FakeClock()
    config = TimingConfig(warmup=2, min_time_s=0.1, min_count=5)
    samples, last = repeat(fake_run(clock, [1.0] * 100), "out", config, clock, no_wait)
    assert samples == (1.0,) * 5
    assert clock.calls == 2 + 5  # warm-up calls are made but not timed
    assert last == "out"


def test_repeat_continues_until_min_time():
    clock = FakeClock()
    config = TimingConfig(warmup=0, min_time_s=1.0, min_count=3)
    samples, _ = repeat(fake_run(clock, [0.125] * 100), None, config, clock, no_wait)
    assert samples == (0.125,) * 8  # 8 x 0.125 s reaches 1.0 s (exact in binary)


def test_repeat_respects_max_count():
    clock = FakeClock()
    config = TimingConfig(warmup=0, min_time_s=10.0, min_count=1, max_count=7)
    samples, _ = repeat(fake_run(clock, [1e-6] * 100), None, config, clock, no_wait)
    assert len(samples) == 7


def test_repeat_waits_for_every_timed_result():
    clock = FakeClock()
    waited = []

    def wait(value):
        clock.now += 0.5  # the result becomes ready 0.5 s after dispatch
        waited.append(value)
        return value

    config = TimingConfig(warmup=1, min_time_s=0.0, min_count=3)
    samples, _ = repeat(fake_run(clock, [0.25] * 10), 1, config, clock, wait)
    assert samples == (0.75, 0.75, 0.75)
    assert len(waited) == 4


def test_summarize_statistics():
    samples = [5.0, 1.0, 2.0, 4.0, 3.0]
    stats = summarize(samples, confidence=0.95, seed=1)
    assert stats["median"] == 3.0 and stats["min"] == 1.0 and stats["max"] == 5.0
    assert stats["q25"] == 2.0 and stats["q75"] == 4.0 and stats["iqr"] == 2.0
    assert stats["mean"] == 3.0
    assert stats["stddev"] == pytest.approx(np.std(samples, ddof=1))
    assert stats["ci_low"] <= stats["median"] <= stats["ci_high"]
    assert stats["count"] == 5
    assert summarize(samples, seed=1) == stats  # the bootstrap is seeded


def test_summarize_bootstrap_interval_narrows_with_more_samples():
    rng = np.random.default_rng(0)
    few = summarize(rng.normal(1.0, 0.1, 10))
    many = summarize(rng.normal(1.0, 0.1, 1000))
    assert many["ci_high"] - many["ci_low"] < few["ci_high"] - few["ci_low"]


def test_summarize_edge_cases():
    single = summarize([2.0])
    assert single["median"] == 2.0 and single["ci_low"] is None and single["stddev"] == 0.0
    constant = summarize([2.0, 2.0, 2.0])
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
    ],
)
def test_timing_config_rejects_bad_values(kwargs, message):
    with pytest.raises(InputError, match=message):
        TimingConfig(**kwargs)
