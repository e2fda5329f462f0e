"""A scenario whose ``planted`` backend slows itself down for a window of calls: a real
slow spell, timed by the real timing loop, for the slow-spell test (`scanbench.spells`).

Each call keeps its thread busy for its size's ``call_s`` of its own CPU time (the work is the same
whatever else runs; only the wall time a busy machine adds varies). ``planted`` spins the
size's ``factor`` times as long for `SHARE` of the samples: the calls whose sample index
(the checked first call and the warm-up call come before the samples:
`CALLS_BEFORE_SAMPLES`) lies in `window(samples, seed)`, a window placed at random by the
cell's seed. ``steady`` is the same call without the spell.

``smoke``, ``default`` and ``long`` plant the calibration's spell (`FACTOR`, over 40 and
400 samples of a 2 ms call, and over 40 of a 20 ms call, which spans several time slices
of a busy machine's scheduler); ``obvious`` one that a busy machine's noise cannot hide
(a 2 ms call preempted for a time slice takes about 6 ms), once per process;
``recurring`` the same, again each time the worker samples the call (the sampling set
aside in the worker and taken again has it too: the next remedy is a fresh worker).
A size's ``samples`` is the
number of samples the cell must take for the window to be where it says: `timing` gives
those settings.

Written against the public API only, as a user's scenario file would be.
"""

from __future__ import annotations

import itertools
import time

import numpy as np

from scanbench import Backend, MismatchError, Scenario, Size, Strategy, TimingConfig

CALL_S = 2e-3
LONG_CALL_S = 20e-3
FACTOR = 1.5  # the calibration's spell (docs/methodology.md)
OBVIOUS = 5.0
SHARE = 0.25
ONCE = {"recurs": False}  # the spell in a worker's first sampling only
CALLS_BEFORE_SAMPLES = 2  # the checked first call and one warm-up call (scanbench.timing)


def spin(seconds: float) -> None:
    """Keep this thread busy for ``seconds`` of its own CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def window(samples: int, seed: int) -> tuple[int, int]:
    """(first, last) sample index of the planted spell: `SHARE` of ``samples`` long, placed
    at random by ``seed``."""
    length = round(SHARE * samples)
    first = int(np.random.default_rng(seed).integers(0, samples - length + 1))
    return first, first + length - 1


def timing(samples: int, warmup: int = CALLS_BEFORE_SAMPLES - 1) -> TimingConfig:
    """The sampling settings that take exactly ``samples`` samples after ``warmup``
    warm-up calls (whatever the budget and the interval)."""
    return TimingConfig(
        warmup=warmup,
        min_samples=samples,
        max_count=samples,
        target_width=0.0,
        max_time_s=3600.0,
    )


def _prepare(planted: bool):
    def prepare(inputs, size):
        first, last = window(size["samples"], int(inputs["seed"])) if planted else (-1, -1)
        calls = itertools.count(-CALLS_BEFORE_SAMPLES)  # the first sample is call 0
        return {
            "x": inputs["x"],
            "calls": calls,
            "window": (first, last),
            "factor": size["factor"],
            "call_s": size["call_s"],
            # calls per sampling (its warm-up call and its samples) when the spell recurs
            "period": size["samples"] + CALLS_BEFORE_SAMPLES - 1 if size["recurs"] else None,
        }

    return prepare


def run(prepared):
    sample = next(prepared["calls"])
    if prepared["period"] and sample >= 0:  # the same place in every sampling
        sample %= prepared["period"]
    first, last = prepared["window"]
    spin(prepared["call_s"] * (prepared["factor"] if first <= sample <= last else 1.0))
    return 2.0 * prepared["x"]


def _check(output, expected, dtype):
    error = float(np.max(np.abs(np.asarray(output) - expected)))
    if error > 1e-12:
        raise MismatchError("spells output differs", error, 1e-12)
    return error


SCENARIO = Scenario(
    name="spells",
    description="a call of known CPU time, and the same call slowed down for a window of calls",
    sizes={
        "smoke": Size("smoke", {**ONCE, "samples": 40, "factor": FACTOR, "call_s": CALL_S}),
        # scanned in blocks of 4 samples
        "default": Size("default", {**ONCE, "samples": 400, "factor": FACTOR, "call_s": CALL_S}),
        "long": Size("long", {**ONCE, "samples": 40, "factor": FACTOR, "call_s": LONG_CALL_S}),
        "obvious": Size("obvious", {**ONCE, "samples": 40, "factor": OBVIOUS, "call_s": CALL_S}),
        "recurring": Size(
            "recurring", {"recurs": True, "samples": 40, "factor": OBVIOUS, "call_s": CALL_S}
        ),
    },
    make_inputs=lambda size, seed, dtype: {"x": np.arange(4, dtype=dtype), "seed": np.int64(seed)},
    reference=lambda inputs: 2.0 * inputs["x"],
    check=_check,
    work=lambda size, dtype: {"calls": 1.0},
    backends={
        "steady": Backend("steady", Strategy.SEQUENTIAL, "numpy", _prepare(False), run),
        "planted": Backend("planted", Strategy.SEQUENTIAL, "numpy", _prepare(True), run),
    },
    throughput_unit="calls",
    dtypes=("float64",),
)
