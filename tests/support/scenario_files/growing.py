"""A scenario whose backends have a known cost per call: a fixed part and a part per item,
each a busy loop on the thread's CPU clock (the work is the same whatever else runs; only
the wall time a busy machine adds varies).

``loop`` pays little per call and much per item, ``batched`` the other way round: their
costs cross at ``CROSSOVER`` items. Written against the public API only, as a user's
scenario file would be.
"""

from __future__ import annotations

import time

import numpy as np

from scanbench import Axis, Backend, MismatchError, Scenario, Size, Strategy

LOOP_FIXED_S, LOOP_PER_ITEM_S = 0.2e-3, 0.1e-3
BATCHED_FIXED_S, BATCHED_PER_ITEM_S = 1.0e-3, 0.01e-3
CROSSOVER = (BATCHED_FIXED_S - LOOP_FIXED_S) / (LOOP_PER_ITEM_S - BATCHED_PER_ITEM_S)  # 8.9


def spin(seconds: float) -> None:
    """Keep this thread busy for ``seconds`` of its own CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def loop(x: np.ndarray) -> np.ndarray:
    spin(LOOP_FIXED_S)
    out = np.empty_like(x)
    for index, value in enumerate(x):
        spin(LOOP_PER_ITEM_S)
        out[index] = 2.0 * value
    return out


def batched(x: np.ndarray) -> np.ndarray:
    spin(BATCHED_FIXED_S + BATCHED_PER_ITEM_S * len(x))
    return 2.0 * x


def _check(output, expected, dtype):
    error = float(np.max(np.abs(np.asarray(output) - expected)))
    if error > 1e-12:
        raise MismatchError("growing output differs", error, 1e-12)
    return error


def _backend(name: str, strategy: Strategy, run) -> Backend:
    return Backend(name, strategy, "numpy", lambda inputs, size: inputs, run)


SCENARIO = Scenario(
    name="growing",
    description="doubling items, by a loop and in one batch, of known cost",
    sizes={"smoke": Size("smoke", {"n": 4}), "default": Size("default", {"n": 16})},
    make_inputs=lambda size, seed, dtype: np.arange(size["n"], dtype=dtype),
    reference=lambda inputs: 2.0 * inputs,
    check=_check,
    work=lambda size, dtype: {"items": float(size["n"])},
    backends={
        "loop": _backend("loop", Strategy.SEQUENTIAL, loop),
        "batched": _backend("batched", Strategy.VMAPPED, batched),
    },
    throughput_unit="items",
    dtypes=("float64",),
    axes={"n": Axis("n", "items", "items doubled per call")},
)
